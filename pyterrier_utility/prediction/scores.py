"""Post-retrieval predictors over a ranking's scores: NQC (Shtok et al., TOIS 2012) and the authors'
variant of it, WIG (Zhou & Croft, SIGIR 2007), SMV (Tao & Wu, CIKM 2014) and the top score.

NQC, WIG and SMV compare the top scores with the score of the corpus as one document, ``score(D)``:
give it as ``corpus_score`` (a function of the query text, e.g. a query-likelihood model's score of
the collection). Without it, the mean score of the whole ranking given (all its rows, e.g. BM25's
top 100) stands in for it: a retrieval model such as BM25 has no score for the corpus as one
document.
"""
import math
from typing import Callable, Optional

import numpy as np
import pandas as pd

from ._base import QueryPredictor, depth
from .terms import TermStatistics, words


class _ScorePredictor(QueryPredictor):
    """A predictor over the top ``k`` scores of a ranking and ``score(D)``."""

    def __init__(self, k: int = 100, corpus_score: Optional[Callable[[str], float]] = None):
        self.k = depth(type(self).__name__, k)
        self.corpus_score = corpus_score

    @property
    def needs(self):  # type: ignore[override]
        return ('qid', 'docno', 'score') + (('query',) if self.corpus_score is not None else ())

    def reference(self, ranking: pd.DataFrame) -> float:
        """score(D): ``corpus_score`` of the query, or the mean score of the whole ranking."""
        if self.corpus_score is not None:
            return float(self.corpus_score(ranking['query'].iloc[0]))
        return float(ranking['score'].mean())

    def top(self, ranking: pd.DataFrame) -> np.ndarray:
        return ranking['score'].to_numpy(float)[:self.k]


class NQC(_ScorePredictor):
    """Normalized Query Commitment (Shtok, Kurland, Carmel, Raiber & Markovits, TOIS 2012): the
    standard deviation of the top ``k`` scores over abs(score(D)); adds ``nqc``.

    Args:
        k: the scores considered (the paper: 100).
        corpus_score: score(D) as a function of the query text; ``None``: the mean score of the whole
            ranking (see the module's note).

    Example::

        pipeline = bm25 >> NQC(k=100)
    """
    column = 'nqc'
    undefined = 'score(D) is 0'

    def predict(self, ranking: pd.DataFrame) -> float:
        reference = abs(self.reference(ranking))
        return float(np.std(self.top(ranking))) / reference if reference else float('nan')


class AuthorsNQC(QueryPredictor):
    """NQC as Tian, Ganguly & Macdonald compute it (ECIR 2026; their repository RAG_prediction,
    ``qpp/qpp_methods.py``): the variance of the top ``k`` scores times the query's largest IDF,
    log((N - df + 0.5) / (df + 0.5)), over the query's words each stemmed, a word that is not in the
    collection's statistics (a stopword included) counted with df = 1; adds ``nqc_authors``.

    Args:
        statistics: the collection's :class:`~pyterrier_utility.prediction.terms.TermStatistics`.
        k: the scores considered (the authors: 100).

    Example::

        pipeline = bm25 >> AuthorsNQC(stats, k=100)
    """
    column = 'nqc_authors'
    needs = ('qid', 'query', 'docno', 'score')
    undefined = 'the query has no word'

    def __init__(self, statistics: TermStatistics, k: int = 100):
        self.statistics = statistics
        self.k = depth('AuthorsNQC', k)

    def max_idf(self, query: str) -> float:
        n = self.statistics.n_docs
        dfs = np.array([self.statistics.df.get(t, 1) for t in self.statistics.stems(query)], float)
        return float(np.max(np.log((n - dfs + 0.5) / (dfs + 0.5)))) if len(dfs) else float('nan')

    def predict(self, ranking: pd.DataFrame) -> float:
        return float(np.var(ranking['score'].to_numpy(float)[:self.k])) * self.max_idf(ranking['query'].iloc[0])


class WIG(_ScorePredictor):
    """Weighted Information Gain (Zhou & Croft, SIGIR 2007): the mean over the top ``k`` of
    score(d) - score(D), over the square root of the query's length in words; adds ``wig``.

    Args:
        k: the documents considered (the paper: 5 for title queries).
        corpus_score: score(D) as a function of the query text; ``None``: the mean score of the whole
            ranking (see the module's note).

    Example::

        pipeline = bm25 >> WIG(k=5)
    """
    column = 'wig'
    undefined = 'the query has no word'

    def __init__(self, k: int = 5, corpus_score: Optional[Callable[[str], float]] = None):
        super().__init__(k, corpus_score)

    @property
    def needs(self):  # type: ignore[override]
        return ('qid', 'query', 'docno', 'score')

    def predict(self, ranking: pd.DataFrame) -> float:
        length = len(words(ranking['query'].iloc[0]))
        if not length:
            return float('nan')
        return float(np.mean(self.top(ranking) - self.reference(ranking))) / math.sqrt(length)


class SMV(_ScorePredictor):
    """Score Magnitude and Variance (Tao & Wu, CIKM 2014): the mean over the top ``k`` of
    score(d) * abs(ln(score(d) / mean)), ``mean`` that of the top ``k`` scores, over score(D); adds
    ``smv``. Scores must be positive (a logarithm of each).

    Args:
        k: the documents considered (the paper: 100).
        corpus_score: score(D) as a function of the query text; ``None``: the mean score of the whole
            ranking (see the module's note).

    Example::

        pipeline = bm25 >> SMV(k=100)
    """
    column = 'smv'
    undefined = 'a top score is not positive, or score(D) is 0'

    def predict(self, ranking: pd.DataFrame) -> float:
        top = self.top(ranking)
        reference = self.reference(ranking)
        if (top <= 0).any() or not reference:
            return float('nan')
        return float(np.mean(top * np.abs(np.log(top / top.mean())))) / reference


class MaxScore(QueryPredictor):
    """The score of the top-ranked document; adds ``max_score``.

    Example::

        pipeline = bm25 >> MaxScore()
    """
    column = 'max_score'

    def predict(self, ranking: pd.DataFrame) -> float:
        return float(ranking['score'].iloc[0])
