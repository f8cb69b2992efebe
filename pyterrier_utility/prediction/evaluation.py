"""How well signals predict a target: per-query correlations with p-values and seeded bootstrap
intervals, Kendall's tau between orderings of a study's cells, and a linear regression over several
signals evaluated out of fold. Computation only: :mod:`pyterrier_utility.experiment.prediction`
writes and prints the results."""
from typing import Dict, Sequence

import numpy as np
import pandas as pd

from .._util import check, check_int
from ..scoring.correlation import correlation
from ..vocabulary import CORRELATION_METHODS


def finite_pairs(x, y):
    """The pairs of ``x`` and ``y`` where both are finite, as two float arrays."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def bootstrap_interval(x, y, method: str, n_resamples: int = 1000, seed: int = 0,
                       level: float = 0.95) -> tuple:
    """The percentile interval of ``method``'s coefficient over ``n_resamples`` resamples of the
    pairs (with replacement), drawn by ``numpy.random.default_rng(seed)``; resamples where the
    coefficient is undefined (a constant side) are left out. NaN, NaN with fewer than 3 pairs.

    Example::

        low, high = bootstrap_interval(nqc, utility, 'spearman', seed=1)
    """
    x, y = finite_pairs(x, y)
    if len(x) < 3:
        return float('nan'), float('nan')
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        pick = rng.integers(0, len(x), len(x))
        values.append(correlation(x[pick], y[pick], method)[0])
    found = np.asarray(values)
    found = found[np.isfinite(found)]
    if not len(found):
        return float('nan'), float('nan')
    tail = (1 - level) / 2 * 100
    return float(np.percentile(found, tail)), float(np.percentile(found, 100 - tail))


def correlate(x, y, n_resamples: int = 1000, seed: int = 0) -> Dict[str, float]:
    """Pearson, Spearman and Kendall between ``x`` and ``y`` over the pairs where both are finite:
    per method the coefficient, its p-value (scipy) and the bootstrap 95% interval
    (:func:`bootstrap_interval`), and ``n``.

    Example::

        correlate(frame['nqc'], frame['utility'], seed=0)['spearman']
    """
    x, y = finite_pairs(x, y)
    out: Dict[str, float] = {'n': len(x)}
    for method in CORRELATION_METHODS:
        out[method], out[f'{method}_p'] = correlation(x, y, method)
        out[f'{method}_low'], out[f'{method}_high'] = bootstrap_interval(x, y, method, n_resamples, seed)
    return out


def system_tau(frame: pd.DataFrame, signal: str, target: str, cells: Sequence[str] = ('system', 'k')) -> Dict:
    """Kendall's tau between the orderings of ``cells`` by the mean of ``signal`` and by the mean of
    ``target`` (each over its finite values), with its p-value and the number of cells.

    Example::

        system_tau(signals, 'nqc', 'utility')['tau']
    """
    means = frame.groupby(list(cells))[[signal, target]].mean()
    tau, p = correlation(means[signal], means[target], 'kendall')
    return {'tau': tau, 'p': p, 'n': int(np.isfinite(means.to_numpy(float)).all(axis=1).sum())}


def out_of_fold(features: pd.DataFrame, target: pd.Series, folds: int = 5, seed: int = 0) -> pd.Series:
    """Predictions of ``target`` by a linear regression over ``features`` (scikit-learn's
    ``LinearRegression``), each row predicted by the model fit on the other folds
    (``cross_val_predict`` over ``KFold(folds, shuffle=True, random_state=seed)``); rows with a
    non-finite feature or target are left out. Never a prediction of a row the model was fit on.

    Example::

        predicted = out_of_fold(frame[['nqc', 'spatial']], frame['utility'], folds=5, seed=0)
        rho = correlate(predicted, frame.loc[predicted.index, 'utility'])['spearman']
    """
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import KFold, cross_val_predict
    folds = check_int('out_of_fold', 'folds', folds, 2)
    both = pd.concat([features.astype(float), target.astype(float).rename('__target__')], axis=1)
    both = both[np.isfinite(both.to_numpy()).all(axis=1)]
    check(len(both) >= folds, 'out_of_fold', f'{len(both)} complete rows, fewer than {folds} folds')
    predicted = cross_val_predict(LinearRegression(), both[features.columns].to_numpy(),
                                  both['__target__'].to_numpy(), cv=KFold(folds, shuffle=True, random_state=seed))
    return pd.Series(predicted, index=both.index, name='predicted')
