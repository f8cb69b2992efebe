"""Across readers, shown: the readers' agreement as a heatmap, one reader's per-document utility against
another's, and the report's section (the transfer table with its marks, the agreement with its
intervals, the figures), all read from the files the ``transfer`` command writes
(:data:`~pyterrier_utility.schema.TRANSFER_FILES`)."""
import html
import json
from itertools import combinations
from pathlib import Path
from typing import Optional, Union

import numpy as np
import pandas as pd

from ..schema import FRAME_FILES, SETTINGS_FILE, TRANSFER_FILES
from ..study.transfer import ORACLE_PREFIX
from .figures import panel_grid, pyplot, save_figure
from .markup import cell_number, figure_html, html_table, markdown_html

#: The statistics of the heatmap, one panel each (``transfer.csv``'s ``statistic``).
HEATMAP_STATISTICS = ('spearman_per_query', 'kendall_per_query', 'spearman_pooled', 'jaccard')
#: What each statistic of ``transfer.csv`` measures, as the section lists them.
STATISTIC_NAMES = {
    'spearman_per_query': "Spearman's rho of the gains over a query's pool, mean over queries",
    'kendall_per_query': "Kendall's tau of the gains over a query's pool, mean over queries",
    'spearman_pooled': "Spearman's rho of the gains over every (query, document)",
    'kendall_pooled': "Kendall's tau of the gains over every (query, document)",
    'jaccard': 'Jaccard overlap of the documents of positive gain, mean over queries',
    'label_auc': "AUC of the human label (relevant or not) against the reader's gain",
    'cell_order_tau': "Kendall's tau between the readers' orderings of the study's (system, k) cells by mean U",
}


def _first_labels(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame['labels'] == frame['labels'].iloc[0]]


def _readers(agreement: pd.DataFrame) -> list:
    pairs = agreement[agreement['statistic'].isin(HEATMAP_STATISTICS)]
    return list(dict.fromkeys([*pairs['reader_a'], *pairs['reader_b']]))


def agreement_heatmap(agreement: pd.DataFrame, path: Union[str, Path, None] = None):
    """The readers' agreement (``transfer.csv``) of the first label set as reader x reader matrices, a
    panel per statistic of :data:`HEATMAP_STATISTICS`, the value in each cell (the diagonal and
    undefined values blank). Returns the figure, saved to ``path`` when given.

    Example::

        agreement_heatmap(pd.read_csv('results/readers/transfer.csv'), 'agreement.png')
    """
    plt = pyplot()
    rows = _first_labels(agreement)
    readers = _readers(rows)
    where = {r: i for i, r in enumerate(readers)}
    fig, axes = panel_grid(plt, len(HEATMAP_STATISTICS), width=1.0 + 0.9 * len(readers),
                           height=1.6 + 0.8 * len(readers), cols=len(HEATMAP_STATISTICS))
    for ax, statistic in zip(axes, HEATMAP_STATISTICS):
        matrix = np.full((len(readers), len(readers)), np.nan)
        for a, b, value in rows.loc[rows['statistic'] == statistic, ['reader_a', 'reader_b', 'value']].itertuples(
                index=False):
            matrix[where[a], where[b]] = matrix[where[b], where[a]] = value
        image = ax.imshow(matrix, cmap='RdBu', vmin=-1, vmax=1)
        for (i, j), value in np.ndenumerate(matrix):
            if np.isfinite(value):
                ax.text(j, i, f'{value:.2f}', ha='center', va='center', fontsize=10)
        ax.set_xticks(range(len(readers)), readers, rotation=30, ha='right', fontsize=9)
        ax.set_yticks(range(len(readers)), readers if ax.get_subplotspec().is_first_col() else [''] * len(readers),
                      fontsize=9)
        ax.set_title(statistic.replace('_', ' '), fontsize=10)
    fig.colorbar(image, ax=axes, shrink=0.6, label='agreement')
    fig.suptitle(f'Agreement of the readers\' document utility ({rows["labels"].iloc[0]})')
    return save_figure(fig, path)


def gain_scatter(document_utility: pd.DataFrame, path: Union[str, Path, None] = None):
    """Each (query, pool document)'s gain for one reader (x) against another's (y), a panel per pair of
    readers, for the first label set, coloured by the human label (grey: unjudged), with the diagonal
    (the same utility for both) and the zero lines. Returns the figure, saved to ``path`` when given.

    Example::

        gain_scatter(pd.read_csv('results/readers/document_utility.csv'), 'gains.png')
    """
    plt = pyplot()
    rows = _first_labels(document_utility)
    wide = rows.pivot_table(index=['qid', 'docno'], columns='reader', values='gain', aggfunc='first')
    label = rows.drop_duplicates(['qid', 'docno']).set_index(['qid', 'docno'])['label']
    pairs = list(combinations(list(dict.fromkeys(rows['reader'])), 2))
    fig, axes = panel_grid(plt, len(pairs), width=4.2, height=4.0, cols=2)
    for ax, (a, b) in zip(axes, pairs):
        pair = wide[[a, b]].dropna()
        judged = label.reindex(pair.index).to_numpy(float)
        values = sorted(set(judged[np.isfinite(judged)]))
        colours = plt.get_cmap('viridis')(np.linspace(0, 0.9, max(len(values), 1)))
        for value, colour in [(np.nan, 'lightgrey'), *zip(values, colours)]:
            where = ~np.isfinite(judged) if np.isnan(value) else judged == value
            if where.any():
                ax.scatter(pair[a][where], pair[b][where], s=16, color=colour,
                           label='unjudged' if np.isnan(value) else f'label {value:g}')
        low, high = float(np.nanmin(pair.to_numpy())), float(np.nanmax(pair.to_numpy()))
        ax.plot([low, high], [low, high], color='black', linewidth=0.8)
        ax.axhline(0, color='grey', linewidth=0.6)
        ax.axvline(0, color='grey', linewidth=0.6)
        ax.set_xlabel(f'gain for {a}')
        ax.set_ylabel(f'gain for {b}')
        ax.legend(loc='upper left', fontsize=8)
    fig.suptitle(f'Each document\'s utility for two readers: P alone - P_0 ({rows["labels"].iloc[0]})')
    return save_figure(fig, path)


