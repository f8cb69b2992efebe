"""Table 1 (mean utility with significance marks) and r(nDCG@k, U) from a study's per-query values."""
from typing import Optional, Tuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..errors import SettingError

#: Marks: differs from the baseline (Rel) / differs from the unreversed ordering.
BASELINE_MARK = '\u2020'
REVERSAL_MARK = '\u2021'
METHODS = {'pearson': sps.pearsonr, 'spearman': sps.spearmanr, 'kendall': sps.kendalltau}


def _paired(per_query: pd.DataFrame, a: str, b: str, column: str = 'utility') -> Tuple[np.ndarray, np.ndarray]:
    """Values of systems ``a`` and ``b`` on the queries where both are finite."""
    pivot = per_query.pivot(index='qid', columns='system', values=column)
    both = pivot[[a, b]].dropna()
    return both[a].to_numpy(float), both[b].to_numpy(float)


def paired_ttest(x: np.ndarray, y: np.ndarray) -> float:
    """Two-sided paired t-test p-value; NaN with fewer than 2 pairs or when the systems agree on
    every query (e.g. k=1 and its reversal)."""
    d = np.asarray(x, float) - np.asarray(y, float)
    if len(d) < 2 or not d.any():
        return float('nan')
    return float(sps.ttest_rel(x, y).pvalue)


def correlation(x: np.ndarray, y: np.ndarray, method: str = 'pearson') -> Tuple[float, float]:
    """(coefficient, p-value) by ``method`` (pearson, spearman, kendall); NaN when fewer than 3
    pairs or either side is constant."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    finite = np.isfinite(x) & np.isfinite(y)
    x, y = x[finite], y[finite]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return float('nan'), float('nan')
    result = METHODS[method](x, y)
    return float(result[0]), float(result[1])


def table1(per_query: pd.DataFrame, baseline: Optional[str] = 'Rel', alpha: float = 0.05,
           reversed_suffix: str = '-r') -> pd.DataFrame:
    """Mean utility per label set, k and system, with paired t-tests over queries.

    ``p_baseline``: the system against ``baseline``; ``p_reversal``: a reversed system (name ending
    in ``reversed_suffix``) against its unreversed ordering. ``mark`` holds ``†`` where
    ``p_baseline < alpha`` and ``‡`` where ``p_reversal < alpha``. Means and tests use the queries
    whose utility is finite (``n``); ``fbert_0shot`` is the mean 0-shot FBERT of the label set.

    Args:
        per_query: :attr:`StudyResults.per_query` (``labels``, ``system``, ``k``, ``qid``,
            ``fbert_0shot``, ``utility``).
        baseline: the system every other is tested against (``None``: no such test).
        alpha: the significance level.
        reversed_suffix: how reversed systems are named.
    """
    rows = []
    for (labels, k), cell in per_query.groupby(['labels', 'k'], sort=False):
        systems = list(dict.fromkeys(cell['system']))
        p0 = cell.drop_duplicates('qid')['fbert_0shot'].mean()
        for system in systems:
            u = cell.loc[cell['system'] == system, 'utility'].to_numpy(float)
            p_base = p_rev = float('nan')
            if baseline in systems and system != baseline:
                p_base = paired_ttest(*_paired(cell, system, baseline))
            base = system[:-len(reversed_suffix)] if system.endswith(reversed_suffix) else None
            if base in systems:
                p_rev = paired_ttest(*_paired(cell, system, base))
            mark = (BASELINE_MARK if p_base < alpha else '') + (REVERSAL_MARK if p_rev < alpha else '')
            rows.append((labels, k, system, np.nanmean(u) if np.isfinite(u).any() else float('nan'),
                         int(np.isfinite(u).sum()), p0, p_base, p_rev, mark))
    return pd.DataFrame(rows, columns=['labels', 'k', 'system', 'utility', 'n', 'fbert_0shot',
                                       'p_baseline', 'p_reversal', 'mark'])


def table1_markdown(table: pd.DataFrame, baseline: Optional[str] = 'Rel', alpha: float = 0.05,
                    digits: int = 3) -> str:
    """Table 1 as Markdown: one block per label set, a row per k, a column per system."""
    blocks = []
    for labels, part in table.groupby('labels', sort=False):
        systems = list(dict.fromkeys(part['system']))
        header = ['k', '0-shot FBERT'] + systems
        lines = [f'**{labels}**: mean utility over {part["n"].max()} queries; '
                 + (f'{BASELINE_MARK} differs from {baseline}, ' if baseline else '')
                 + f'{REVERSAL_MARK} differs from its unreversed ordering (paired t-test, p < {alpha})',
                 '', '| ' + ' | '.join(header) + ' |', '|' + '---:|' * len(header)]
        for k, row in part.groupby('k', sort=False):
            cells = {s: f'{u:.{digits}f}{m}' for s, u, m in zip(row['system'], row['utility'], row['mark'])}
            lines.append('| ' + ' | '.join([str(k), f'{row["fbert_0shot"].iloc[0]:.{digits}f}']
                                           + [cells.get(s, '') for s in systems]) + ' |')
        blocks.append('\n'.join(lines))
    return '\n\n'.join(blocks) + '\n'


def correlations(per_query: pd.DataFrame, method: str = 'pearson', x: str = 'ndcg',
                 y: str = 'utility') -> pd.DataFrame:
    """Correlation of ``x`` (nDCG@k) and ``y`` (U) across queries, per label set, system and k.

    ``method``: pearson, spearman or kendall (tau-b). NaN where undefined (a constant side, such
    as NRel's nDCG of 0, or fewer than 3 queries).
    """
    if method not in METHODS:
        raise SettingError(f'correlations: method must be one of {sorted(METHODS)}, got {method!r}')
    rows = []
    for (labels, system, k), cell in per_query.groupby(['labels', 'system', 'k'], sort=False):
        r, p = correlation(cell[x], cell[y], method)
        n = int((np.isfinite(cell[x].to_numpy(float)) & np.isfinite(cell[y].to_numpy(float))).sum())
        rows.append((labels, system, k, method, r, p, n))
    return pd.DataFrame(rows, columns=['labels', 'system', 'k', 'method', 'r', 'p', 'n'])
