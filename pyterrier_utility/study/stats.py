"""The study's statistics from its per-query values: Table 1's means and significance marks, r(nDCG@k, U)
with intervals, mean U with bootstrap intervals (:mod:`pyterrier_utility.report.tables` writes Table 1 as text)."""
from typing import Optional, Tuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from .._frames import validate_columns
from ..errors import SettingError
from ..schema import CELL, CORRELATION_FIELDS
from ..scoring.correlation import METHODS, correlation
from ..vocabulary import MIN_N, ZERO_SHOT

#: Marks: differs from the baseline (Rel) / differs from the unreversed ordering.
BASELINE_MARK = '\u2020'
REVERSAL_MARK = '\u2021'


def _paired(per_query: pd.DataFrame, a: str, b: str, column: str = 'utility') -> Tuple[np.ndarray, np.ndarray]:
    """Values of systems ``a`` and ``b`` on the queries where both are finite."""
    pivot = per_query.pivot(index='qid', columns='system', values=column)
    both = pivot[[a, b]].dropna()
    return both[a].to_numpy(float), both[b].to_numpy(float)


def _test(cell: pd.DataFrame, a: str, b: Optional[str], systems) -> Tuple[float, int]:
    """The paired t-test of ``a`` against ``b`` and the number of queries paired (NaN, 0 without ``b``)."""
    if b is None or b == a or b not in systems:
        return float('nan'), 0
    x, y = _paired(cell, a, b)
    return paired_ttest(x, y), len(x)


