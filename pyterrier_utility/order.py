"""Reversed rankings: the "-r" systems of the study."""
import pandas as pd
import pyterrier as pt
import pyterrier_alpha as pta


class ReverseOrder(pt.Transformer):
    """Reverses each query's ranking: the top-ranked document becomes the last context.

    Scores are kept as they were; ``rank`` is renumbered from 0 in the new order, and rows come out
    in that order. ``(bm25 % k) >> ReverseOrder()`` is BM25-r.

    Example::

        bm25_r = dataset.bm25() % 5 >> ReverseOrder() >> reader
    """

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pta.validate.result_frame(inp)
        if inp.empty:
            return inp
        frame = inp if 'rank' in inp.columns else pt.model.add_ranks(inp.copy())
        frame = frame.sort_values(['qid', 'rank'], ascending=[True, False], kind='stable')
        frame = frame.assign(rank=frame.groupby('qid', sort=False).cumcount())
        return frame.reset_index(drop=True)
