"""Reversed rankings: the "-r" systems of the study."""
import pandas as pd
import pyterrier as pt

from ._util import validate_columns


class ReverseOrder(pt.Transformer):
    """Reverses each query's ranking: the top-ranked document becomes the last context.

    ``rank`` is renumbered from 0 in the new order, rows come out in that order, and ``score``
    becomes ``n - rank`` (``n`` documents for the query), so measures that rank by score, such as
    nDCG@k in ``pt.Experiment``, evaluate the reversed ranking the reader sees.
    ``(bm25 % k) >> ReverseOrder()`` is BM25-r.

    Example::

        bm25_r = dataset.bm25() % 5 >> ReverseOrder() >> reader
    """

    def __init__(self):
        super().__init__()

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'docno'])
        if inp.empty:
            return inp
        frame = inp if 'rank' in inp.columns else pt.model.add_ranks(inp.copy())
        frame = frame.sort_values(['qid', 'rank'], ascending=[True, False], kind='stable')
        rank = frame.groupby('qid', sort=False).cumcount()
        size = frame.groupby('qid', sort=False)['qid'].transform('size')
        frame = frame.assign(score=(size - rank).astype(float), rank=rank)
        return frame.reset_index(drop=True)

    def __repr__(self):
        return 'ReverseOrder()'
