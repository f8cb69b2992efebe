"""How well signals predict a target: per-query correlations with p-values and seeded bootstrap
intervals, Kendall's tau between orderings of a study's cells, and a linear regression over several
signals evaluated out of fold. Computation only: :mod:`pyterrier_utility.commands.predicting`
writes and prints the results."""
from typing import Dict, Sequence

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from .._checks import check, check_int
from ..scoring.correlation import correlation
from ..vocabulary import CORRELATION_METHODS


def finite_pairs(x, y):
    """The pairs of ``x`` and ``y`` where both are finite, as two float arrays."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def coefficients(x: np.ndarray, y: np.ndarray, pick: np.ndarray, method: str) -> np.ndarray:
    """``method``'s coefficient (Pearson, Spearman, or Kendall's tau-b as scipy computes them) of
    each resample of the pairs (``x[row]``, ``y[row]`` for each row of indices ``pick``); NaN for a
    resample where either side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if method == 'kendall':
        # A resample's tau-b from how often it draws each pair: sum over ordered pairs of draws of
        # sign(dx) * sign(dy), over the pairs untied in x and in y (copies of one pair are tied in both).
        counts = np.zeros(pick.shape)
        np.add.at(counts, (np.arange(len(pick))[:, None], pick), 1)
        sx, sy = np.sign(x[:, None] - x[None, :]), np.sign(y[:, None] - y[None, :])
        num = ((counts @ (sx * sy)) * counts).sum(axis=1)
        den = np.sqrt(((counts @ np.abs(sx)) * counts).sum(axis=1) * ((counts @ np.abs(sy)) * counts).sum(axis=1))
    else:
        xs, ys = x[pick], y[pick]
        if method == 'spearman':
            xs, ys = rankdata(xs, axis=1), rankdata(ys, axis=1)
        xs, ys = xs - xs.mean(axis=1, keepdims=True), ys - ys.mean(axis=1, keepdims=True)
        num, den = (xs * ys).sum(axis=1), np.sqrt((xs * xs).sum(axis=1) * (ys * ys).sum(axis=1))
    with np.errstate(invalid='ignore', divide='ignore'):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def resamples(n: int, n_resamples: int = 1000, seed: int = 0) -> np.ndarray:
    """``n_resamples`` rows of ``n`` indices drawn with replacement by ``numpy.random.default_rng(seed)``."""
    return np.random.default_rng(seed).integers(0, n, (n_resamples, n))


def bootstrap_interval(x, y, method: str, n_resamples: int = 1000, seed: int = 0,
                       level: float = 0.95) -> tuple:
    """The percentile interval of ``method``'s coefficient over the resamples of the pairs
    (:func:`resamples`); resamples where the coefficient is undefined (a constant side) are left out.
    NaN, NaN with fewer than 3 pairs.

    Example::

        low, high = bootstrap_interval(nqc, utility, 'spearman', seed=1)
    """
    x, y = finite_pairs(x, y)
    if len(x) < 3:
        return float('nan'), float('nan')
    pick = resamples(len(x), n_resamples, seed)
    found = coefficients(x, y, pick, method)
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
