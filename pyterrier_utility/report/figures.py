"""Figures 3-5 of the study, drawn as the paper draws them, with matplotlib from per-query values.

A study over several datasets gets one panel per dataset (the paper: DL'19 left, DL'20 right).
"""
import functools
import textwrap
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd

from .._messages import count
from ..errors import SettingError
from ..scoring.utility import gain_name
from ..study import stats
from ..vocabulary import ORACLES


def pyplot():
    """matplotlib's pyplot, imported when a figure is first drawn."""
    # Headless machines fall back to Agg; notebooks keep their inline backend.
    import matplotlib.pyplot as plt
    return plt


#: Text sizes of every figure: at the 120 dpi it is saved at, 12 pt is 20 pixels and the smallest text
#: (10 pt) 17, so a figure shown no smaller than 85% of its size (a report page 1400 pixels wide) has
#: no text smaller than the page's own 14-pixel text.
FONTS = {'font.size': 12, 'axes.titlesize': 12, 'axes.labelsize': 12, 'xtick.labelsize': 11, 'ytick.labelsize': 11,
         'legend.fontsize': 10, 'figure.titlesize': 13}
#: Characters per line of a panel's title, so that the titles of panels side by side do not meet.
TITLE_WIDTH = 48


def _legible(draw):
    """Draws the figure with :data:`FONTS`."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        with pyplot().rc_context(FONTS):
            return draw(*args, **kwargs)
    return drawn


def save_figure(fig, path: Optional[Union[str, Path]]):
    """Writes ``fig`` to ``path`` (its folder made; nothing when ``None``); returns the figure."""
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches='tight')
    return fig


def panel_grid(plt, n: int, width: float = 4.2, height: float = 3.4, cols: int = 2):
    """A figure of ``n`` panels, ``cols`` to a row, and its axes in reading order (the unused ones hidden)."""
    cols = min(cols, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _labels(per_query: pd.DataFrame, labels: Optional[str]) -> pd.DataFrame:
    """The rows of one label set (``None``: every label set)."""
    if labels is None:
        return per_query
    if labels not in set(per_query['labels']):
        raise SettingError(f'no per-query values for {labels}; the study has {sorted(set(per_query["labels"]))}')
    return per_query[per_query['labels'] == labels]


def _title(*parts) -> str:
    return ', '.join(str(p) for p in parts if p).replace('>=', '\u2265').replace('<=', '\u2264')


def _wrapped(*lines: str) -> str:
    return '\n'.join(textwrap.fill(line, TITLE_WIDTH) for line in lines)


def _groups(part: pd.DataFrame):
    """((dataset, labels), rows) per panel of a study (dataset '' for one collection)."""
    part = part if 'dataset' in part.columns else part.assign(dataset='')
    return list(part.groupby(['dataset', 'labels'], sort=False))


def _legend_outside(ax):
    # Outside the axes, right: a legend inside covers the lines it names.
    ax.legend(loc='upper left', bbox_to_anchor=(1.02, 1), borderaxespad=0)


@_legible
def utility_vs_k(per_query: pd.DataFrame, path: Optional[Union[str, Path]] = None, labels: Optional[str] = None,
                 exclude: Sequence[str] = ('NRel',), resamples: int = 1000, gain: str = 'relative'):
    """Figure 3: mean utility against k, a line per system with its 95% bootstrap interval over
    queries (error bars, :func:`stats.utility_ci`), a panel per dataset and label set (``labels``:
    one of them only). NRel is left out by default, as in the paper (its utilities lie far below the
    others); the panel's title says so. ``gain``: what ``utility`` holds, named on the axis."""
    plt = pyplot()
    part = _labels(per_query, labels)
    part = part[~part['system'].isin(exclude)]
    ci = stats.utility_ci(part.assign(dataset=part.get('dataset', '')), resamples=resamples)
    groups = _groups(ci)
    fig, axes = panel_grid(plt, len(groups), width=5.6, height=4.2)
    left_out = [s for s in exclude if s in set(per_query['system'])]
    for ax, ((dataset, label_set), cell) in zip(axes, groups):
        for system, line in cell.groupby('system', sort=False):
            ax.errorbar(line['k'], line['utility'],
                        yerr=[line['utility'] - line['low'], line['high'] - line['utility']],
                        marker='o', capsize=3, label=system)
        ax.axhline(0, color='grey', lw=0.8, ls=':')
        ax.set_xlabel('k (documents in the context)')
        ax.set_ylabel(f'mean {gain_name(gain)} U')
        n = int(cell['n'].max()) if len(cell) else 0
        ax.set_title(_wrapped(_title('Utility vs k', dataset, label_set, 'n = ' + count(n, 'query')),
                              f'(95% bootstrap intervals; not drawn: {", ".join(left_out)})' if left_out
                              else '(95% bootstrap intervals)'))
        ax.set_xticks(sorted(cell['k'].unique()))
        _legend_outside(ax)
    fig.tight_layout()
    return save_figure(fig, path)