def paired_ttest(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided paired t-test p-value; NaN with fewer than 2 pairs or when the systems agree on
    every query (e.g. k=1 and its reversal)."""
    d = np.asarray(x, float) - np.asarray(y, float)
    if len(d) < 2 or not d.any():
        return float('nan')
    return float(sps.ttest_rel(x, y).pvalue)


def _cells(per_query: pd.DataFrame, *inner: str):
    """Groups by dataset (when the frame has several), label set and ``inner``."""
    keys = (['dataset'] if 'dataset' in per_query.columns else []) + ['labels', *inner]
    return keys, per_query.groupby(keys, sort=False)


def adjust(p_values, method: Optional[str]) -> np.ndarray:
    """p-values corrected for multiple testing by statsmodels' ``multipletests`` (``'holm'``,
    ``'bonferroni'``, ``'fdr_bh'``, ... as ``pt.Experiment(correction=...)``); NaN stay NaN."""
    p = np.asarray(p_values, float)
    if not method or not np.isfinite(p).any():
        return p
    from statsmodels.stats.multitest import multipletests
    out = p.copy()
    finite = np.isfinite(p)
    out[finite] = multipletests(p[finite], method=method)[1]
    return out


def table1(per_query: pd.DataFrame, baseline: Optional[str] = 'Rel', alpha: float = 0.05,
           reversed_suffix: str = '-r', correction: Optional[str] = None, min_n: int = MIN_N) -> pd.DataFrame:
    """Mean utility per (dataset,) label set, k and system, with paired t-tests over queries.

    ``p_baseline``: the system against ``baseline``; ``p_reversal``: a reversed system (name ending
    in ``reversed_suffix``) against its unreversed ordering. ``mark`` holds ``†`` where
    ``p_baseline < alpha`` and ``‡`` where ``p_reversal < alpha``. Means and tests use the queries
    whose utility is finite (``n``); ``quality_0shot`` is the mean 0-shot P of the label set.
    With ``correction`` (e.g. ``'holm'``), each family of tests — the systems against the baseline,
    the reversals against their orderings, within one dataset, label set and k — is corrected, and
    the p-values reported are the corrected ones. A test over fewer than ``min_n`` paired queries
    gives its p-value but no mark.

    Args:
        per_query: :attr:`StudyResults.per_query` (``labels``, ``system``, ``k``, ``qid``,
            ``quality_0shot``, ``utility``; ``dataset`` for a study over several).
        baseline: the system every other is tested against (``None``: no such test).
        alpha: the significance level.
        reversed_suffix: how reversed systems are named.
        correction: a multiple-testing correction method of statsmodels, or ``None``.
        min_n: the fewest paired queries a mark is given on (:data:`MIN_N`).
    """
    validate_columns('table1', per_query, ['labels', *CELL, 'quality_0shot', 'utility'])
    rows = []
    keys, groups = _cells(per_query, 'k')
    for key, cell in groups:
        systems = list(dict.fromkeys(cell['system']))
        p0 = cell.drop_duplicates('qid')['quality_0shot'].mean()
        base_tests = [_test(cell, system, baseline, systems) for system in systems]
        rev_tests = [_test(cell, system, system[:-len(reversed_suffix)] if system.endswith(reversed_suffix) else None,
                           systems) for system in systems]
        p_base = adjust([p for p, _ in base_tests], correction)
        p_rev = adjust([p for p, _ in rev_tests], correction)
        for system, pb, pr, (_, nb), (_, nr) in zip(systems, p_base, p_rev, base_tests, rev_tests):
            u = cell.loc[cell['system'] == system, 'utility'].to_numpy(float)
            mark = ((BASELINE_MARK if pb < alpha and nb >= min_n else '')
                    + (REVERSAL_MARK if pr < alpha and nr >= min_n else ''))
            rows.append((*key, system, np.nanmean(u) if np.isfinite(u).any() else float('nan'),
                         int(np.isfinite(u).sum()), p0, pb, pr, mark))
    return pd.DataFrame(rows, columns=keys + ['system', 'utility', 'n', 'quality_0shot', 'p_baseline',
                                              'p_reversal', 'mark'])


def correlations(per_query: pd.DataFrame, method: str = 'pearson', x: str = 'ndcg',
                 y: str = 'utility', resamples: int = 0, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Correlation of ``x`` (nDCG@k) and ``y`` (U) across queries, per label set, system and k.

    ``method``: pearson, spearman or kendall (tau-b). NaN where undefined (a constant side, such
    as NRel's nDCG of 0, or fewer than 3 queries). With ``resamples``, ``low`` and ``high`` hold a
    percentile bootstrap interval of r over queries (resampled pairs; resamples where r is undefined
    are left out), each cell with its own generator seeded by ``seed``.
    """
    if method not in METHODS:
        raise SettingError(f'correlations: method must be one of {sorted(METHODS)}, got {method!r}')
    _check_level('correlations', level)
    validate_columns('correlations', per_query, ['labels', 'system', 'k', x, y])
    rows = []
    keys, groups = _cells(per_query, 'system', 'k')
    for key, cell in groups:
        xs, ys = cell[x].to_numpy(float), cell[y].to_numpy(float)
        finite = np.isfinite(xs) & np.isfinite(ys)
        r, p = correlation(xs, ys, method)
        bounds: Tuple[float, ...] = ()
        if resamples:
            bounds = (float('nan'),) * 2
            if np.isfinite(r):
                xs, ys = xs[finite], ys[finite]
                draws = np.random.default_rng(seed).integers(0, len(xs), (resamples, len(xs)))
                rs = np.array([correlation(xs[i], ys[i], method)[0] for i in draws])
                if np.isfinite(rs).any():
                    bounds = tuple(float(b) for b in np.nanpercentile(rs, _tails(level)))
        rows.append((*key, method, r, p, int(finite.sum()), *bounds))
    return pd.DataFrame(rows, columns=keys + list(CORRELATION_FIELDS) + (['low', 'high'] if resamples else []))


def _check_level(name: str, level: float) -> None:
    if not 0 < level < 1:
        raise SettingError(f'{name}: level must lie between 0 and 1, got {level!r}')


def _tails(level: float):
    return [100 * (1 - level) / 2, 100 * (1 + level) / 2]


