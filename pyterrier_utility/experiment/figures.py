"""Figures 3-5 of the study, drawn as the paper draws them, with matplotlib from per-query values.

A study over several datasets gets one panel per dataset (the paper: DL'19 left, DL'20 right).
"""
from pathlib import Path
from typing import Optional, Sequence, Union

import numpy as np
import pandas as pd

from ..errors import SettingError
from . import stats

#: The oracles: Figure 4 shows the retrieval systems only.
ORACLES = ('Rel', 'NRel')


def _pyplot():
    # Headless machines fall back to Agg; notebooks keep their inline backend.
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path: Optional[Union[str, Path]]):
    if path is not None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=120, bbox_inches='tight')
    return fig


def _panels(plt, n: int, width: float = 4.2, height: float = 3.4, cols: int = 3):
    cols = min(cols, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _datasets(per_query: pd.DataFrame):
    """(name, part) per dataset; one unnamed part for a study over one collection."""
    if 'dataset' not in per_query.columns:
        return [('', per_query)]
    return list(per_query.groupby('dataset', sort=False))


def _labels(per_query: pd.DataFrame, labels: Optional[str]) -> str:
    labels = labels or per_query['labels'].iloc[0]
    if labels not in set(per_query['labels']):
        raise SettingError(f'no per-query values for {labels}; the study has {sorted(set(per_query["labels"]))}')
    return labels


def _title(*parts) -> str:
    return ', '.join(str(p) for p in parts if p)


def utility_vs_k(per_query: pd.DataFrame, path: Optional[Union[str, Path]] = None, labels: Optional[str] = None,
                 exclude: Sequence[str] = ('NRel',)):
    """Figure 3: mean utility against k, a line per system, a panel per dataset and label set
    (``labels``: one of them only). NRel is left out by default, as in the paper (its utilities lie
    far below the others)."""
    plt = _pyplot()
    part = per_query if labels is None else per_query[per_query['labels'] == _labels(per_query, labels)]
    part = part[~part['system'].isin(exclude)]
    table = stats.table1(part, baseline=None)
    keys = [k for k in ('dataset', 'labels') if k in table.columns]
    groups = list(table.groupby(keys, sort=False))
    fig, axes = _panels(plt, len(groups), width=5.5, height=4)
    for ax, (key, cell) in zip(axes, groups):
        for system, line in cell.groupby('system', sort=False):
            ax.plot(line['k'], line['utility'], marker='o', label=system)
        ax.axhline(0, color='grey', lw=0.8, ls=':')
        ax.set_xlabel('k (documents in the context)')
        ax.set_ylabel('mean utility U')
        ax.set_title(_title('Utility vs k', *(key if isinstance(key, tuple) else (key,))))
        ax.set_xticks(sorted(cell['k'].unique()))
        ax.legend(fontsize='small')
    fig.tight_layout()
    return _save(fig, path)


def ndcg_vs_utility(per_query: pd.DataFrame, k: int, labels: Optional[str] = None,
                    path: Optional[Union[str, Path]] = None, systems: Optional[Sequence[str]] = None,
                    ndcg_order: str = 'context'):
    """Figure 4: per-query nDCG@k against utility at one k, with the least-squares line: a row per
    dataset, a panel per system (default: the retrieval systems and their reversals, as the paper)."""
    plt = _pyplot()
    labels = _labels(per_query, labels)
    part = per_query[(per_query['labels'] == labels) & (per_query['k'] == k)]
    if part.empty:
        raise SettingError(f'ndcg_vs_utility: no per-query values for k={k} and {labels}')
    systems = list(systems or [s for s in dict.fromkeys(part['system']) if s not in ORACLES]
                   or list(dict.fromkeys(part['system'])))
    datasets = _datasets(part)
    fig, axes = plt.subplots(len(datasets), len(systems), figsize=(4.2 * len(systems), 3.4 * len(datasets)),
                             squeeze=False)
    for row, (dataset, cell_part) in zip(axes, datasets):
        for ax, system in zip(row, systems):
            cell = cell_part[cell_part['system'] == system]
            x, y = cell['ndcg'].to_numpy(float), cell['utility'].to_numpy(float)
            finite = np.isfinite(x) & np.isfinite(y)
            ax.scatter(x[finite], y[finite], s=18, alpha=0.7, label='query')
            r, _ = stats.correlation(x, y)
            if finite.sum() >= 2 and np.ptp(x[finite]) > 0:
                slope, intercept = np.polyfit(x[finite], y[finite], 1)
                grid = np.linspace(x[finite].min(), x[finite].max(), 2)
                ax.plot(grid, slope * grid + intercept, color='black', label=f'least squares (r={r:.2f})')
            ax.set_xlabel(f'nDCG@{k} ({ndcg_order} order)')
            ax.set_ylabel('utility U')
            ax.set_title(_title(dataset, system))
            ax.legend(fontsize='x-small')
    fig.suptitle(f'Per-query nDCG@{k} vs utility ({labels})')
    fig.tight_layout()
    return _save(fig, path)


def correlation_vs_k(per_query: pd.DataFrame, method: str = 'pearson', labels: Optional[str] = None,
                     path: Optional[Union[str, Path]] = None):
    """Figure 5: the correlation of nDCG@k and utility across queries against k, a line per system,
    a panel per dataset."""
    plt = _pyplot()
    labels = _labels(per_query, labels)
    datasets = _datasets(per_query[per_query['labels'] == labels])
    fig, axes = _panels(plt, len(datasets), width=5.5, height=4)
    for ax, (dataset, part) in zip(axes, datasets):
        corr = stats.correlations(part.drop(columns=['dataset'], errors='ignore'), method=method)
        for system, line in corr.groupby('system', sort=False):
            if line['r'].notna().any():
                ax.plot(line['k'], line['r'], marker='o', label=system)
        ax.axhline(0, color='grey', lw=0.8, ls=':')
        ax.set_xlabel('k (documents in the context)')
        ax.set_ylabel(f'{method.capitalize()} r(nDCG@k, U)')
        ax.set_title(_title('Correlation of nDCG@k and utility vs k', dataset, labels))
        ax.set_xticks(sorted(corr['k'].unique()))
        ax.legend(fontsize='small')
    fig.tight_layout()
    return _save(fig, path)


def draw_figures(per_query: pd.DataFrame, folder: Union[str, Path], fig4_k: int, labels: Optional[str] = None,
                 ndcg_order: str = 'context', formats: Sequence[str] = ('png', 'pdf')) -> list:
    """Figures 3-5 of a study into ``folder``, each as PNG and PDF; returns the file names."""
    plt = _pyplot()
    folder = Path(folder)
    figures = {'fig3_utility_vs_k': lambda: utility_vs_k(per_query, labels=labels),
               f'fig4_ndcg_vs_utility_k{fig4_k}': lambda: ndcg_vs_utility(per_query, fig4_k, labels=labels,
                                                                          ndcg_order=ndcg_order),
               'fig5_pearson_vs_k': lambda: correlation_vs_k(per_query, 'pearson', labels=labels)}
    names = []
    for name, draw in figures.items():
        fig = draw()
        for fmt in formats:
            _save(fig, folder / f'{name}.{fmt}')
            names.append(f'{name}.{fmt}')
        plt.close(fig)
    return names
