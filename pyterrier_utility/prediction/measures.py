"""The IR measures of a context against relevance judgements (nDCG@k, P@k, AP@k, RR@k... through
ir_measures), as signals beside the predictors."""
from typing import Union

import ir_measures
import pandas as pd

from .._frames import validate_columns
from ._base import QueryPredictor


class ContextMeasure(QueryPredictor):
    """One ir_measures measure of each query's ranking (its rows, in rank order) against ``qrels``;
    adds the measure's name as a column (``nDCG@3``, ``P@3``...). A query without judgements gets
    the measure's value with none relevant (ir_measures' default).

    Args:
        qrels: ``qid``, ``docno``, ``label``.
        measure: an ir_measures measure or its name (``'AP@3'``).

    Example::

        pipeline = bm25 % 3 >> pu.prediction.ContextMeasure(dataset.get_qrels(), 'nDCG@3')
    """

    def __init__(self, qrels: pd.DataFrame, measure: Union[str, ir_measures.Measure] = 'nDCG@10'):
        validate_columns('ContextMeasure qrels', qrels, ['qid', 'docno', 'label'])
        self.qrels = qrels
        self.measure = ir_measures.parse_measure(measure) if isinstance(measure, str) else measure
        self._qrels = pd.DataFrame({'query_id': qrels['qid'].astype(str), 'doc_id': qrels['docno'].astype(str),
                                    'relevance': qrels['label'].astype(int)})
        self.column = str(self.measure)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != '_qrels'}

    def __setstate__(self, state):
        self.__init__(state['qrels'], state['measure'])

    def predict(self, ranking: pd.DataFrame) -> float:
        run = pd.DataFrame({'query_id': ranking['qid'].astype(str), 'doc_id': ranking['docno'].astype(str),
                            'score': -pd.Series(range(len(ranking)), dtype=float).to_numpy()})
        run = run.drop_duplicates('doc_id')  # a document counted once, at its first position
        qid = str(ranking['qid'].iloc[0])
        qrels = self._qrels[self._qrels['query_id'] == qid]
        found = [m.value for m in ir_measures.iter_calc([self.measure], qrels, run)]
        return float(found[0]) if found else 0.0

    def __repr__(self) -> str:
        return f"ContextMeasure(qrels=<{len(self.qrels)} judgements>, measure={str(self.measure)!r})"