def utility_ci(per_query: pd.DataFrame, resamples: int = 1000, level: float = 0.95, seed: int = 0) -> pd.DataFrame:
    """Mean utility per (dataset,) label set, system and k, with a percentile bootstrap confidence
    interval over queries (as ``scipy.stats.bootstrap(method='percentile')``); queries with a NaN
    utility are left out (``n`` counts the others).

    Each cell resamples with its own generator seeded by ``seed``, so a cell's interval does not
    depend on which other cells the frame holds.

    Args:
        per_query: :attr:`StudyResults.per_query`.
        resamples: bootstrap resamples.
        level: the confidence level.
        seed: the generator's seed.

    Example::

        ci = utility_ci(results.per_query)
        print(ci[['system', 'k', 'utility', 'low', 'high']])
    """
    _check_level('utility_ci', level)
    validate_columns('utility_ci', per_query, ['labels', 'system', 'k', 'utility'])
    rows = []
    keys, groups = _cells(per_query, 'system', 'k')
    tails = _tails(level)
    for key, cell in groups:
        u = cell['utility'].to_numpy(float)
        u = u[np.isfinite(u)]
        low = high = float('nan')
        if len(u):
            means = u[np.random.default_rng(seed).integers(0, len(u), (resamples, len(u)))].mean(axis=1)
            low, high = np.percentile(means, tails)
        rows.append((*key, len(u), u.mean() if len(u) else float('nan'), float(low), float(high)))
    return pd.DataFrame(rows, columns=keys + ['n', 'utility', 'low', 'high'])


def per_sample_utility(per_query: pd.DataFrame, scores: pd.DataFrame) -> pd.DataFrame:
    """``per_query`` with U read per sample: the mean over samples j of (P_k,j - P_0,j) / P_0,j, where
    the study's U is a ratio of means, (mean_j P_k,j - mean_j P_0,j) / mean_j P_0,j. A sample whose
    P_0,j is 0 is left out of its query's mean (NaN when all are).

    Args:
        per_query: :attr:`StudyResults.per_query`.
        scores: :attr:`StudyResults.scores` (``labels``, ``system``, ``k``, ``qid``, ``sample``,
            ``quality``; the 0-shot answers as ``system`` '0-shot'; ``dataset`` for several).

    Example::

        table1(per_sample_utility(results.per_query, results.scores))
    """
    keys = [c for c in ('dataset', 'labels') if c in per_query.columns]
    zero = scores[scores['system'] == ZERO_SHOT].drop_duplicates(keys + ['qid', 'sample'])
    zero = zero.set_index(keys + ['qid', 'sample'])['quality'].rename('p0')
    k_shot = scores[scores['system'] != ZERO_SHOT].join(zero, on=keys + ['qid', 'sample'])
    with np.errstate(divide='ignore', invalid='ignore'):
        ratio = (k_shot['quality'] - k_shot['p0']) / k_shot['p0'].where(k_shot['p0'] != 0)
    u = k_shot.assign(u=ratio).groupby(keys + list(CELL), sort=False)['u'].mean()
    out = per_query.drop(columns='utility').join(u.rename('utility'), on=keys + list(CELL))
    return out[per_query.columns]


def truncation(answers: pd.DataFrame) -> Optional[str]:
    """How many answers the engine cut at max_new_tokens, as a phrase: '785 answers, 12 (2%) cut at
    max_new_tokens'; None where the engine said it of none (no ``truncated`` value).

    Args:
        answers: an answers frame (``answers.csv``), its ``truncated`` column True, False or empty.

    Example::

        print(truncation(results.answers))
    """
    said = answers['truncated'].notna() if 'truncated' in answers.columns else pd.Series(False, answers.index)
    if not said.any():
        return None
    cut, known = int(answers['truncated'].eq(True).sum()), int(said.sum())
    of = f'{known} answers' if known == len(answers) else f'{known} of {len(answers)} answers (the others unknown)'
    return f'{of}, {cut} ({cut / known:.0%}) cut at max_new_tokens'


def block_heading(frame: pd.DataFrame) -> str:
    """What names the blocks :func:`fold_readers` makes of ``frame``: ``'Reader'``, ``'Dataset · reader'``
    or ``'Dataset'``."""
    if 'reader' not in frame.columns:
        return 'Dataset'
    return 'Dataset · reader' if 'dataset' in frame.columns else 'Reader'


def fold_readers(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``reader`` (a study of several readers) folded into ``dataset``: tables and
    figures stack a block (and draw a panel) per dataset and reader."""
    if 'reader' not in frame.columns:
        return frame
    prefix = frame['dataset'].astype(str) + ' · ' if 'dataset' in frame.columns else ''
    folded = frame.drop(columns=['reader', 'dataset'], errors='ignore')
    folded.insert(0, 'dataset', prefix + frame['reader'].astype(str))
    return folded
