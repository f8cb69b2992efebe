"""A study as one self-contained HTML page: the overview (what was studied, Table 1, mean U with
confidence intervals, figures, correlations with U, the attribution of U to the documents, the transfer
across readers and what predicts U where the folder has them, then the settings folded) and a per-query
explorer of every query's contexts, answers and scores (one query inline in Jupyter is
:func:`~pyterrier_utility.report.viewer.query_view`).

The page needs no server and no network: styles and script are inline, figures are PNG data URIs,
and the study's rows are one JSON blob that the script renders a page of rows at a time.
"""
import html
import json
import math
import shlex
from importlib import resources
from pathlib import Path
from typing import Optional, Union

import pandas as pd

from .._messages import count
from ..methods.attribution.summary import attribution_table
from ..schema import REPORT_FILE, SETTINGS_FILE
from ..scoring.correlation import MIN_PAIRS
from ..scoring.utility import gain_name
from ..study import health as answer_health, stats
from ..study.folder import StudyFolder, read_study
from ..vocabulary import MIN_N
from .explorer import report_data
from .markup import cell_number, figure_html, html_table, markdown_html
from .prediction_report import prediction_section
from .redraw import redrawn
from .transfer_report import transfer_section

#: The page's title when none is given: the study folder's name.
TITLE = 'Context utility study: {}'


def _scalar_html(value) -> str:
    """A setting's scalar: None as 'none'; a string with spaces at its ends or unprintable characters
    (a stop sequence such as '\\nQuestion:') quoted with its escapes, so that it can be seen."""
    if value is None:
        return 'none'
    if isinstance(value, str) and (not value or not value.isprintable() or value != value.strip()):
        return f'<code>{html.escape(json.dumps(value))}</code>'
    return html.escape(str(value))


def _setting_html(key: str, value) -> str:
    """A setting's value: a mapping as key–value rows, a list of scalars as one line, the command
    line (``argv``) as the shell would read it, other lists an item a line."""
    if isinstance(value, dict):
        return _settings_html(value) if value else 'none'
    if isinstance(value, list):
        if key == 'argv' and all(isinstance(v, str) for v in value):
            return f'<code>{html.escape(shlex.join(value))}</code>'
        if all(not isinstance(v, (dict, list)) for v in value):
            return ', '.join(_scalar_html(v) for v in value) or 'none'
        return '<br>'.join(_setting_html(key, v) for v in value)
    return _scalar_html(value)


def _settings_html(settings: dict) -> str:
    """Settings as key–value rows, a mapping among them (decoding, backends) as rows of its own."""
    rows = ''.join(f'<tr><th>{html.escape(str(key))}</th><td>{_setting_html(str(key), value)}</td></tr>'
                   for key, value in settings.items())
    return f'<table class="settings"><tbody>{rows}</tbody></table>'


def _decoding_text(decoding: dict) -> str:
    """'temperature 0.3, top-k 50, at most 64 new tokens' from settings.json's ``decoding``."""
    parts = []
    if decoding.get('temperature') is not None:
        parts.append('greedy' if decoding['temperature'] == 0 else f'temperature {decoding["temperature"]:g}')
    for name, shown in (('top_k', 'top-k'), ('top_p', 'top-p')):
        if decoding.get(name) is not None:
            parts.append(f'{shown} {decoding[name]:g}')
    if decoding.get('max_new_tokens') is not None:
        parts.append(f'at most {decoding["max_new_tokens"]} new tokens')
    return ', '.join(parts)


