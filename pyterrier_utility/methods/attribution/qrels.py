"""Utility qrels: documents graded by the utility they carried, as TREC qrels (eRAG's idea, with
Shapley labels), so that a retriever can be evaluated by the utility its documents brought."""
from pathlib import Path
from typing import Union

import pandas as pd

from ..._checks import check
from ..._frames import validate_columns
from ...errors import FrameError

#: The share of U (``phi_utility``) at and above which a document is graded 2.
THRESHOLD = 0.1


def utility_qrels(attribution: pd.DataFrame, threshold: float = THRESHOLD) -> pd.DataFrame:
    """Graded qrels from attribution rows (:class:`~.transformer.ContextAttribution`'s output, or
    ``attribution.csv``): per (qid, docno), the mean ``phi_utility`` over the contexts it was
    attributed in (several systems or k), then grade 2 where it is at least ``threshold`` (the
    document alone carried that share of the 0-shot answer quality), 1 where it is positive, 0
    otherwise (no help, or harm). Documents whose ``phi_utility`` is NaN in every context (P_0 = 0,
    or a query without relevant documents) are left out: their utility is unknown.

    Args:
        attribution: ``qid``, ``docno``, ``phi_utility``.
        threshold: the least mean ``phi_utility`` of grade 2 (> 0).

    Example::

        qrels = utility_qrels((bm25 % 5 >> ContextAttribution(reader, scorer))(topics))
        pt.Experiment([bm25], topics, qrels, [nDCG@5])
    """
    validate_columns('utility_qrels', attribution, ['qid', 'docno', 'phi_utility'])
    check(threshold > 0, 'utility_qrels', f'threshold must be > 0, got {threshold!r}')
    frame = attribution.astype({'qid': str, 'docno': str})
    share = frame.groupby(['qid', 'docno'], sort=False)['phi_utility'].mean().dropna()
    label = (share > 0).astype(int) + (share >= threshold).astype(int)
    return label.rename('label').reset_index()


def check_trec_ids(owner: str, frame: pd.DataFrame) -> None:
    """A :class:`~pyterrier_utility.errors.FrameError` naming the first qid or docno of ``frame``
    that holds white space: a TREC file separates its fields by white space, so trec_eval and
    ir_measures would read another id back (``'AB 12'`` as ``'AB'``)."""
    for column in ('qid', 'docno'):
        ids = frame[column].astype(str)
        spaced = ids[ids.str.contains(r'\s', regex=True)]
        if len(spaced):
            where = f' (qid {frame.loc[spaced.index[0], "qid"]})' if column == 'docno' else ''
            raise FrameError(f'{owner}: {column} {spaced.iloc[0]!r}{where} holds white space, which TREC qrels '
                             '(fields separated by white space) cannot hold: trec_eval and ir_measures would read '
                             f'another {column} back; give the collection {column}s without white space')


def write_trec_qrels(qrels: pd.DataFrame, path: Union[str, Path]) -> None:
    """Writes ``qid``, ``docno``, ``label`` as TREC qrels (``qid 0 docno label``, one a line), as
    trec_eval and ``ir_measures.read_trec_qrels`` read them; an id holding white space is refused
    (:func:`check_trec_ids`) and nothing is written."""
    validate_columns('write_trec_qrels', qrels, ['qid', 'docno', 'label'])
    check_trec_ids('write_trec_qrels', qrels)
    Path(path).write_text(''.join(f'{q} 0 {d} {int(x)}\n' for q, d, x in zip(qrels['qid'], qrels['docno'],
                                                                           qrels['label'])))
