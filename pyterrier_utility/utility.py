"""Context utility: the relative gain in answer quality that a context brings over no context."""
import numpy as np
import pandas as pd
import pyterrier as pt

from ._util import validate_columns, warn_qids
from .fbert import FBertScorer
from .reader import Reader


def utility(p_k, p_0):
    """U = (P_k - P_0) / P_0, elementwise; NaN where P_0 is 0 or either value is NaN."""
    p_k = np.asarray(p_k, dtype=float)
    p_0 = np.asarray(p_0, dtype=float)
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(p_0 == 0, np.nan, (p_k - p_0) / p_0)


class UtilityEvaluator(pt.Transformer):
    """Adds ``fbert`` (P_k), ``fbert_0shot`` (P_0) and ``utility`` (U) to a reader's output.

    P_k is the mean FBERT of the query's k-shot answers over samples; P_0 the mean FBERT of the same
    reader's 0-shot answers for the same samples (seeds). 0-shot answers come from the reader's
    memo, so every pipeline of an experiment sharing the reader reuses them. U = (P_k - P_0) / P_0;
    P_0 = 0 gives NaN and a warning naming the queries.

    Output: one row per context document (``sample`` dropped), with the three columns repeated on
    each row of a query; ``qanswer`` holds the first sample's answer (a string, as pyterrier-rag's
    measures expect) and, when the reader draws several samples, ``qanswers`` the tuple of all of
    them in sample order (what :class:`~pyterrier_utility.LLMRetEval` judges). So nDCG@k still
    applies, and the :data:`~pyterrier_utility.FBERT` and :data:`~pyterrier_utility.Utility`
    measures read it.

    Args:
        reader: the reader that produced the k-shot answers.
        scorer: the FBERT scorer.

    Example::

        pipeline = dataset.bm25() % 5 >> reader >> UtilityEvaluator(reader, scorer)
        pt.Experiment([pipeline], topics, qrels, [nDCG@5, FBERT, Utility])
    """

    def __init__(self, reader: Reader, scorer: FBertScorer):
        self.reader = reader
        self.scorer = scorer

    def _per_query(self, frame: pd.DataFrame) -> pd.Series:
        keys = frame.drop_duplicates(['qid', 'sample'])
        keys = keys.assign(p=self.scorer.score(keys['qid'], keys['qanswer']))
        return keys.groupby('qid', sort=False)['p'].mean()

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query', 'qanswer'])
        frame = inp if 'sample' in inp.columns else inp.assign(sample=0)
        if frame.empty:
            return inp.drop(columns=['sample'], errors='ignore').assign(
                fbert=pd.Series(dtype=float), fbert_0shot=pd.Series(dtype=float),
                utility=pd.Series(dtype=float))
        p_k = self._per_query(frame)
        zero = self.reader.zero_shot(frame[['qid', 'query']])
        p_0 = self._per_query(zero if 'sample' in zero.columns else zero.assign(sample=0))
        u = pd.Series(utility(p_k.values, p_0.reindex(p_k.index).values), index=p_k.index)
        warn_qids('utility is NaN because the 0-shot FBERT is 0', p_0.index[p_0 == 0])
        first = frame[frame['sample'] == frame['sample'].min()].drop(columns=['sample'])
        if frame['sample'].nunique() > 1:
            ordered = frame.sort_values('sample', kind='stable').drop_duplicates(['qid', 'sample'])
            first = first.assign(qanswers=first['qid'].map(ordered.groupby('qid', sort=False)['qanswer'].agg(tuple)))
        return first.assign(fbert=first['qid'].map(p_k), fbert_0shot=first['qid'].map(p_0),
                            utility=first['qid'].map(u)).reset_index(drop=True)

    def __repr__(self):
        return f'UtilityEvaluator({self.reader!r}, {self.scorer!r})'
