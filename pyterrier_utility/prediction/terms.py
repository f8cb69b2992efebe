"""Pre-retrieval predictors over the collection's term statistics: the maximum and mean IDF of the
query's terms and SCQ (Zhao, Scholer & Tsegay, ECIR 2008), with the statistics counted once from the
collection's own texts (:class:`TermStatistics`)."""
import math
import re
from collections import Counter
from typing import Any, Callable, Collection, Dict, Iterable, List

import numpy as np
import pandas as pd
import pyterrier as pt

from .._checks import check
from ._base import QueryPredictor

#: How SCQ's per-term values make one value per query (Zhao et al.: SumSCQ, AvgSCQ, MaxSCQ).
SCQ_AGGREGATIONS: Dict[str, Callable[..., Any]] = {'max': np.max, 'mean': np.mean, 'sum': np.sum}


def words(text: str) -> List[str]:
    """The words of a text: lower-cased runs of letters and digits."""
    return re.findall(r'[a-z0-9]+', str(text).lower())


class TermStatistics:
    """Document and collection frequencies of a collection's terms, counted from its texts with one
    tokeniser: lower case, runs of letters and digits, the stopwords left out, each term stemmed by
    Porter2 (NLTK's Snowball English stemmer, the stemmer of this package's PISA index).

    Args:
        df: term -> the number of documents holding it.
        cf: term -> its occurrences in the collection.
        n_docs: the documents of the collection.
        stopwords: the terms left out of texts and queries.
        name: what the statistics are of (shown by ``repr``).

    Example::

        stats = TermStatistics.from_texts(dataset.texts.values(), name='cranfield')
        stats.idf('lift'), stats.terms('what is the lift of a wing')
    """

    def __init__(self, df: Dict[str, int], cf: Dict[str, int], n_docs: int, stopwords: Collection[str] = (),
                 name: str = ''):
        check(n_docs > 0, 'TermStatistics', f'n_docs must be >= 1, got {n_docs!r}')
        self.df, self.cf, self.n_docs, self.name = dict(df), dict(cf), int(n_docs), name
        self.stopwords = frozenset(stopwords)
        from nltk.stem.snowball import SnowballStemmer
        self._stem = SnowballStemmer('english').stem

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != '_stem'}

    def __setstate__(self, state):
        self.__init__(state['df'], state['cf'], state['n_docs'], state['stopwords'], state['name'])

    @classmethod
    def from_texts(cls, texts: Iterable[str], stopwords: Collection[str] = (), name: str = '',
                   verbose: bool = True) -> 'TermStatistics':
        """The statistics of ``texts`` (one per document)."""
        stats = cls({}, {}, 1, stopwords, name)
        df: Counter = Counter()
        cf: Counter = Counter()
        n = 0
        for text in pt.tqdm(texts, desc='term statistics', unit='doc', disable=not verbose):
            terms = stats.terms(text)
            cf.update(terms)
            df.update(set(terms))
            n += 1
        return cls(df, cf, n, stopwords, name)

    def terms(self, text: str) -> List[str]:
        """The stemmed terms of ``text``, in order, stopwords left out."""
        return [self._stem(t) for t in words(text) if t not in self.stopwords]

    def stems(self, text: str) -> List[str]:
        """Every word of ``text`` stemmed, stopwords kept (as a query is split before a lexicon lookup)."""
        return [self._stem(t) for t in words(text)]

    def idf(self, term: str) -> float:
        """log(N / df) of a stemmed term; NaN for a term in no document."""
        df = self.df.get(term, 0)
        return math.log(self.n_docs / df) if df else float('nan')

    def __repr__(self) -> str:
        return f'TermStatistics({self.name or "unnamed"}, {self.n_docs} docs, {len(self.df)} terms)'


class _TermPredictor(QueryPredictor):
    """A predictor over the statistics of a query's distinct terms that occur in the collection."""
    needs = ('qid', 'query')
    undefined = 'no query term occurs in the collection'

    def __init__(self, statistics: TermStatistics):
        self.statistics = statistics

    def known_terms(self, query: str) -> List[str]:
        return [t for t in dict.fromkeys(self.statistics.terms(query)) if self.statistics.df.get(t, 0)]

    def predict(self, ranking: pd.DataFrame) -> float:
        terms = self.known_terms(ranking['query'].iloc[0])
        return self.aggregate(terms) if terms else float('nan')

    def aggregate(self, terms: List[str]) -> float:
        raise NotImplementedError


class MaxIDF(_TermPredictor):
    """The largest IDF, log(N / df), of the query's terms: a pre-retrieval predictor (He & Ounis, SPIRE
    2004), adding ``max_idf``.

    Args:
        statistics: the collection's :class:`TermStatistics`.

    Example::

        pipeline = bm25 >> MaxIDF(TermStatistics.from_texts(dataset.texts.values()))
    """
    column = 'max_idf'

    def aggregate(self, terms: List[str]) -> float:
        return max(self.statistics.idf(t) for t in terms)


class MeanIDF(_TermPredictor):
    """The mean IDF, log(N / df), of the query's terms (He & Ounis, SPIRE 2004), adding ``mean_idf``.

    Args:
        statistics: the collection's :class:`TermStatistics`.

    Example::

        pipeline = bm25 >> MeanIDF(stats)
    """
    column = 'mean_idf'

    def aggregate(self, terms: List[str]) -> float:
        return float(np.mean([self.statistics.idf(t) for t in terms]))


class SCQ(_TermPredictor):
    """The collection-query similarity of Zhao, Scholer & Tsegay (ECIR 2008): per query term
    (1 + ln cf) * ln(1 + N / df), aggregated over the query's terms by ``agg``; adds ``max_scq``,
    ``mean_scq`` or ``sum_scq``.

    Args:
        statistics: the collection's :class:`TermStatistics`.
        agg: ``'max'`` (MaxSCQ), ``'mean'`` (AvgSCQ) or ``'sum'`` (SumSCQ).

    Example::

        pipeline = bm25 >> SCQ(stats, agg='max')
    """

    def __init__(self, statistics: TermStatistics, agg: str = 'max'):
        super().__init__(statistics)
        check(agg in SCQ_AGGREGATIONS, 'SCQ', f'agg must be one of {list(SCQ_AGGREGATIONS)}, got {agg!r}')
        self.agg = agg
        self.column = f'{agg}_scq'

    def aggregate(self, terms: List[str]) -> float:
        s = self.statistics
        values = [(1 + math.log(s.cf[t])) * math.log(1 + s.n_docs / s.df[t]) for t in terms]
        return float(SCQ_AGGREGATIONS[self.agg](values))
