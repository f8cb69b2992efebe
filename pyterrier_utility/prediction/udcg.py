"""UDCG, the Utility and Distraction-aware Cumulative Gain of a context (Trappolini, Cuconasu, Filice,
Maarek & Silvestri, EACL 2026): relevant documents add the reader's readiness to answer from them,
irrelevant ones take away their distracting effect."""
import math
from typing import Optional, Sequence

import numpy as np
import pandas as pd

from .._frames import validate_columns
from ._base import QueryPredictor


def udcg(no_response: Sequence[float], relevant: Sequence[bool], relevant_weight: float = 1.0,
         irrelevant_weight: float = -1 / 3) -> float:
    """sigmoid((1/n) sum_i w_i (1 - no_response_i)) over a context's n documents, ``w_i`` the weight of
    document i's relevance; NaN for no documents or a NaN probability."""
    scores = 1 - np.asarray(no_response, dtype=float)
    if not len(scores) or not np.isfinite(scores).all():
        return float('nan')
    weights = np.where(np.asarray(relevant, dtype=bool), relevant_weight, irrelevant_weight)
    return 1 / (1 + math.exp(-float(np.mean(weights * scores))))


class UDCG(QueryPredictor):
    """UDCG of the query's top ``k`` documents, each scored by the reader given that document alone
    (the ``no_response`` column of :class:`~.abstention.NoResponse`):

        UDCG = sigmoid((1/n) sum_i w_i (1 - no_response_i)),

    ``w_i`` = ``relevant_weight`` for a relevant document (its utility counts) and ``irrelevant_weight``
    for any other (its distracting effect counts against). Every position weighs the same, 1/n, as in
    the authors' released implementation (github.com/GiovanniTRA/UDCG, with its default weights 1 and
    -1/3). Adds ``udcg``.

    Args:
        qrels: ``qid``, ``docno``, ``label``; a document is relevant when its label is positive
            (binarise ``label`` first for another threshold); an unjudged one is not.
        relevant_weight: the weight of a relevant document's utility.
        irrelevant_weight: the weight of an irrelevant document's distracting effect (negative).
        k: the documents of the context; ``None``: every row.

    Example::

        pipeline = bm25 % 5 >> pu.prediction.NoResponse(backend) >> pu.prediction.UDCG(dataset.get_qrels())
    """
    needs = ('qid', 'docno', 'no_response')
    column = 'udcg'
    undefined = 'no document or no probability'

    def __init__(self, qrels: pd.DataFrame, relevant_weight: float = 1.0, irrelevant_weight: float = -1 / 3,
                 k: Optional[int] = None):
        validate_columns('UDCG qrels', qrels, ['qid', 'docno', 'label'])
        self.qrels = qrels
        self.relevant_weight = relevant_weight
        self.irrelevant_weight = irrelevant_weight
        self.k = k
        positive = qrels[qrels['label'].astype(float) > 0]
        self._relevant = set(zip(positive['qid'].astype(str), positive['docno'].astype(str)))

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != '_relevant'}

    def __setstate__(self, state):
        self.__init__(state['qrels'], state['relevant_weight'], state['irrelevant_weight'], state['k'])

    def predict(self, ranking: pd.DataFrame) -> float:
        docs = ranking if self.k is None else ranking.head(self.k)
        relevant = [(str(q), str(d)) in self._relevant for q, d in zip(docs['qid'], docs['docno'])]
        return udcg(docs['no_response'], relevant, self.relevant_weight, self.irrelevant_weight)

    def __repr__(self) -> str:
        return (f'UDCG(qrels=<{len(self.qrels)} judgements>, relevant_weight={self.relevant_weight!r}, '
                f'irrelevant_weight={self.irrelevant_weight!r}, k={self.k!r})')