def _summary_html(study: StudyFolder) -> str:
    """What was studied, in one line: datasets, queries, systems, k, label sets, reader, samples, and
    how many answers were cut at max_new_tokens where the engine says."""
    settings, pq = study.settings or {}, study.per_query
    datasets = settings.get('datasets') or (list(dict.fromkeys(pq['dataset'])) if study.named_datasets else [])
    parts = [', '.join(map(str, datasets))] if datasets else []
    parts += [count(len(set(zip(pq['dataset'], pq['qid']))), 'query'),
              'systems ' + ', '.join(dict.fromkeys(pq['system'])),
              'k = ' + ', '.join(f'{k:g}' for k in sorted(set(pq['k']))),
              'P at ' + ', '.join(dict.fromkeys(pq['labels']))]
    if settings.get('readers'):
        decoding = _decoding_text(settings.get('decoding') or {})
        parts.append(f'reader {", ".join(settings["readers"])}' + (f' ({decoding})' if decoding else ''))
    if settings.get('samples') is not None:
        parts.append(count(settings['samples'], 'sample') + ' per prompt')
    elif study.answers is not None:
        parts.append(count(study.answers['sample'].nunique(), 'sample') + ' per prompt')
    cut = stats.truncation(study.answers) if study.answers is not None else None
    if cut:
        parts.append(cut)
    return f'<p class="summary"><strong>Studied:</strong> {html.escape(" · ".join(parts))}</p>'


def _blocks(frame: pd.DataFrame, named_datasets: bool):
    """(title, part) per (dataset,) label set."""
    keys = (['dataset'] if named_datasets else []) + ['labels']
    for key, part in frame.groupby(keys, sort=False):
        yield ', '.join(str(x) for x in (key if isinstance(key, tuple) else (key,))), part


def _ci_html(study: StudyFolder) -> str:
    """Mean U per system (rows) and k (columns) with a 95% bootstrap interval, a table per (dataset,) label set."""
    ci = stats.utility_ci(study.per_query)
    out = []
    for title, part in _blocks(ci, study.named_datasets):
        ks = sorted(part['k'].unique())
        rows, attrs = [], []
        for system, line in part.groupby('system', sort=False):
            by_k = {k: r for k, r in zip(line['k'], line.itertuples())}
            rows.append([html.escape(system)] + [
                f'{cell_number(by_k[k].utility)} <small>[{cell_number(by_k[k].low)}, {cell_number(by_k[k].high)}] '
                f'n={by_k[k].n}</small>' if k in by_k else '' for k in ks])
            attrs.append(f' data-system="{html.escape(system)}"')
        out.append(f'<h3>{html.escape(title)}</h3>'
                   + html_table(['System'] + [f'k={k:g}' for k in ks], rows, ' class="ci"', attrs))
    return '\n'.join(out)


#: The two correlations with U the overview shows side by side: the file, its heading, its cells' name.
CORRELATIONS = (('correlations', 'r(nDCG@k, U)', 'ndcg'),
                ('confidence_correlations', "r(confidence, U): the k-shot answers' mean log-probability", 'confidence'))


def _correlations_html(study: StudyFolder) -> str:
    """r(nDCG@k, U) and r(confidence, U) side by side, a row per (dataset,) label set, system and k,
    a column per method with its p and the number of queries; a missing file leaves a note."""
    keys = (['dataset'] if study.named_datasets else []) + ['labels', 'system', 'k']
    shown = [(name, title, css, getattr(study, name)) for name, title, css in CORRELATIONS]
    notes = [_confidence_note(study) if name == 'confidence_correlations' else f'{name}.csv is not in the study folder.'
             for name, _, _, frame in shown if frame is None]
    shown = [entry for entry in shown if entry[3] is not None]
    if not shown:
        return ''.join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
    sides = []
    for name, title, css, frame in shown:
        methods = list(dict.fromkeys(frame['method']))
        by_method = {key: {m: r for m, r in zip(part['method'], part.itertuples())}
                     for key, part in frame.groupby(keys, sort=False)}
        sides.append((title, css, methods, by_method))
    rows = list(dict.fromkeys(key for _, _, _, cells in sides for key in cells))
    heading = {'dataset': html.escape(study.block)}
    head = ''.join(f'<th rowspan="2">{heading.get(k, k)}</th>' for k in keys) + ''.join(
        f'<th colspan="{len(methods) + 1}" class="{css}">{html.escape(title)}</th>' for title, css, methods, _ in sides)
    sub = ''.join('<th>n</th>' + ''.join(f'<th>{m}</th>' for m in methods) for _, _, methods, _ in sides)
    body = []
    for key in rows:
        shown_key = [f'{v:g}' if isinstance(v, float) else str(v) for v in key]
        cells = [f'<td>{html.escape(v)}</td>' for v in shown_key]
        for _, css, methods, by_key in sides:
            by = by_key.get(key, {})
            n = max((r.n for r in by.values() if math.isfinite(r.n)), default=None)
            cells.append(f'<td data-of="{css} n">{"" if n is None else f"{n:g}"}</td>')
            cells += [f'<td data-of="{css} {m}">' + (_correlation_cell(by[m]) if m in by else '') + '</td>'
                      for m in methods]
        body.append(f'<tr data-cell="{html.escape("|".join(shown_key))}">{"".join(cells)}</tr>')
    return (''.join(f'<p class="note">{html.escape(n)}</p>' for n in notes)
            + f'<table class="correlations"><thead><tr>{head}</tr><tr>{sub}</tr></thead>'
              f'<tbody>{"".join(body)}</tbody></table>')


