"""Table 1 (mean utility with significance marks) and r(nDCG@k, U) from a study's per-query values."""
from typing import Optional, Tuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..correlation import METHODS, correlation
from ..errors import SettingError

#: Marks: differs from the baseline (Rel) / differs from the unreversed ordering.
BASELINE_MARK = '\u2020'
REVERSAL_MARK = '\u2021'


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
           reversed_suffix: str = '-r', correction: Optional[str] = None) -> pd.DataFrame:
    """Mean utility per (dataset,) label set, k and system, with paired t-tests over queries.

    ``p_baseline``: the system against ``baseline``; ``p_reversal``: a reversed system (name ending
    in ``reversed_suffix``) against its unreversed ordering. ``mark`` holds ``†`` where
    ``p_baseline < alpha`` and ``‡`` where ``p_reversal < alpha``. Means and tests use the queries
    whose utility is finite (``n``); ``fbert_0shot`` is the mean 0-shot FBERT of the label set.
    With ``correction`` (e.g. ``'holm'``), each family of tests — the systems against the baseline,
    the reversals against their orderings, within one dataset, label set and k — is corrected, and
    the p-values reported are the corrected ones.

    Args:
        per_query: :attr:`StudyResults.per_query` (``labels``, ``system``, ``k``, ``qid``,
            ``fbert_0shot``, ``utility``; ``dataset`` for a study over several).
        baseline: the system every other is tested against (``None``: no such test).
        alpha: the significance level.
        reversed_suffix: how reversed systems are named.
        correction: a multiple-testing correction method of statsmodels, or ``None``.
    """
    rows = []
    keys, groups = _cells(per_query, 'k')
    for key, cell in groups:
        systems = list(dict.fromkeys(cell['system']))
        p0 = cell.drop_duplicates('qid')['fbert_0shot'].mean()
        p_base, p_rev = [], []
        for system in systems:
            p_base.append(paired_ttest(*_paired(cell, system, baseline))
                          if baseline in systems and system != baseline else float('nan'))
            base = system[:-len(reversed_suffix)] if system.endswith(reversed_suffix) else None
            p_rev.append(paired_ttest(*_paired(cell, system, base)) if base in systems else float('nan'))
        p_base, p_rev = adjust(p_base, correction), adjust(p_rev, correction)
        for system, pb, pr in zip(systems, p_base, p_rev):
            u = cell.loc[cell['system'] == system, 'utility'].to_numpy(float)
            mark = (BASELINE_MARK if pb < alpha else '') + (REVERSAL_MARK if pr < alpha else '')
            rows.append((*key, system, np.nanmean(u) if np.isfinite(u).any() else float('nan'),
                         int(np.isfinite(u).sum()), p0, pb, pr, mark))
    return pd.DataFrame(rows, columns=keys + ['system', 'utility', 'n', 'fbert_0shot', 'p_baseline',
                                              'p_reversal', 'mark'])


def _legend(baseline: Optional[str], alpha: float, correction: Optional[str]) -> str:
    return ((f'{BASELINE_MARK} differs from {baseline}, ' if baseline else '')
            + f'{REVERSAL_MARK} differs from its unreversed ordering (paired t-test, p < {alpha}'
            + (f', {correction} correction' if correction else '') + ')')


def table1_markdown(table: pd.DataFrame, baseline: Optional[str] = 'Rel', alpha: float = 0.05,
                    digits: int = 3, correction: Optional[str] = None) -> str:
    """Table 1 as Markdown: one block per (dataset and) label set, a row per k, a column per system."""
    blocks = []
    keys = [k for k in ('dataset', 'labels') if k in table.columns]
    for key, part in table.groupby(keys, sort=False):
        title = ', '.join(str(x) for x in (key if isinstance(key, tuple) else (key,)))
        systems = list(dict.fromkeys(part['system']))
        header = ['k', '0-shot FBERT'] + systems
        lines = [f'**{title}**: mean utility over {part["n"].max()} queries; ' + _legend(baseline, alpha, correction),
                 '', '| ' + ' | '.join(header) + ' |', '|' + '---:|' * len(header)]
        for k, row in part.groupby('k', sort=False):
            cells = {s: f'{u:.{digits}f}{m}' for s, u, m in zip(row['system'], row['utility'], row['mark'])}
            lines.append('| ' + ' | '.join([str(k), f'{row["fbert_0shot"].iloc[0]:.{digits}f}']
                                           + [cells.get(s, '') for s in systems]) + ' |')
        blocks.append('\n'.join(lines))
    return '\n\n'.join(blocks) + '\n'


def _paper_layout(table: pd.DataFrame, digits: int):
    """Rows (dataset, 0-shot FBERT per label set, system) and columns (label set, k), as the paper prints."""
    table = table if 'dataset' in table.columns else table.assign(dataset='')
    label_sets = list(dict.fromkeys(table['labels']))
    ks = list(dict.fromkeys(table['k']))
    rows = []
    for dataset, part in table.groupby('dataset', sort=False):
        zero = ' / '.join(f'{part.loc[part["labels"] == lab, "fbert_0shot"].iloc[0]:.{digits}f}' for lab in label_sets
                          if (part['labels'] == lab).any())
        for i, system in enumerate(dict.fromkeys(part['system'])):
            cells = []
            for lab in label_sets:
                for k in ks:
                    hit = part[(part['labels'] == lab) & (part['k'] == k) & (part['system'] == system)]
                    cells.append(('', '') if hit.empty or not np.isfinite(hit['utility'].iloc[0])
                                 else (f'{hit["utility"].iloc[0]:.{digits}f}', hit['mark'].iloc[0]))
            rows.append((dataset if i == 0 else '', zero if i == 0 else '', system, cells))
    return label_sets, ks, rows


