"""What predicts utility, shown: a heatmap of Spearman's rho (signals by k, a panel per system and
target) as the authors draw theirs, and the report's section (the rho with its interval, the
out-of-fold combination, Kendall's tau over the cells), both read from ``prediction.csv``."""
import html
import json
from pathlib import Path
from typing import Union

import numpy as np
import pandas as pd

from ..schema import PREDICTION_FILES, SETTINGS_FILE
from ..study.meta_evaluation import notes
from ..vocabulary import COMBINED, PREDICTION_LEVELS, PREDICTION_TARGETS
from .figures import panel_grid, pyplot, save_figure

#: The heatmap's file name (a ``fig*.png``: the report shows it among the study's figures).
HEATMAP = 'fig6_prediction_rho.png'


def _first_labels(prediction: pd.DataFrame) -> pd.DataFrame:
    """The per-query rows of the first label set."""
    rows = prediction[prediction['level'] == PREDICTION_LEVELS[0]]
    return rows[rows['labels'] == rows['labels'].iloc[0]]


def prediction_heatmap(prediction: pd.DataFrame, path: Union[str, Path, None] = None):
    """Spearman's rho of each signal (rows) at each k (columns), a panel per system and target, for
    the first label set; NaN cells left blank. Returns the figure, saved to ``path`` when given.

    Example::

        prediction_heatmap(pd.read_csv('results/study/prediction.csv'), 'heatmap.png')
    """
    plt = pyplot()
    rows = _first_labels(prediction)
    systems = list(dict.fromkeys(rows['system']))
    signals = list(dict.fromkeys(rows['signal']))
    panels = [(s, t) for s in systems for t in PREDICTION_TARGETS]
    fig, axes = panel_grid(plt, len(panels), width=0.9 + 0.55 * rows['k'].nunique(),
                        height=0.3 * len(signals) + 1.2, cols=len(PREDICTION_TARGETS))
    for ax, (system, target) in zip(axes, panels):
        table = rows[(rows['system'] == system) & (rows['target'] == target)].pivot_table(
            index='signal', columns='k', values='spearman', dropna=False).reindex(signals)
        image = ax.imshow(table.to_numpy(float), cmap='RdBu', vmin=-1, vmax=1, aspect='auto')
        for (i, j), value in np.ndenumerate(table.to_numpy(float)):
            if np.isfinite(value):
                ax.text(j, i, f'{value:.2f}', ha='center', va='center', fontsize=7)
        ax.set_xticks(range(len(table.columns)), [str(int(k)) for k in table.columns])
        ax.set_yticks(range(len(signals)), signals if ax.get_subplotspec().is_first_col() else [''] * len(signals),
                      fontsize=7)
        ax.set_xlabel('k')
        ax.set_title(f'{system}: {target}', fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.6, label="Spearman's rho")
    fig.suptitle(f"Spearman's rho with each target over queries ({rows['labels'].iloc[0]})")
    return save_figure(fig, path)


def _number(value, digits: int = 3) -> str:
    return '' if pd.isna(value) else f'{value:.{digits}f}'


def _rho_cells(row: pd.Series) -> str:
    """A signal's rho and its interval, as two cells."""
    return (f'<td>{_number(row["spearman"])}</td>'
            f'<td>[{_number(row["spearman_low"], 2)}, {_number(row["spearman_high"], 2)}]</td>')


def prediction_section(folder: Union[str, Path]) -> str:
    """The report's section from ``prediction.csv`` in ``folder`` ('' when absent): per system and k
    of the first label set, each signal's Spearman rho with U with its 95% interval, beside P_k's,
    the out-of-fold combination last; then Kendall's tau over the cells. The signals left out of a
    system and why, and each system's combination, as ``settings.json`` records them, come first."""
    path = Path(folder) / PREDICTION_FILES['prediction']
    if not path.is_file():
        return ''
    settings = Path(folder) / SETTINGS_FILE
    record = json.loads(settings.read_text()).get('prediction', {}) if settings.is_file() else {}
    said = ''.join(f'<p class="note">{html.escape(line)}</p>' for line in notes(record))
    prediction = pd.read_csv(path, dtype={'labels': str, 'system': str, 'signal': str})
    rows = _first_labels(prediction)
    targets = PREDICTION_TARGETS[0], PREDICTION_TARGETS[-1]
    body = []
    for (system, k), cell in rows.groupby(['system', 'k'], sort=False):
        by = {t: cell[cell['target'] == t].set_index('signal') for t in targets}
        lines = [f'<tr{" class=combined" if s == COMBINED else ""}><td>{html.escape(s)}</td>'
                 + ''.join(_rho_cells(by[t].loc[s]) for t in targets)
                 + f'<td>{_number(by[targets[0]].loc[s, "n"], 0)}</td></tr>' for s in by[targets[0]].index]
        body.append(f'<details><summary>{html.escape(system)}, k = {int(k)}</summary><table class="prediction">'
                    f'<tr><th>signal</th><th>rho with {targets[0]}</th><th>95%</th><th>rho with {targets[1]}</th>'
                    f'<th>95%</th><th>n</th></tr>{"".join(lines)}</table></details>')
    tau = prediction[(prediction['level'] == PREDICTION_LEVELS[1]) & (prediction['target'] == targets[0])
                     & (prediction['labels'] == rows['labels'].iloc[0])]
    taus = ''.join(f'<tr><td>{html.escape(s)}</td><td>{_number(t)}</td><td>{_number(p)}</td>'
                   f'<td>{_number(n, 0)}</td></tr>'
                   for s, t, p, n in tau[['signal', 'kendall', 'kendall_p', 'n']].itertuples(index=False))
    return (said + f'<p class="note">prediction.csv ({html.escape(str(rows["labels"].iloc[0]))}): each signal\'s '
            f'Spearman rho over the queries of a cell with a seeded bootstrap 95% interval; {COMBINED}: a linear '
            'regression over several signals, each query predicted out of fold. The heatmap is among the figures.</p>'
            + ''.join(body)
            + '<p class="note">Kendall\'s tau between the orderings of the (system, k) cells by mean signal and by '
              'mean U:</p><table class="prediction"><tr><th>signal</th><th>tau</th><th>p</th><th>cells</th></tr>'
            + taus + '</table>')
