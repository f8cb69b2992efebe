"""Table 1 as text: Markdown a block per label set, and the paper's layout in Markdown and LaTeX,
from the frame :func:`~pyterrier_utility.study.stats.table1` computes; and the tables a study folder
holds (:func:`write_tables`, :func:`write_study`)."""
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd

from ..errors import SettingError
from ..qualities import DEFAULT_QUALITY, quality_of
from ..schema import FRAME_FILES, TABLE_FILES
from ..scoring.utility import gain_name
from ..study import health as answer_health, stats
from ..study.health import HEALTH_MARK
from ..study.results import StudyResults
from ..study.stats import BASELINE_MARK, REVERSAL_MARK, block_heading, fold_readers
from ..vocabulary import CORRELATION_METHODS, MIN_N, ORACLES, ZERO_SHOT


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


def _zero(row: pd.DataFrame) -> str:
    """The mark of a block's 0-shot answers (:func:`~pyterrier_utility.study.health.mark_table`), ''
    where unmarked."""
    return str(row['mark_0shot'].iloc[0]) if 'mark_0shot' in row.columns else ''


def _with_notes(text: str, notes: Sequence[str]) -> str:
    return text + '\n' + '\n\n'.join(notes) + '\n' if notes else text


def table1_markdown(table: pd.DataFrame, baseline: Optional[str] = 'Rel', alpha: float = 0.05,
                    digits: int = 3, correction: Optional[str] = None, min_n: int = MIN_N,
                    notes: Sequence[str] = (), gain: str = 'relative', quality: str = DEFAULT_QUALITY) -> str:
    """Table 1 as Markdown: one block per (dataset and) label set, a row per k, a column of P_0 headed by
    the ``quality``'s name and a column per system; each block says what its means are (U under ``gain``)
    and over how many queries; ``notes`` (the health mark's legend, the positive control) follow the blocks."""
    blocks = []
    keys = [k for k in ('dataset', 'labels') if k in table.columns]
    for key, part in table.groupby(keys, sort=False):
        title = ', '.join(str(x) for x in (key if isinstance(key, tuple) else (key,)))
        systems = list(dict.fromkeys(part['system']))
        header = ['k', f'{ZERO_SHOT} {quality_of(quality).measure}'] + systems
        lines = [f'**{title}**: mean {gain_name(gain)}, {_n_text(part)}; '
                 + _legend(baseline, alpha, correction, min_n),
                 '', '| ' + ' | '.join(header) + ' |', '|' + '---:|' * len(header)]
        for k, row in part.groupby('k', sort=False):
            cells = {s: f'{u:.{digits}f}{m}' for s, u, m in zip(row['system'], row['utility'], row['mark'])}
            lines.append('| ' + ' | '.join([str(k), f'{row["quality_0shot"].iloc[0]:.{digits}f}{_zero(row)}']
                                           + [cells.get(s, '') for s in systems]) + ' |')
        blocks.append('\n'.join(lines))
    return _with_notes('\n\n'.join(blocks) + '\n', notes)


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
    """Rows (dataset, 0-shot P per label-set block, system, cells) and columns (label-set block
    (:func:`_label_slots`), k), as the paper prints them; a cell is (mean U, mark, best), best being
    the highest mean U of its column within the dataset among the systems other than the oracles; a
    0-shot P is (value, mark)."""
    table = table if 'dataset' in table.columns else table.assign(dataset='')
    label_sets, placed = _label_slots(table)
    ks = list(dict.fromkeys(table['k']))
    rows = []
    for dataset, part in table.groupby('dataset', sort=False):
        zeros = [(part.loc[part['labels'] == lab, 'quality_0shot'].iloc[0], _zero(part)) if lab is not None
                 else (float('nan'), '') for lab in placed[dataset]]
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
                 digits: int = 3, correction: Optional[str] = None, min_n: int = MIN_N,
                 notes: Sequence[str] = (), block: str = 'Dataset', gain: str = 'relative',
                 quality: str = DEFAULT_QUALITY) -> str:
    """Table 1 in the paper's layout: datasets stacked, a row per system, a column per k for each
    label set side by side, the 0-shot P of each dataset, † and ‡, and the number of queries.
    ``block`` heads the column naming the stacked blocks (``'Reader'`` where they are a study's readers,
    :func:`~pyterrier_utility.study.stats.block_heading`).
    A dataset with fewer label sets than another fills the last blocks of columns, as the paper
    prints dev_small's {1} under DL's {3}.

    ``fmt``: ``'markdown'`` or ``'latex'``; both have a 0-shot column per label set and a Dataset
    column only for several datasets. LaTeX is a ``table`` with a caption (legend and n), booktabs
    rules (``\\usepackage{booktabs}``), minus signs, and the best retrieval system of each column in
    bold (the oracles Rel and NRel are not compared). ``notes`` (the health mark's legend, the
    positive control) follow the legend (the caption in LaTeX), which names U's ``gain``; the caption
    names P_0 by its ``quality``.
    """
    if fmt not in ('markdown', 'latex'):
        raise SettingError(f"table1_paper: fmt must be 'markdown' or 'latex', got {fmt!r}")
    label_sets, ks, rows = _paper_layout(table)
    legend = f'Mean {gain_name(gain)}, {_n_legend(table)}; ' + _legend(baseline, alpha, correction, min_n)
    if fmt == 'markdown':
        def number(x):
            if isinstance(x, tuple):
                return number(x[0]) + (x[1] if number(x[0]) else '')
            return '' if not np.isfinite(x) else f'{x:.{digits}f}'
        legend = ' '.join([legend + '.', *notes]) if notes else legend
        lead = _lead_columns(rows, block)
        header = lead + [f'{lab}, {c}' for lab in label_sets for c in [ZERO_SHOT] + [f'k={k}' for k in ks]]
        lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(lead) + '---:|' * (len(header) - len(lead))]
        for _, out in _paper_cells(len(label_sets), len(ks), rows, str, number,
                                   lambda u, m, best: number(u) + (m if number(u) else '')):
            lines.append('| ' + ' | '.join(out) + ' |')
        return legend + '\n\n' + '\n'.join(lines) + '\n'
    return _latex_table(label_sets, ks, rows, ' '.join([legend + '.', *notes]), digits, block, quality)