@_legible
def ndcg_vs_utility(per_query: pd.DataFrame, k: int, labels: Optional[str] = None,
                    path: Optional[Union[str, Path]] = None, systems: Optional[Sequence[str]] = None,
                    ndcg_order: str = 'context', gain: str = 'relative'):
    """Figure 4: per-query nDCG@k against utility at one k, with the least-squares line: a row per
    dataset and label set (``labels``: one only), a panel per system (default: the retrieval systems
    and their reversals, as the paper), axes shared. Each panel gives n, Pearson r and its p; no line
    where r is undefined (fewer than 3 queries or a constant side), and the panel says so. ``gain``:
    what ``utility`` holds, named on the axis."""
    plt = pyplot()
    part = _labels(per_query, labels)
    part = part[part['k'] == k]
    if part.empty:
        raise SettingError(f'ndcg_vs_utility: no per-query values for k={k}' + (f' and {labels}' if labels else ''))
    # The retrieval systems only: the oracles are bounds, not rankers whose nDCG means something.
    systems = list(systems or [s for s in dict.fromkeys(part['system']) if s not in ORACLES]
                   or list(dict.fromkeys(part['system'])))
    groups = _groups(part)
    cols = len(systems) if len(groups) > 1 else int(np.ceil(np.sqrt(len(systems))))
    rows = len(groups) * int(np.ceil(len(systems) / cols))
    fig, grid = plt.subplots(rows, cols, figsize=(3.3 * cols, 3.4 * rows), squeeze=False, sharex=True, sharey=True)
    axes = iter(grid.flat)
    for (dataset, label_set), cell_part in groups:
        for system in systems:
            ax = next(axes)
            cell = cell_part[cell_part['system'] == system]
            x, y = cell['ndcg'].to_numpy(float), cell['utility'].to_numpy(float)
            finite = np.isfinite(x) & np.isfinite(y)
            ax.scatter(x[finite], y[finite], s=14, alpha=0.7)
            r, p = stats.correlation(x, y)
            if np.isfinite(r):
                slope, intercept = np.polyfit(x[finite], y[finite], 1)
                grid_x = np.linspace(x[finite].min(), x[finite].max(), 2)
                ax.plot(grid_x, slope * grid_x + intercept, color='black', lw=1)
                fit = f'r = {r:.2f}, p = {p:.2g}'
            else:
                fit = 'no line: r undefined'
            ax.set_title(_title(dataset, label_set, system) + f'\nn = {int(finite.sum())}, {fit}', fontsize=10)
    for ax in axes:
        ax.set_visible(False)
    for ax in grid[-1]:
        ax.set_xlabel(f'nDCG@{k} ({ndcg_order} order)')
    for ax in grid[:, 0]:
        ax.set_ylabel(f'{gain_name(gain)} U')
    fig.suptitle(f'Per-query nDCG@{k} vs utility, with least-squares lines')
    fig.tight_layout()
    return save_figure(fig, path)


@_legible
def correlation_vs_k(per_query: pd.DataFrame, method: str = 'pearson', labels: Optional[str] = None,
                     path: Optional[Union[str, Path]] = None, resamples: int = 1000):
    """Figure 5: the correlation of nDCG@k and utility across queries against k, a line per system
    with its 95% bootstrap interval over queries, a panel per dataset and label set (``labels``: one
    only). A system whose r is undefined at every k (NRel, whose nDCG is 0; any with fewer than 3
    queries) is not drawn, and the panel names it."""
    plt = pyplot()
    groups = _groups(_labels(per_query, labels))
    fig, axes = panel_grid(plt, len(groups), width=5.6, height=4.4)
    for ax, ((dataset, label_set), part) in zip(axes, groups):
        corr = stats.correlations(part.drop(columns=['dataset']), method=method, resamples=resamples)
        drawn, undefined = [], []
        for system, line in corr.groupby('system', sort=False):
            if line['r'].notna().any():
                ax.errorbar(line['k'], line['r'], yerr=[line['r'] - line['low'], line['high'] - line['r']],
                            marker='o', capsize=3, label=system)
                drawn.append(system)
            else:
                undefined.append(system)
        ax.axhline(0, color='grey', lw=0.8, ls=':')
        ax.set_xlabel('k (documents in the context)')
        ax.set_ylabel(f'{method.capitalize()} r(nDCG@k, U)')
        n = int(corr['n'].max()) if len(corr) else 0
        note = (f'not drawn, r undefined (fewer than 3 queries, or nDCG or U constant): {", ".join(undefined)}'
                if undefined else '95% bootstrap intervals')
        ax.set_title(_wrapped(_title('Correlation of nDCG@k and utility vs k', dataset, label_set,
                                     'n = ' + count(n, 'query')), note))
        ax.set_xticks(sorted(corr['k'].unique()))
        if drawn:
            _legend_outside(ax)
        else:
            ax.text(0.5, 0.5, 'nothing to draw', ha='center', va='center', transform=ax.transAxes)
    fig.tight_layout()
    return save_figure(fig, path)


def draw_figures(per_query: pd.DataFrame, folder: Union[str, Path], fig4_k: int, labels: Optional[str] = None,
                 ndcg_order: str = 'context', formats: Sequence[str] = ('png', 'pdf'),
                 ks: Optional[Sequence[int]] = None, gain: str = 'relative') -> list:
    """Figures 3-5 of a study into ``folder``, each as PNG and PDF, each with a panel per dataset and
    label set (``labels``: one only), Figures 3 and 5 over ``ks`` (default: every k of
    ``per_query``), U under ``gain`` (what ``per_query``'s ``utility`` holds); returns the file names."""
    plt = pyplot()
    folder = Path(folder)
    swept = per_query if ks is None else per_query[per_query['k'].isin(ks)]
    figures = {'fig3_utility_vs_k': lambda: utility_vs_k(swept, labels=labels, gain=gain),
               f'fig4_ndcg_vs_utility_k{fig4_k}': lambda: ndcg_vs_utility(per_query, fig4_k, labels=labels,
                                                                          ndcg_order=ndcg_order, gain=gain),
               'fig5_pearson_vs_k': lambda: correlation_vs_k(swept, 'pearson', labels=labels)}
    names = []
    for name, draw in figures.items():
        fig = draw()
        for fmt in formats:
            save_figure(fig, folder / f'{name}.{fmt}')
            names.append(f'{name}.{fmt}')
        plt.close(fig)
    return names
