"""Which document carried the utility: per-document attribution of U.

:mod:`.games` holds the games over context positions and their estimators (exact Shapley; Shapley
by permutations, Kernel SHAP and truncated Monte Carlo; ContextCite; leave-one-out; single documents);
:mod:`.quality` judges them on held-out coalitions and against exact Shapley;
:class:`ContextAttribution` plays them with the reader and the answer-quality scorer;
:func:`sweep` attributes a study's contexts per label set by several methods at once;
:func:`utility_qrels` grades documents by the utility they carried; :func:`attribution_table` says
where the utility sits.

Example::

    attribution = ContextAttribution(reader, scorer, method='shapley')
    shares = (bm25 % 5 >> attribution)(topics)
    write_trec_qrels(utility_qrels(shares), 'utility.qrels')
"""
from .games import EFFICIENT, MAX_EXACT_K, SAMPLED, Estimate, coalition_name, coalitions, estimate, parse_coalition
from .qrels import THRESHOLD, utility_qrels, write_trec_qrels
from .quality import held_out, lds, quality_summary, quality_table
from .summary import attribution_table
from .sweep import Sweep, methods_of, sweep
from .transformer import ContextAttribution

__all__ = ['ContextAttribution', 'EFFICIENT', 'Estimate', 'MAX_EXACT_K', 'SAMPLED', 'Sweep', 'THRESHOLD',
           'attribution_table', 'coalition_name', 'coalitions', 'estimate', 'held_out', 'lds', 'methods_of',
           'parse_coalition', 'quality_summary', 'quality_table', 'sweep', 'utility_qrels', 'write_trec_qrels']
