"""Figures 3-5 of the study, drawn with matplotlib from a study's per-query values."""
from pathlib import Path
from typing import Optional, Union

import numpy as np
import pandas as pd

from ..errors import SettingError
from . import stats


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


def utility_vs_k(per_query: pd.DataFrame, path: Optional[Union[str, Path]] = None):
    """Figure 3: mean utility against k, a line per system, a panel per label set."""
    plt = _pyplot()
    table = stats.table1(per_query, baseline=None)
    label_sets = list(dict.fromkeys(table['labels']))
    fig, axes = _panels(plt, len(label_sets), width=5.5, height=4)
    for ax, labels in zip(axes, label_sets):
        part = table[table['labels'] == labels]
        for system, line in part.groupby('system', sort=False):
            ax.plot(line['k'], line['utility'], marker='o', label=system)
        ax.axhline(0, color='grey', lw=0.8, ls=':')
        ax.set_xlabel('k (documents in the context)')
        ax.set_ylabel('mean utility U')
        ax.set_title(f'Utility vs k ({labels})')
        ax.set_xticks(sorted(part['k'].unique()))
        ax.legend(fontsize='small')
    fig.tight_layout()
    return _save(fig, path)


def ndcg_vs_utility(per_query: pd.DataFrame, k: int, labels: Optional[str] = None,
                    path: Optional[Union[str, Path]] = None):
    """Figure 4: per-query nDCG@k against utility at one k, a panel per system, with the
    least-squares line."""
    plt = _pyplot()
    labels = labels or per_query['labels'].iloc[0]
    part = per_query[(per_query['labels'] == labels) & (per_query['k'] == k)]
    if part.empty:
        raise SettingError(f'ndcg_vs_utility: no per-query values for k={k} and {labels}')
    systems = list(dict.fromkeys(part['system']))
    fig, axes = _panels(plt, len(systems))
    for ax, system in zip(axes, systems):
        cell = part[part['system'] == system]
        x, y = cell['ndcg'].to_numpy(float), cell['utility'].to_numpy(float)
        finite = np.isfinite(x) & np.isfinite(y)
        ax.scatter(x[finite], y[finite], s=18, alpha=0.7, label='query')
        r, _ = stats.correlation(x, y)
        if finite.sum() >= 2 and np.ptp(x[finite]) > 0:
            slope, intercept = np.polyfit(x[finite], y[finite], 1)
            grid = np.linspace(x[finite].min(), x[finite].max(), 2)
            ax.plot(grid, slope * grid + intercept, color='C3', label=f'least squares (r={r:.2f})')
        ax.set_xlabel(f'nDCG@{k}')
        ax.set_ylabel('utility U')
        ax.set_title(system)
        ax.legend(fontsize='x-small')
    fig.suptitle(f'Per-query nDCG@{k} vs utility ({labels})')
    fig.tight_layout()
    return _save(fig, path)


def correlation_vs_k(per_query: pd.DataFrame, method: str = 'pearson', labels: Optional[str] = None,
                     path: Optional[Union[str, Path]] = None):
    """Figure 5: the correlation of nDCG@k and utility across queries against k, a line per system."""
    plt = _pyplot()
    labels = labels or per_query['labels'].iloc[0]
    corr = stats.correlations(per_query[per_query['labels'] == labels], method=method)
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for system, line in corr.groupby('system', sort=False):
        if line['r'].notna().any():
            ax.plot(line['k'], line['r'], marker='o', label=system)
    ax.axhline(0, color='grey', lw=0.8, ls=':')
    ax.set_xlabel('k (documents in the context)')
    ax.set_ylabel(f'{method.capitalize()} r(nDCG@k, U)')
    ax.set_title(f'Correlation of nDCG@k and utility vs k ({labels})')
    ax.set_xticks(sorted(corr['k'].unique()))
    ax.legend(fontsize='small')
    fig.tight_layout()
    return _save(fig, path)