def _correlation_cell(row) -> str:
    """r and its p, or why r is undefined: too few queries with both values, or one side constant."""
    if math.isfinite(row.r):
        return f'{cell_number(row.r)} <small>(p {cell_number(row.p)})</small>'
    why = f'n &lt; {MIN_PAIRS}' if not row.n >= MIN_PAIRS else 'a side constant'
    return f'<small class="undefined">– ({why})</small>'


def _confidence_note(study: StudyFolder) -> str:
    """Why the confidence correlations are not shown."""
    answers = study.answers
    if answers is not None and ('mean_logprob' not in answers.columns or answers['mean_logprob'].isna().all()):
        return 'No confidence correlations: the answers carry no log-probabilities (the engine did not give them).'
    return 'confidence_correlations.csv is not in the study folder.'


def _health_html(study: StudyFolder) -> str:
    """health.csv as a table: a row per (dataset,) system and k, the 0-shot answers first, each share
    as a percentage; the rows past the bars of Table 1's mark
    (:data:`~pyterrier_utility.study.health.UNHEALTHY`) marked."""
    health = study.health
    if health is None:
        return '<p class="note">health.csv is not in the study folder.</p>'
    bad = set(answer_health.unhealthy(health).index)
    keys = ['dataset'] if study.named_datasets else []

    def share(value):
        return '–' if not math.isfinite(value) else f'{value:.0%}'
    rows, attrs = [], []
    for i, r in health.iterrows():
        mark = answer_health.HEALTH_MARK if i in bad else ''
        rows.append([html.escape(str(r[k])) for k in keys] + [
            html.escape(str(r['system'])) + mark, f'{r["k"]:g}', f'{r["answers"]:g}', share(r['empty']),
            share(r['cut']), share(r['copied']), cell_number(r['mean_tokens'], 1)])
        attrs.append(' class="unhealthy"' if mark else '')
    legend = (f'Empty: nothing but white space; cut: stopped at max_new_tokens; copied: at least '
              f'{answer_health.COPIED_SHARE:.0%} of its words in runs of {answer_health.COPY_RUN}+ words found '
              f'verbatim in one of its documents. {answer_health.health_legend()}.')
    return (f'<p class="summary">{html.escape(answer_health.summary(health))}</p>'
            + html_table([html.escape(study.block)] * len(keys) + ['System', 'k', 'answers', 'empty', 'cut', 'copied',
                                                                 'mean tokens'], rows, ' class="health"', attrs)
            + f'<p class="note">{html.escape(legend)}</p>')


