"""How far one reader's document utility agrees with another's (LLM-specific utility: Zhang et al.,
arXiv 2510.11358, 2025), from :class:`~pyterrier_utility.methods.llm_utility.DocumentUtility`'s output
for several readers stacked with a ``reader`` column: rank correlation of their gains, overlap of their
utilitarian documents, how well human relevance predicts each reader's gain, and whether two readers
order a study's cells alike. Computation only."""
from itertools import combinations
from typing import Dict, List

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from .._frames import validate_columns
from ..prediction.evaluation import bootstrap_interval, resamples
from ..scoring.correlation import correlation
from ..settings import LabelSet, LabelsLike

#: Names each reader's own utility oracle as a context source: ``Util:<reader>``.
ORACLE_PREFIX = 'Util:'
#: The agreement statistics of :func:`reader_agreement`, in the order they are listed.
AGREEMENT = ('spearman_per_query', 'kendall_per_query', 'spearman_pooled', 'kendall_pooled', 'jaccard')


def _mean_interval(values: np.ndarray, n_resamples: int, seed: int) -> tuple:
    """The mean of per-query ``values`` (finite ones) and its percentile 95% interval over queries
    resampled with replacement (:func:`~pyterrier_utility.prediction.evaluation.resamples`)."""
    values = values[np.isfinite(values)]
    if not len(values):
        return float('nan'), float('nan'), float('nan'), 0
    means = values[resamples(len(values), n_resamples, seed)].mean(axis=1)
    return float(values.mean()), float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)), len(values)


def reader_agreement(utility: pd.DataFrame, *, n_resamples: int = 1000, seed: int = 0) -> pd.DataFrame:
    """For each pair of readers, how alike their document utility is (:data:`AGREEMENT`):

    - ``spearman_per_query``, ``kendall_per_query``: the rank correlation of the two readers' gains over a
      query's pool, averaged over the queries (a query where either side is constant is left out);
    - ``spearman_pooled``, ``kendall_pooled``: the same over every (query, document) pair at once;
    - ``jaccard``: the overlap of their utilitarian documents (positive gain), the size of their
      intersection over that of their union, averaged over the queries where either has one.

    Each with a seeded bootstrap 95% interval (``low``, ``high``: queries resampled for the per-query
    statistics and Jaccard, pairs for the pooled ones) and ``n`` (queries, or pairs).

    Example::

        reader_agreement(pd.concat([utility_a.assign(reader='a'), utility_b.assign(reader='b')]))
    """
    validate_columns('reader_agreement', utility, ['reader', 'qid', 'docno', 'gain'])
    wide = utility.pivot_table(index=['qid', 'docno'], columns='reader', values='gain', aggfunc='first')
    rows: List[Dict] = []
    for a, b in combinations(list(dict.fromkeys(utility['reader'])), 2):
        pair = wide[[a, b]].dropna()
        per_query: Dict[str, List[float]] = {'spearman': [], 'kendall': [], 'jaccard': []}
        for _, group in pair.groupby(level='qid', sort=False):
            for method in ('spearman', 'kendall'):
                per_query[method].append(correlation(group[a].to_numpy(), group[b].to_numpy(), method)[0]
                                         if len(group) >= 2 else np.nan)
            ua, ub = set(group.index[group[a] > 0]), set(group.index[group[b] > 0])
            per_query['jaccard'].append(len(ua & ub) / len(ua | ub) if ua | ub else np.nan)
        for method in ('spearman', 'kendall'):
            value, low, high, n = _mean_interval(np.asarray(per_query[method], float), n_resamples, seed)
            rows.append(dict(reader_a=a, reader_b=b, statistic=f'{method}_per_query', value=value, low=low,
                             high=high, n=n))
        for method in ('spearman', 'kendall'):
            value = correlation(pair[a].to_numpy(), pair[b].to_numpy(), method)[0] if len(pair) >= 2 else np.nan
            low, high = bootstrap_interval(pair[a], pair[b], method, n_resamples, seed)
            rows.append(dict(reader_a=a, reader_b=b, statistic=f'{method}_pooled', value=value, low=low, high=high,
                             n=len(pair)))
        value, low, high, n = _mean_interval(np.asarray(per_query['jaccard'], float), n_resamples, seed)
        rows.append(dict(reader_a=a, reader_b=b, statistic='jaccard', value=value, low=low, high=high, n=n))
    return pd.DataFrame(rows, columns=['reader_a', 'reader_b', 'statistic', 'value', 'low', 'high', 'n'])


def label_auc(utility: pd.DataFrame, labels: LabelsLike = 2) -> pd.DataFrame:
    """How well human relevance predicts each reader's document utility: the area under the ROC curve
    of the gain as a score of relevance (``labels``), over the judged documents of every query pooled
    (the probability that a relevant document's gain exceeds a non-relevant one's, ties counting half;
    0.5: no better than chance), with the numbers of relevant and non-relevant documents.

    Example::

        label_auc(utility, labels=2)
    """
    validate_columns('label_auc', utility, ['reader', 'qid', 'docno', 'label', 'gain'])
    labels = LabelSet.parse(labels)
    rows = []
    for reader, frame in utility.groupby('reader', sort=False):
        judged = frame[frame['label'].notna() & frame['gain'].notna()]
        relevant = labels.contains(judged['label'].astype(int)).to_numpy(bool)
        pos, neg = int(relevant.sum()), int((~relevant).sum())
        auc = float('nan')
        if pos and neg:
            ranks = rankdata(judged['gain'].to_numpy(float))
            auc = (ranks[relevant].sum() - pos * (pos + 1) / 2) / (pos * neg)
        rows.append(dict(reader=reader, labels=str(labels), auc=auc, relevant=pos, nonrelevant=neg))
    return pd.DataFrame(rows, columns=['reader', 'labels', 'auc', 'relevant', 'nonrelevant'])


def cell_order_tau(cells: pd.DataFrame, value: str = 'utility') -> pd.DataFrame:
    """Whether two readers rank retrievers alike: for each pair of readers, Kendall's tau between their
    orderings of the study's (system, k) cells by mean ``value`` (over the cells both have), its p-value
    and the number of cells.

    Example::

        cell_order_tau(per_query.groupby(['reader', 'system', 'k'], as_index=False)['utility'].mean())
    """
    validate_columns('cell_order_tau', cells, ['reader', 'system', 'k', value])
    means = cells.pivot_table(index=['system', 'k'], columns='reader', values=value, aggfunc='mean')
    rows = []
    for a, b in combinations(list(dict.fromkeys(cells['reader'])), 2):
        pair = means[[a, b]].dropna()
        tau, p = correlation(pair[a].to_numpy(), pair[b].to_numpy(), 'kendall') if len(pair) >= 2 else (np.nan,
                                                                                                          np.nan)
        rows.append(dict(reader_a=a, reader_b=b, tau=tau, p=p, n=len(pair)))
    return pd.DataFrame(rows, columns=['reader_a', 'reader_b', 'tau', 'p', 'n'])
