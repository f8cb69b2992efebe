"""Correlations between per-query scores, shared by the measures and the study."""
from typing import Dict, Tuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..vocabulary import CORRELATION_METHODS

#: Each correlation method's scipy function.
METHODS = dict(zip(CORRELATION_METHODS, (sps.pearsonr, sps.spearmanr, sps.kendalltau)))


#: The fewest pairs a correlation is computed over; below it r and p are NaN.
MIN_PAIRS = 3


def correlation(x: np.ndarray, y: np.ndarray, method: str = 'pearson') -> Tuple[float, float]:
    """(coefficient, p-value) by ``method`` (pearson, spearman, kendall) over the pairs where both are
    finite; NaN when fewer than 3 pairs or either side is constant.

    Example::

        rho, p = correlation(ndcg, utility, 'spearman')
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    finite = np.isfinite(x) & np.isfinite(y)
    x, y = x[finite], y[finite]
    if len(x) < MIN_PAIRS or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float('nan'), float('nan')
    result = METHODS[method](x, y)
    return float(result[0]), float(result[1])


def rank_correlation(x: pd.Series, y: pd.Series) -> Dict[str, float]:
    """Kendall's tau and Spearman's rho between two per-query scores (indexed by qid), e.g. eRAG
    scores and end-to-end utility, over the queries where both are finite.

    Example::

        rank_correlation(erag_scores, utility)['kendall_tau']
    """
    both = pd.concat([x.rename('x'), y.rename('y')], axis=1, join='inner').dropna()
    tau, p_tau = correlation(both['x'], both['y'], 'kendall')
    rho, p_rho = correlation(both['x'], both['y'], 'spearman')
    return {'kendall_tau': tau, 'kendall_p': p_tau, 'spearman_rho': rho, 'spearman_p': p_rho, 'n': len(both)}