def _attribution_html(study: StudyFolder) -> str:
    """attribution.csv summed up (:func:`~pyterrier_utility.methods.attribution.summary.attribution_table`):
    per label set, system and k, the mean share of U at each position, the mean phi of the relevant
    and the other documents, and the share of documents with negative phi."""
    assert study.attribution is not None
    table = attribution_table(study.attribution.drop(columns='dataset'))
    values = [c for c in table.columns if c.startswith(('pos ', 'phi '))]
    keys = [c for c in table.columns if c not in values and c != 'negative']  # method too, where there are several
    rows = [[html.escape(str(r[c])) for c in keys] + [cell_number(r[c]) for c in values]
            + [f'{r["negative"]:.0%}'] for _, r in table.iterrows()]
    method = ', '.join(sorted(set(study.attribution['method'])))
    return (f'<p class="note">Each document\'s share of U ({html.escape(method)}; attribution.csv): phi_utility by '
            'context position (Context 1 first), the mean phi of the relevant documents and of the others, and the '
            'share of documents whose phi is negative (they lowered the answer quality).</p>'
            + html_table(keys + values + ['negative phi'], rows, ' class="attribution"'))


def _verdict_html(study: StudyFolder) -> str:
    """The study's verdict, first on the page and in colour: whether its positive control held (Rel's
    mean U above NRel's at every k and label set of Table 1,
    :func:`~pyterrier_utility.study.health.positive_control`, with the study's correction and ``min_n``), and
    the answer health in one line (:func:`~pyterrier_utility.study.health.summary`)."""
    settings = study.settings or {}
    ks = settings.get('ks')
    per_query = study.per_query if study.named_datasets else study.per_query.drop(columns='dataset')
    per_query = per_query[per_query['k'].isin(ks)] if ks else per_query
    min_n = settings.get('min_n', MIN_N)
    table = stats.table1(per_query, correction=settings.get('correction'), min_n=min_n)
    control = answer_health.positive_control(table, min_n=min_n)
    if control.empty:
        verdict, state = 'No positive control: the study has not both oracles, Rel and NRel.', 'none'
    else:
        verdict, state = answer_health.control_notes(control)[0], 'held' if control['holds'].all() else 'failed'
    if study.health is None:
        health, health_state = 'Answer health unknown: health.csv is not in the study folder.', 'none'
    else:
        health = answer_health.summary(study.health).split('\n')[0]
        health_state = 'held' if answer_health.unhealthy(study.health).empty else 'failed'
    return (f'<div class="verdict" id="verdict"><p class="control {state}">{html.escape(verdict)}</p>'
            f'<p class="answer-health {health_state}">{html.escape(health)}</p></div>')


def _overview_html(study: StudyFolder) -> str:
    """The overview: what was studied, Table 1, mean U with intervals, the figures, the correlations,
    then the settings folded; an absent file leaves a note in place of its section."""
    def missing(name):
        return f'<p class="note">{html.escape(name)} is not in the study folder.</p>'

    def section(title, body, anchor):
        return f'<h2 id="{anchor}">{title}</h2>\n{body}'
    figures = ''.join(figure_html(name, png) for name, png in study.figures.items())
    utility = gain_name(study.gain)
    settings = (_settings_html(study.settings) if study.settings is not None else missing(SETTINGS_FILE))
    predicted = prediction_section(study.path)
    across = transfer_section(study.path)
    return '\n'.join([
        _verdict_html(study),
        _summary_html(study),
        section(f'Table 1: mean context {utility} U per system and k',
                markdown_html(study.table1) if study.table1 is not None else missing('table1_paper.md'), 'table1'),
        section('Answer health', _health_html(study), 'health'),
        section(f'Mean {utility} with a 95% bootstrap interval over queries', _ci_html(study), 'intervals'),
        section('Figures', f'<div class="figures">{figures}</div>' if figures else missing('fig*.png'), 'figures'),
        section('Correlation with U across queries', _correlations_html(study), 'correlations'),
        *([section('Which document carried the utility', _attribution_html(study), 'attribution')]
          if study.attribution is not None else []),
        *([section('Across readers: whose utility is it?', across, 'readers')] if across else []),
        *([section('What predicts utility', predicted, 'prediction')] if predicted else []),
        f'<details id="settings"><summary>Settings of the run (settings.json)</summary>\n{settings}</details>',
    ])


