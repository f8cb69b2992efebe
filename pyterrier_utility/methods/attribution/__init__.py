"""Which document carried the utility: per-document attribution of U.

:mod:`.games` holds the games over context positions and their estimators (exact and sampled
Shapley, leave-one-out, single documents); :class:`ContextAttribution` plays them with the reader
and the answer-quality scorer; :func:`utility_qrels` grades documents by the utility they
carried; :func:`attribution_table` says where the utility sits.

Example::

    attribution = ContextAttribution(reader, scorer, method='shapley')
    shares = (bm25 % 5 >> attribution)(topics)
    write_trec_qrels(utility_qrels(shares), 'utility.qrels')
"""
from .games import MAX_EXACT_K, Estimate, coalition_name, coalitions, estimate, parse_coalition
from .qrels import THRESHOLD, utility_qrels, write_trec_qrels
from .summary import attribution_table
from .transformer import ContextAttribution

__all__ = ['ContextAttribution', 'Estimate', 'MAX_EXACT_K', 'THRESHOLD', 'attribution_table', 'coalition_name',
           'coalitions', 'estimate', 'parse_coalition', 'utility_qrels', 'write_trec_qrels']
