"""Table 1 (mean utility with significance marks) and r(nDCG@k, U) from a study's per-query values."""
from typing import List, Optional, Tuple

import numpy as np
import pandas as pd
from scipy import stats as sps

from ..correlation import METHODS, correlation
from ..errors import SettingError
from ..vocabulary import CELL, CORRELATION_FIELDS, MIN_N, ORACLES

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
    whose utility is finite (``n``); ``fbert_0shot`` is the mean 0-shot FBERT of the label set.
    With ``correction`` (e.g. ``'holm'``), each family of tests — the systems against the baseline,
    the reversals against their orderings, within one dataset, label set and k — is corrected, and
    the p-values reported are the corrected ones. A test over fewer than ``min_n`` paired queries
    gives its p-value but no mark.

    Args:
        per_query: :attr:`StudyResults.per_query` (``labels``, ``system``, ``k``, ``qid``,
            ``fbert_0shot``, ``utility``; ``dataset`` for a study over several).
        baseline: the system every other is tested against (``None``: no such test).
        alpha: the significance level.
        reversed_suffix: how reversed systems are named.
        correction: a multiple-testing correction method of statsmodels, or ``None``.
        min_n: the fewest paired queries a mark is given on (:data:`MIN_N`).
    """
    rows = []
    keys, groups = _cells(per_query, 'k')
    for key, cell in groups:
        systems = list(dict.fromkeys(cell['system']))
        p0 = cell.drop_duplicates('qid')['fbert_0shot'].mean()
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
    return pd.DataFrame(rows, columns=keys + ['system', 'utility', 'n', 'fbert_0shot', 'p_baseline',
                                              'p_reversal', 'mark'])


def _legend(baseline: Optional[str], alpha: float, correction: Optional[str], min_n: int = MIN_N) -> str:
    return ((f'{BASELINE_MARK} differs from {baseline}, ' if baseline else '')
            + f'{REVERSAL_MARK} differs from its unreversed ordering (paired t-test, p < {alpha}'
            + (f', {correction} correction' if correction else '')
            + f'; no mark on fewer than {min_n} paired queries, too few for the test to say much)')


def _n_text(part: pd.DataFrame) -> str:
    """The number of queries behind the means of a table part: one number, or the range over its cells."""
    n = part.loc[np.isfinite(part['utility'].to_numpy(float)), 'n']
    if n.empty:
        return 'n = 0 queries'
    low, high = int(n.min()), int(n.max())
    return f'n = {high} queries' if low == high else f'n = {low}\u2013{high} queries per cell'


def _n_legend(table: pd.DataFrame) -> str:
    """``_n_text`` of each dataset (of the whole table for one dataset)."""
    if 'dataset' not in table.columns or table['dataset'].nunique() == 1:
        return _n_text(table)
    return '; '.join(f'{d}: {_n_text(part)}' for d, part in table.groupby('dataset', sort=False))


def table1_markdown(table: pd.DataFrame, baseline: Optional[str] = 'Rel', alpha: float = 0.05,
                    digits: int = 3, correction: Optional[str] = None, min_n: int = MIN_N) -> str:
    """Table 1 as Markdown: one block per (dataset and) label set, a row per k, a column per system;
    each block says over how many queries its means are."""
    blocks = []
    keys = [k for k in ('dataset', 'labels') if k in table.columns]
    for key, part in table.groupby(keys, sort=False):
        title = ', '.join(str(x) for x in (key if isinstance(key, tuple) else (key,)))
        systems = list(dict.fromkeys(part['system']))
        header = ['k', '0-shot FBERT'] + systems
        lines = [f'**{title}**: mean utility, {_n_text(part)}; ' + _legend(baseline, alpha, correction, min_n),
                 '', '| ' + ' | '.join(header) + ' |', '|' + '---:|' * len(header)]
        for k, row in part.groupby('k', sort=False):
            cells = {s: f'{u:.{digits}f}{m}' for s, u, m in zip(row['system'], row['utility'], row['mark'])}
            lines.append('| ' + ' | '.join([str(k), f'{row["fbert_0shot"].iloc[0]:.{digits}f}']
                                           + [cells.get(s, '') for s in systems]) + ' |')
        blocks.append('\n'.join(lines))
    return '\n\n'.join(blocks) + '\n'


def _label_slots(table: pd.DataFrame):
    """The column blocks of the paper's layout and each dataset's label set in them: as many blocks as
    the dataset with the most label sets has, a dataset with fewer filling the last ones (the paper
    prints dev_small's one label set under DL's second, "r_DL = 3, r_dev_small = 1"). Returns the
    blocks' titles (their label sets, " / " between different ones) and dataset -> label set per block
    (``None``: empty)."""
    sets = {d: list(dict.fromkeys(part['labels'])) for d, part in table.groupby('dataset', sort=False)}
    width = max(len(s) for s in sets.values())
    placed = {d: [None] * (width - len(s)) + s for d, s in sets.items()}
    titles = [' / '.join(dict.fromkeys(p[j] for p in placed.values() if p[j] is not None)) for j in range(width)]
    return titles, placed


def _paper_layout(table: pd.DataFrame):
    """Rows (dataset, 0-shot FBERT per label-set block, system, cells) and columns (label-set block
    (:func:`_label_slots`), k), as the paper prints them; a cell is (mean U, mark, best), best being
    the highest mean U of its column within the dataset among the systems other than the oracles."""
    table = table if 'dataset' in table.columns else table.assign(dataset='')
    label_sets, placed = _label_slots(table)
    ks = list(dict.fromkeys(table['k']))
    rows = []
    for dataset, part in table.groupby('dataset', sort=False):
        zeros = [part.loc[part['labels'] == lab, 'fbert_0shot'].iloc[0] if lab is not None
                 else float('nan') for lab in placed[dataset]]
        finite = part[np.isfinite(part['utility'].to_numpy(float)) & ~part['system'].isin(ORACLES)]
        best = finite.groupby(['labels', 'k'])['utility'].max()
        for i, system in enumerate(dict.fromkeys(part['system'])):
            cells = []
            for lab in placed[dataset]:
                for k in ks:
                    hit = part[(part['labels'] == lab) & (part['k'] == k) & (part['system'] == system)]
                    u = hit['utility'].iloc[0] if len(hit) else float('nan')
                    cells.append((u, hit['mark'].iloc[0] if len(hit) else '',
                                  system not in ORACLES and np.isfinite(u) and u == best.get((lab, k))))
            rows.append((dataset, zeros if i == 0 else None, system, cells))
    return label_sets, ks, rows


def table1_paper(table: pd.DataFrame, fmt: str = 'markdown', baseline: Optional[str] = 'Rel', alpha: float = 0.05,
                 digits: int = 3, correction: Optional[str] = None, min_n: int = MIN_N) -> str:
    """Table 1 in the paper's layout: datasets stacked, a row per system, a column per k for each
    label set side by side, the 0-shot FBERT of each dataset, † and ‡, and the number of queries.
    A dataset with fewer label sets than another fills the last blocks of columns, as the paper
    prints dev_small's {1} under DL's {3}.

    ``fmt``: ``'markdown'`` or ``'latex'``; both have a 0-shot column per label set and a Dataset
    column only for several datasets. LaTeX is a ``table`` with a caption (legend and n), booktabs
    rules (``\\usepackage{booktabs}``), minus signs, and the best retrieval system of each column in
    bold (the oracles Rel and NRel are not compared).
    """
    if fmt not in ('markdown', 'latex'):
        raise SettingError(f"table1_paper: fmt must be 'markdown' or 'latex', got {fmt!r}")
    label_sets, ks, rows = _paper_layout(table)
    legend = f'Mean utility, {_n_legend(table)}; ' + _legend(baseline, alpha, correction, min_n)
    if fmt == 'markdown':
        def number(x):
            return '' if not np.isfinite(x) else f'{x:.{digits}f}'
        lead = _lead_columns(rows)
        header = lead + [f'{lab}, {c}' for lab in label_sets for c in ['0-shot'] + [f'k={k}' for k in ks]]
        lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(lead) + '---:|' * (len(header) - len(lead))]
        for _, out in _paper_cells(len(label_sets), len(ks), rows, str, number,
                                   lambda u, m, best: number(u) + (m if number(u) else '')):
            lines.append('| ' + ' | '.join(out) + ' |')
        return legend + '\n\n' + '\n'.join(lines) + '\n'
    return _latex_table(label_sets, ks, rows, legend, digits)


def _lead_columns(rows) -> List[str]:
    """The columns before the numbers: a Dataset column only for several datasets, then System."""
    return ['Dataset', 'System'] if len({d for d, _, _, _ in rows}) > 1 else ['System']


def _paper_cells(n_labels: int, n_ks: int, rows, name, number, cell):
    """Each row of the paper's layout as ``(first of its dataset, cells)``: (dataset,) system, then per
    label set its 0-shot FBERT and its k cells, written by ``name``, ``number`` and ``cell``."""
    several = len(_lead_columns(rows)) > 1
    for d, zeros, s, cells in rows:
        out = ([name(d) if zeros is not None else ''] if several else []) + [name(s)]
        for j in range(n_labels):
            out.append(number(zeros[j]) if zeros is not None else '')
            out += [cell(*c) for c in cells[j * n_ks:(j + 1) * n_ks]]
        yield zeros is not None, out


def _latex_number(x: float, digits: int) -> str:
    return '' if not np.isfinite(x) else f'{x:.{digits}f}'.replace('-', '$-$')


def _latex_table(label_sets, ks, rows, legend: str, digits: int) -> str:
    marks = {BASELINE_MARK: '\\dagger', REVERSAL_MARK: '\\ddagger'}

    def cell(u, m, best):
        text = _latex_number(u, digits)
        if text and best:
            text = f'\\textbf{{{text}}}'
        return text + (f'$^{{{"".join(marks[c] for c in m)}}}$' if text and m else '')
    lead = _lead_columns(rows)
    n = len(ks) + 1
    first = len(lead) + 1
    caption = _latex(legend).replace(BASELINE_MARK, '$\\dagger$').replace(REVERSAL_MARK, '$\\ddagger$')
    lines = ['\\begin{table}', '\\centering',
             f'\\caption{{{caption}. 0-shot: the mean $F_{{\\mathrm{{BERT}}}}$ of the answers without context; '
             'in bold, the best retrieval system of each column.}', '\\label{tab:utility}',
             '\\begin{tabular}{' + 'l' * len(lead) + 'r' * n * len(label_sets) + '}', '\\toprule',
             ' & ' * (len(lead) - 1) + ' & ' + ' & '.join(f'\\multicolumn{{{n}}}{{c}}{{{_latex(lab)}}}'
                                                       for lab in label_sets) + ' \\\\',
             ''.join(f'\\cmidrule(lr){{{first + i * n}-{first - 1 + (i + 1) * n}}}' for i in range(len(label_sets))),
             ' & '.join(lead + [c for _ in label_sets for c in ['0-shot'] + [f'$k={k}$' for k in ks]]) + ' \\\\',
             '\\midrule']
    cells = _paper_cells(len(label_sets), len(ks), rows, _latex, lambda x: _latex_number(x, digits), cell)
    for i, (first_of_dataset, out) in enumerate(cells):
        if first_of_dataset and i:
            lines.append('\\midrule')
        lines.append(' & '.join(out) + ' \\\\')
    lines += ['\\bottomrule', '\\end{tabular}', '\\end{table}']
    return '\n'.join(lines) + '\n'


def _latex(text: str) -> str:
    special = {'\\': '\\textbackslash{}', '~': '\\textasciitilde{}', **{c: '\\' + c for c in '&%$#_{}'}}
    return (''.join(special.get(c, c) for c in str(text)).replace('>=', '$\\geq$').replace('<', '$<$')
            .replace('\u2013', '--'))


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
            ``fbert``; the 0-shot answers as ``system`` '0-shot'; ``dataset`` for several).

    Example::

        table1(per_sample_utility(results.per_query, results.scores))
    """
    keys = [c for c in ('dataset', 'labels') if c in per_query.columns]
    zero = scores[scores['system'] == '0-shot'].drop_duplicates(keys + ['qid', 'sample'])
    zero = zero.set_index(keys + ['qid', 'sample'])['fbert'].rename('p0')
    k_shot = scores[scores['system'] != '0-shot'].join(zero, on=keys + ['qid', 'sample'])
    with np.errstate(divide='ignore', invalid='ignore'):
        ratio = (k_shot['fbert'] - k_shot['p0']) / k_shot['p0'].where(k_shot['p0'] != 0)
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