def _lead_columns(rows, block: str = 'Dataset') -> List[str]:
    """The columns before the numbers: a ``block`` column (Dataset) only for several blocks, then System."""
    return [block, 'System'] if len({d for d, _, _, _ in rows}) > 1 else ['System']


def _paper_cells(n_labels: int, n_ks: int, rows, name, number, cell):
    """Each row of the paper's layout as ``(first of its dataset, cells)``: (dataset,) system, then per
    label set its 0-shot P and its k cells, written by ``name``, ``number`` and ``cell``."""
    several = len(_lead_columns(rows)) > 1
    for d, zeros, s, cells in rows:
        out = ([name(d) if zeros is not None else ''] if several else []) + [name(s)]
        for j in range(n_labels):
            out.append(number(zeros[j]) if zeros is not None else '')
            out += [cell(*c) for c in cells[j * n_ks:(j + 1) * n_ks]]
        yield zeros is not None, out


def _latex_number(x: float, digits: int) -> str:
    return '' if not np.isfinite(x) else f'{x:.{digits}f}'.replace('-', '$-$')


def _latex_table(label_sets, ks, rows, legend: str, digits: int, block: str, quality: str) -> str:
    marks = {BASELINE_MARK: '\\dagger', REVERSAL_MARK: '\\ddagger', HEALTH_MARK: '\\S'}

    def cell(u, m, best):
        text = _latex_number(u, digits)
        if text and best:
            text = f'\\textbf{{{text}}}'
        return text + (f'$^{{{"".join(marks[c] for c in m)}}}$' if text and m else '')
    lead = [_latex(c) for c in _lead_columns(rows, block)]
    n = len(ks) + 1
    first = len(lead) + 1
    caption = (_latex(legend).replace(BASELINE_MARK, '$\\dagger$').replace(REVERSAL_MARK, '$\\ddagger$')
               .replace(HEALTH_MARK, '\\S{}'))
    lines = ['\\begin{table}', '\\centering',
             f'\\caption{{{caption} 0-shot: the mean {_latex_name(quality)} of the answers without context; '
             'in bold, the best retrieval system of each column.}', '\\label{tab:utility}',
             '\\begin{tabular}{' + 'l' * len(lead) + 'r' * n * len(label_sets) + '}', '\\toprule',
             ' & ' * (len(lead) - 1) + ' & ' + ' & '.join(f'\\multicolumn{{{n}}}{{c}}{{{_latex(lab)}}}'
                                                       for lab in label_sets) + ' \\\\',
             ''.join(f'\\cmidrule(lr){{{first + i * n}-{first - 1 + (i + 1) * n}}}' for i in range(len(label_sets))),
             ' & '.join(lead + [c for _ in label_sets for c in [ZERO_SHOT] + [f'$k={k}$' for k in ks]]) + ' \\\\',
             '\\midrule']
    def zero(value):
        number, mark = value
        text = _latex_number(number, digits)
        return text + (f'$^{{{marks[mark]}}}$' if text and mark else '')
    cells = _paper_cells(len(label_sets), len(ks), rows, _latex, zero, cell)
    for i, (first_of_dataset, out) in enumerate(cells):
        if first_of_dataset and i:
            lines.append('\\midrule')
        lines.append(' & '.join(out) + ' \\\\')
    lines += ['\\bottomrule', '\\end{tabular}', '\\end{table}']
    return '\n'.join(lines) + '\n'