def table1_paper(table: pd.DataFrame, fmt: str = 'markdown', baseline: Optional[str] = 'Rel', alpha: float = 0.05,
                 digits: int = 4, correction: Optional[str] = None) -> str:
    """Table 1 in the paper's layout: datasets stacked, a row per system, a column per k for each
    label set side by side, the 0-shot FBERT of each dataset (one value per label set), † and ‡.

    ``fmt``: ``'markdown'`` or ``'latex'`` (booktabs: ``\\usepackage{booktabs}``).
    """
    if fmt not in ('markdown', 'latex'):
        raise SettingError(f"table1_paper: fmt must be 'markdown' or 'latex', got {fmt!r}")
    label_sets, ks, rows = _paper_layout(table, digits)
    if fmt == 'markdown':
        header = ['Dataset', '0-shot FBERT', 'System'] + [f'{lab}, k={k}' for lab in label_sets for k in ks]
        lines = ['| ' + ' | '.join(header) + ' |', '|---|---:|---|' + '---:|' * (len(header) - 3)]
        lines += ['| ' + ' | '.join([d, z, s] + [u + m for u, m in cells]) + ' |' for d, z, s, cells in rows]
        return 'Mean utility; ' + _legend(baseline, alpha, correction) + '\n\n' + '\n'.join(lines) + '\n'
    marks = {BASELINE_MARK: '\\dagger', REVERSAL_MARK: '\\ddagger'}

    def cell(u, m):
        return u + (f'$^{{{"".join(marks[c] for c in m)}}}$' if m else '')
    n = len(ks)
    lines = ['% ' + _legend(baseline, alpha, correction), '\\begin{tabular}{lrl' + 'r' * n * len(label_sets) + '}',
             '\\toprule',
             'Dataset & 0-shot $F_{\\mathrm{BERT}}$ & System & '
             + ' & '.join(f'\\multicolumn{{{n}}}{{c}}{{{_latex(lab)}}}' for lab in label_sets) + ' \\\\',
             ''.join(f'\\cmidrule(lr){{{4 + i * n}-{3 + (i + 1) * n}}}' for i in range(len(label_sets))),
             ' & & & ' + ' & '.join(f'$k={k}$' for _ in label_sets for k in ks) + ' \\\\', '\\midrule']
    for i, (d, z, s, cells) in enumerate(rows):
        if d and i:
            lines.append('\\midrule')
        lines.append(' & '.join([_latex(d), z, _latex(s)] + [cell(u, m) for u, m in cells]) + ' \\\\')
    lines += ['\\bottomrule', '\\end{tabular}']
    return '\n'.join(lines) + '\n'


def _latex(text: str) -> str:
    special = {'\\': '\\textbackslash{}', '~': '\\textasciitilde{}', **{c: '\\' + c for c in '&%$#_{}'}}
    return ''.join(special.get(c, c) for c in str(text)).replace('>=', '$\\geq$ ')


def correlations(per_query: pd.DataFrame, method: str = 'pearson', x: str = 'ndcg',
                 y: str = 'utility') -> pd.DataFrame:
    """Correlation of ``x`` (nDCG@k) and ``y`` (U) across queries, per label set, system and k.

    ``method``: pearson, spearman or kendall (tau-b). NaN where undefined (a constant side, such
    as NRel's nDCG of 0, or fewer than 3 queries).
    """
    if method not in METHODS:
        raise SettingError(f'correlations: method must be one of {sorted(METHODS)}, got {method!r}')
    rows = []
    keys, groups = _cells(per_query, 'system', 'k')
    for key, cell in groups:
        r, p = correlation(cell[x], cell[y], method)
        n = int((np.isfinite(cell[x].to_numpy(float)) & np.isfinite(cell[y].to_numpy(float))).sum())
        rows.append((*key, method, r, p, n))
    return pd.DataFrame(rows, columns=keys + ['method', 'r', 'p', 'n'])


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
    if not 0 < level < 1:
        raise SettingError(f'utility_ci: level must lie between 0 and 1, got {level!r}')
    rows = []
    keys, groups = _cells(per_query, 'system', 'k')
    tails = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    for key, cell in groups:
        u = cell['utility'].to_numpy(float)
        u = u[np.isfinite(u)]
        low = high = float('nan')
        if len(u):
            means = u[np.random.default_rng(seed).integers(0, len(u), (resamples, len(u)))].mean(axis=1)
            low, high = np.percentile(means, tails)
        rows.append((*key, len(u), u.mean() if len(u) else float('nan'), float(low), float(high)))
    return pd.DataFrame(rows, columns=keys + ['n', 'utility', 'low', 'high'])