def _agreement_html(agreement: pd.DataFrame) -> str:
    """``transfer.csv`` of the first label set as a table: reader pair, statistic, value, interval, n."""
    rows = []
    for r in _first_labels(agreement).itertuples(index=False):
        interval = f'[{cell_number(r.low, 2)}, {cell_number(r.high, 2)}]' if np.isfinite(r.low) else ''
        rows.append([html.escape(str(r.reader_a)), html.escape(str(r.reader_b)),
                     f'<span title="{html.escape(STATISTIC_NAMES.get(r.statistic, r.statistic))}">'
                     f'{html.escape(r.statistic)}</span>', cell_number(r.value), interval,
                     '' if pd.isna(r.n) else f'{int(r.n)}'])
    return html_table(['reader', 'beside', 'statistic', 'value', '95% interval', 'n'], rows, ' class="transfer"')


def _oracles_html(contexts: pd.DataFrame) -> str:
    """The documents each reader's own oracle gave it (``contexts.csv``'s ``Util:<reader>`` rows of that
    reader) at the largest k, a row per query and a column per reader, each docno with its human label,
    folded; '' where the study's contexts hold none."""
    if 'reader' not in contexts.columns:
        return ''
    own = contexts[contexts['system'] == ORACLE_PREFIX + contexts['reader']]
    if own.empty:
        return ''
    k = int(own['k'].max())
    own = own[own['k'] == k].sort_values('position', kind='stable')
    readers = list(dict.fromkeys(own['reader']))
    chosen = {(r, q): ', '.join(f'{d} ({"–" if pd.isna(label) else f"{label:g}"})'
                                for d, label in zip(part['docno'], part['label']))
              for (r, q), part in own.groupby(['reader', 'qid'], sort=False)}
    rows = [[html.escape(q)] + [html.escape(chosen.get((r, q), '')) for r in readers]
            for q in dict.fromkeys(own['qid'])]
    return (f'<details class="oracles"><summary>The documents each reader\'s own oracle chose at k={k} '
            f'({FRAME_FILES["contexts"]}; the human label in brackets, – unjudged)</summary>\n'
            + html_table(['qid'] + [html.escape(ORACLE_PREFIX + r) for r in readers], rows, ' class="transfer"')
            + '</details>')


def transfer_section(folder: Union[str, Path]) -> str:
    """The report's section from the ``transfer`` command's files in ``folder`` ('' when
    ``transfer_table.md`` is absent): how the pool and the oracles were made (``settings.json``), the
    transfer table with its marks, the agreement of the first label set with its intervals, what each
    statistic measures, the documents each reader's own oracle chose (``contexts.csv``), then the two
    figures where they were drawn."""
    folder = Path(folder)
    table = folder / TRANSFER_FILES['table_md']
    if not table.is_file():
        return ''
    settings: Optional[dict] = None
    if (folder / SETTINGS_FILE).is_file():
        settings = json.loads((folder / SETTINGS_FILE).read_text()).get('transfer')
    said = ''
    if settings:
        said = (f'<p class="note">Each reader answered each query with each pool document alone '
                f'({html.escape(settings["pool"])}); its gain is P alone minus P_0. {html.escape(settings["oracle"])}. '
                'Every reader is measured on its own oracle, on the other readers\', on the human one (Rel) and on '
                'the study\'s systems. At k=1 a reader\'s own oracle is its best pool document on the very answers '
                'its gain was measured with: an upper bound, not a finding; transfer shows in another reader\'s '
                'oracle against Rel, and in the own oracle at larger k.</p>')
    parts = [said, markdown_html(table.read_text())]
    agreement_file = folder / TRANSFER_FILES['transfer']
    if agreement_file.is_file():
        agreement = pd.read_csv(agreement_file, dtype={'reader_a': str, 'reader_b': str, 'labels': str})
        if len(agreement):
            parts.append(f'<p class="note">How far the readers\' utility agrees ({TRANSFER_FILES["transfer"]}, '
                         f'{html.escape(str(agreement["labels"].iloc[0]))}; seeded bootstrap 95% intervals):</p>')
            parts.append(_agreement_html(agreement))
            parts.append('<ul class="note">' + ''.join(f'<li>{html.escape(k)}: {html.escape(v)}</li>'
                                                       for k, v in STATISTIC_NAMES.items()) + '</ul>')
    contexts = folder / FRAME_FILES['contexts']
    if contexts.is_file():
        parts.append(_oracles_html(pd.read_csv(contexts, usecols=lambda c: c != 'text',
                                               dtype={'reader': str, 'system': str, 'qid': str, 'docno': str})))
    figures = [figure_html(name, (folder / name).read_bytes())
               for name in (TRANSFER_FILES['agreement_figure'], TRANSFER_FILES['gains_figure'])
               if (folder / name).is_file()]
    if figures:
        parts.append(f'<div class="figures">{"".join(figures)}</div>')
    return '\n'.join(parts)