def _asset(name: str) -> str:
    return (resources.files(__package__) / 'assets' / name).read_text(encoding='utf8')


def report_title(study: StudyFolder, title: Optional[str] = None) -> str:
    """The page's title: ``title``, else the run's title setting, else 'Context utility study: ' and
    the folder's name.

    Args:
        study: the study shown.
        title: a title given by the caller (the study's final folder when it is written elsewhere first).

    Example::

        report_title(read_study('results/study'))  # 'Context utility study: study'
    """
    return title or (study.settings or {}).get('title') or TITLE.format(study.path.resolve().name)


def report_html(study: StudyFolder, title: Optional[str] = None) -> str:
    """The page of a study folder as one HTML string; see :func:`write_report`."""
    blob = json.dumps(report_data(study), separators=(',', ':'), allow_nan=False, ensure_ascii=False)
    # '<' escaped keeps '</script>' or '<!--' in an answer from ending the script element.
    blob = blob.replace('<', '\\u003c')
    title = html.escape(report_title(study, title))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f'<link rel="icon" href="data:,"><title>{title}</title><style>{_asset("report.css")}</style></head>\n'
            f'<body><header><h1>{title}</h1><nav><a href="#table1">Table 1</a> <a href="#health">Answer health</a> '
            f'<a href="#correlations">'
            f'Correlations</a> <a href="#settings">Settings</a> <a href="#explorer">Queries</a></nav></header>\n'
            f'<section id="overview">{_overview_html(study)}</section>\n'
            f'<section id="explorer"><h2>Queries</h2><noscript>The query explorer needs JavaScript.</noscript>'
            f'</section>\n<section id="query" hidden></section>\n'
            f'<script type="application/json" id="study-data">{blob}</script>\n'
            f'<script>{_asset("report.js")}</script>\n</body></html>\n')


def write_report(folder: Union[str, Path], path: Optional[Union[str, Path]] = None,
                 title: Optional[str] = None, gain: Optional[str] = None) -> Path:
    """Writes the study in ``folder`` as one self-contained HTML page, which opens offline.

    The overview shows, in this order, what was studied in one line (datasets, queries, systems, k,
    label sets, reader, samples, answers cut at max_new_tokens), Table 1 (table1_paper.md), the answer
    health (health.csv: the shares empty, cut and copied per system and k, unhealthy cells marked), mean U
    per system and k with a 95% bootstrap interval over queries (seeded, 1000 resamples), the
    figures, r(nDCG@k, U) (correlations.csv) beside r(confidence, U) (confidence_correlations.csv),
    which document carried the utility (attribution.csv of the attribute command, when present),
    across readers (the transfer command's files, when present: :mod:`.transfer_report`), what predicts
    utility (the predict command's, when present), then settings.json folded. The explorer lists
    per_query.csv (sortable, filtered by dataset, label set, system and k, searched by query text) and
    opens a query's contexts (contexts.csv),
    answers (answers.csv: with their mean log-probability, and marked where cut at max_new_tokens,
    when the engine said) and their P, headed by its quality's name (scores.csv), beside the same query
    under another system or k. An optional file that is absent leaves its part out, with a note.

    Args:
        folder: a study folder; it must hold per_query.csv.
        path: where to write; ``folder/report.html`` by default.
        title: the page's title (default: :func:`report_title`: the settings' ``title``, or the
            folder's name); a study written into a staging folder passes its final folder's name.
        gain: U as ``'relative'`` or ``'absolute'`` gain (default: the study's own); another than the
            study's redraws its Table 1, correlations and figures (:func:`~.redraw.redrawn`).

    Example::

        from pyterrier_utility.report import write_report
        print(write_report('results/study'))  # results/study/report.html
    """
    study = read_study(folder)
    study = study if gain is None else redrawn(study, gain)
    path = Path(path) if path is not None else Path(folder) / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(report_html(study, title), encoding='utf8')
    return path