def _latex_name(quality: str) -> str:
    """P's name in a caption: its description's LaTeX (the paper's symbol for FBERT), else its measure's name."""
    described = quality_of(quality)
    return described.latex or _latex(described.measure)


def _latex(text: str) -> str:
    special = {'\\': '\\textbackslash{}', '~': '\\textasciitilde{}', **{c: '\\' + c for c in '&%$#_{}'}}
    return (''.join(special.get(c, c) for c in str(text)).replace('>=', '$\\geq$').replace('<', '$<$')
            .replace('\u2013', '--'))


def write_tables(per_query: pd.DataFrame, folder: Union[str, Path], *, baseline: Optional[str] = 'Rel',
                 alpha: float = 0.05, correction: Optional[str] = None, min_n: int = MIN_N,
                 ks: Optional[Sequence[int]] = None, health: Optional[pd.DataFrame] = None,
                 gain: str = 'relative', quality: str = DEFAULT_QUALITY) -> Dict[str, Path]:
    """Writes per_query.csv, table1.csv, table1.md (a block per label set), table1_paper.md and
    table1.tex (the paper's layout; LaTeX with booktabs) and correlations.csv (Pearson, Spearman,
    Kendall) into ``folder``; no significance mark on fewer than ``min_n`` paired queries. Table 1
    is over ``ks`` (default: every k of ``per_query``, which, like correlations.csv, holds them all).
    With the answers' ``health`` (``health.csv``), Table 1 marks its unhealthy cells (and says what
    the mark means) and, where it has both oracles, states its positive control (Rel above NRel at
    every k, :func:`~pyterrier_utility.study.health.control_notes`). ``gain``: what ``per_query``'s
    ``utility`` holds (:data:`~pyterrier_utility.vocabulary.UTILITY_GAINS`), named in the legends; ``quality``:
    what P is (a name of :data:`~pyterrier_utility.qualities.QUALITIES_BY_NAME`), its measure heading P_0."""
    folder = Path(folder)
    per_query.to_csv(folder / 'per_query.csv', index=False)
    block = block_heading(per_query)
    per_query = fold_readers(per_query)
    shown = per_query if ks is None else per_query[per_query['k'].isin(ks)]
    table = stats.table1(shown, baseline=baseline, alpha=alpha, correction=correction, min_n=min_n)
    notes = table_notes(table, health, alpha, min_n)
    if health is not None:
        table = answer_health.mark_table(table, fold_readers(health))
    paths = {name: folder / name for name in (FRAME_FILES['per_query'],) + TABLE_FILES}
    table.to_csv(paths['table1.csv'], index=False)
    options: Dict[str, Any] = dict(baseline=baseline, alpha=alpha, correction=correction, min_n=min_n, notes=notes,
                                   gain=gain, quality=quality)
    paths['table1.md'].write_text(table1_markdown(table, **options))
    paths['table1_paper.md'].write_text(table1_paper(table, 'markdown', block=block, **options))
    paths['table1.tex'].write_text(table1_paper(table, 'latex', block=block, **options))
    corr = pd.concat([stats.correlations(per_query, m) for m in CORRELATION_METHODS], ignore_index=True)
    corr.to_csv(paths['correlations.csv'], index=False)
    return paths


def table_notes(table: pd.DataFrame, health: Optional[pd.DataFrame], alpha: float = 0.05,
                min_n: int = MIN_N) -> Tuple[str, ...]:
    """What Table 1 says below its legend: what the health mark means (when a cell has it) and the
    positive control (:func:`~pyterrier_utility.study.health.control_notes`; where it fails, the health
    of its cells)."""
    notes: Tuple[str, ...] = ()
    if health is not None and not answer_health.unhealthy(fold_readers(health)).empty:
        notes += (answer_health.health_legend() + '.',)
    control = answer_health.positive_control(table, alpha, min_n)
    return notes + answer_health.control_notes(control, None if health is None else fold_readers(health))


def write_study(results: StudyResults, folder: Union[str, Path], *, alpha: float = 0.05,
                correction: Optional[str] = None, min_n: int = MIN_N,
                ks: Optional[Sequence[int]] = None, gain: str = 'relative',
                quality: str = DEFAULT_QUALITY) -> Dict[str, Path]:
    """Writes a study's data (:meth:`~pyterrier_utility.study.StudyResults.save`) and its tables
    (:func:`write_tables`: Table 1 over ``ks``, default every k, its unhealthy cells marked, U named by
    ``gain`` and P by ``quality``, the study's) into ``folder``; returns the paths by file name.

    Example::

        from pyterrier_utility import report
        report.write_study(results, 'results/small')
        report.write_report('results/small')   # results/small/report.html
    """
    health = results.health()
    paths = results.save(folder, health=health)
    paths.update(write_tables(results.per_query, folder, baseline=results.baseline, alpha=alpha,
                              correction=correction, min_n=min_n, ks=ks, health=health, gain=gain,
                              quality=quality))
    return paths
