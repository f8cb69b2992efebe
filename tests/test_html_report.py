import html
import io
import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from support.synthetic_study import SYSTEMS, write_study

from pyterrier_utility.errors import FrameError, SettingError
from pyterrier_utility.report.html import markdown_html, write_report
from pyterrier_utility.report.viewer import query_view
from pyterrier_utility.study import stats

PER_QUERY = pd.DataFrame({
    'labels': ['label>=2'] * 4, 'system': ['A', 'A', 'A-r', 'A-r'], 'k': [2, 2, 2, 2], 'qid': ['q1', 'q2', 'q1', 'q2'],
    'n_docs': [2, 1, 2, 1], 'ndcg': [0.9, 0.25, 0.6131471927654584, 0.25],
    'quality_0shot': [0.5, 0.0, 0.5, 0.0], 'quality': [0.6, 0.3, 0.55, 0.3], 'utility': [0.2, np.nan, 0.1, np.nan]})
ANSWERS = pd.DataFrame({
    'system': ['0-shot'] * 4 + ['A'] * 4 + ['A-r'] * 4, 'k': [0] * 4 + [2] * 8, 'qid': ['q1', 'q1', 'q2', 'q2'] * 3,
    'sample': [0, 1] * 6,
    'qanswer': ['lift is force', 'no idea', '', 'heat </script><!-- x', 'upward force', 'lift', 'nose heats',
                'friction', 'force up', 'lift', 'nose heats', 'friction']})
SCORES = ANSWERS[['system', 'k', 'qid', 'sample']].assign(
    quality=[0.4, 0.6, 0.0, 0.0, 0.7, 0.5, 0.3, 0.3, 0.6, 0.5, 0.3, 0.3],
    best_docno=['d1', 'd1', 'd4', 'd4', 'd1', 'd1', 'd4', 'd4', 'd1', 'd1', 'd4', 'd4'])
SCORES.insert(0, 'labels', 'label>=2')
CONTEXTS = pd.DataFrame({
    'system': ['A', 'A', 'A', 'A-r', 'A-r', 'A-r'], 'k': [2] * 6, 'qid': ['q1', 'q1', 'q2', 'q1', 'q1', 'q2'],
    'position': [1, 2, 1, 1, 2, 1], 'docno': ['d1', 'd9', 'd5', 'd9', 'd1', 'd5'],
    'label': [2, np.nan, 1, np.nan, 2, 1],
    'text': ['Lift is the upward force.', 'Unjudged, with "quotes" & <b>tags</b>.', 'Heat rises.',
             'Unjudged, with "quotes" & <b>tags</b>.', 'Lift is the upward force.', 'Heat rises.']})
QUERIES = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['what is lift', 'why does the nose heat up']})
# What an engine said of each answer: the 0-shot ones of q2 from an older run that recorded nothing.
SAID = ANSWERS.assign(logprob=[-3.0, -8.0, np.nan, np.nan, -1.5, -2.0, -4.5, -9.0, -2.5, -1.0, -6.0, -7.5],
                      mean_logprob=[-1.0, -2.0, np.nan, np.nan, -0.5, -1.0, -1.5, -3.0, -0.625, -0.5, -2.0, -2.5],
                      truncated=[False, True, None, None, False, False, True, False, False, False, True, True])


def small_study(folder: Path, **frames) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    defaults = dict(per_query=PER_QUERY, answers=ANSWERS, scores=SCORES, contexts=CONTEXTS, queries=QUERIES)
    for name, frame in dict(defaults, **frames).items():
        if frame is not None:
            frame.to_csv(folder / f'{name}.csv', index=False)
    return folder


def embedded(path: Path) -> dict:
    page = path.read_text()
    return json.loads(re.search(r'<script type="application/json" id="study-data">(.*?)</script>', page, re.S).group(1))


def test_utility_ci_matches_scipy_bootstrap():
    rng = np.random.default_rng(3)
    u = rng.normal(size=40)
    per_query = pd.DataFrame({'labels': 'label>=2', 'system': ['A'] * 40 + ['B'] * 40, 'k': 1,
                              'qid': [str(i) for i in range(40)] * 2, 'utility': np.r_[u, u[:30], [np.nan] * 10]})
    ci = stats.utility_ci(per_query, seed=7)
    for system, values in (('A', u), ('B', u[:30])):
        expected = sps.bootstrap((values,), np.mean, n_resamples=1000, method='percentile',
                                 rng=np.random.default_rng(7)).confidence_interval
        row = ci[ci['system'] == system].iloc[0]
        assert (row['n'], row['utility']) == (len(values), pytest.approx(values.mean()))
        assert (row['low'], row['high']) == (pytest.approx(expected.low, abs=1e-12),
                                             pytest.approx(expected.high, abs=1e-12))
    with pytest.raises(SettingError, match='level'):
        stats.utility_ci(per_query, level=95)


def test_markdown_html_renders_the_paper_table():
    text = 'Mean utility; † differs\n\n| Dataset | System | k=1 |\n|---|---|---:|\n| a&b | BM25 | 0.1† |\n'
    assert markdown_html(text) == (
        '<p>Mean utility; † differs</p>\n<table class="table1"><thead><tr><th>Dataset</th><th>System</th><th>k=1</th>'
        '</tr></thead><tbody><tr><td><span class="left">a&amp;b</span></td><td><span class="left">BM25</span></td>'
        '<td><span class="right">0.1†</span></td></tr></tbody></table>')


def test_report_embeds_the_csv_values_unchanged(tmp_path):
    folder = small_study(tmp_path / 'study')
    path = write_report(folder)
    assert path == folder / 'report.html'
    data = embedded(path)
    rows = pd.DataFrame(data['rows'])
    decoded = pd.DataFrame({
        'labels': [data['labels'][i] for i in rows['labels']], 'system': [data['systems'][i] for i in rows['system']],
        'k': rows['k'], 'qid': [data['queries']['qid'][i] for i in rows['qid']], 'n_docs': rows['n_docs'],
        **{c: rows[c].astype(float) for c in ('ndcg', 'quality_0shot', 'quality', 'utility')}})
    pd.testing.assert_frame_equal(decoded, pd.read_csv(folder / 'per_query.csv', dtype={'qid': str}))
    assert data['queries']['text'] == ['what is lift', 'why does the nose heat up']

    def cell(qid, system, k):
        return f'{data["queries"]["qid"].index(qid)}|{data["systems"].index(system)}|{k}'
    for (system, k, qid), group in ANSWERS.groupby(['system', 'k', 'qid']):
        shown = data['answers'][cell(qid, system, k)]
        assert [(s, data['answer_texts'][a], logprob, cut) for s, a, logprob, cut in shown] \
            == [(s, a, None, None) for s, a in zip(group['sample'], group['qanswer'])]
    for (system, k, qid), group in CONTEXTS.groupby(['system', 'k', 'qid']):
        shown = [(data['docs']['docno'][d], data['docs']['text'][d], label)
                 for d, label in data['contexts'][cell(qid, system, k)]]
        assert shown == [(d, t, None if math.isnan(lab) else lab) for d, t, lab in
                         zip(group['docno'], group['text'], group['label'])]
    for (system, k, qid), group in SCORES.groupby(['system', 'k', 'qid']):
        key = cell(qid, system, k).replace('|', '|0|', 1)
        assert data['scores'][key] == [list(x) for x in zip(group['sample'], group['quality'], group['best_docno'])]
    # An answer holding '</script>' and '<!--' stays inside the data.
    assert path.read_text().count('</script>') == 2


def test_a_folder_with_the_former_names_of_p_is_read_and_reported_as_one_with_the_current(tmp_path):
    """A study written when P's columns were fbert and fbert_0shot reads back with them renamed."""
    from pyterrier_utility.study.folder import read_study
    current = write_study(tmp_path / 'current', queries=3, figures=False)
    former = Path(shutil.copytree(current, tmp_path / 'former'))
    for name in ('per_query.csv', 'scores.csv'):
        frame = pd.read_csv(current / name, dtype=str, keep_default_na=False)
        assert {'quality'} <= set(frame.columns)
        frame.rename(columns={'quality': 'fbert', 'quality_0shot': 'fbert_0shot'}).to_csv(former / name, index=False)
    assert 'fbert' in (former / 'scores.csv').read_text().splitlines()[0]
    now, then = read_study(current), read_study(former)
    for frame in ('per_query', 'scores'):
        pd.testing.assert_frame_equal(getattr(then, frame), getattr(now, frame))
    assert embedded(write_report(former))['rows'] == embedded(write_report(current))['rows']


def test_report_embeds_what_the_engine_said_of_each_answer(tmp_path):
    folder = small_study(tmp_path / 'study', answers=SAID)
    data = embedded(write_report(folder))
    saved = pd.read_csv(folder / 'answers.csv', dtype={'qid': str}).fillna({'qanswer': ''})
    shown = [(data['systems'][int(system)], int(k), data['queries']['qid'][int(q)], *answer[:1],
              data['answer_texts'][answer[1]], *answer[2:])
             for key, answers in data['answers'].items() for q, system, k in [key.split('|')] for answer in answers]
    expected = [(system, k, qid, sample, text, None if math.isnan(mean) else mean, None if cut != cut else cut)
                for system, k, qid, sample, text, mean, cut in saved[[
                    'system', 'k', 'qid', 'sample', 'qanswer', 'mean_logprob', 'truncated']].itertuples(index=False)]
    assert sorted(shown, key=str) == sorted(expected, key=str)
    assert [x[-1] for x in shown].count(True) == 4 and [x[-2] for x in shown].count(None) == 2


def test_report_overview_one_row_per_system_and_notes_for_missing_files(tmp_path):
    folder = small_study(tmp_path / 'study', answers=None, scores=None, contexts=None, queries=None)
    page = write_report(folder, tmp_path / 'out' / 'page.html').read_text()
    ci = re.findall(r'<tr data-system="([^"]+)"><td>[^<]+</td><td>([-\d.]+) <small>\[([-\d.]+), ([-\d.]+)\] n=(\d+)',
                    page)
    assert ci == [('A', '0.200', '0.200', '0.200', '1'), ('A-r', '0.100', '0.100', '0.100', '1')]
    for name in ('settings.json', 'table1_paper.md', 'correlations.csv', 'fig*.png'):
        assert f'{name} is not in the study folder.' in page
    data = embedded(tmp_path / 'out' / 'page.html')
    assert not {'answers', 'contexts', 'scores'} & set(data)
    assert 'src="http' not in page and '<link rel="stylesheet"' not in page and '<script src' not in page


def test_report_opens_on_what_was_studied_and_table_1_and_folds_the_settings(tmp_path):
    folder = write_study(tmp_path / 'study', queries=6, samples=2)
    page = write_report(folder).read_text()
    settings = json.loads((folder / 'settings.json').read_text())
    answers = pd.read_csv(folder / 'answers.csv')
    cut = int(answers['truncated'].sum())
    assert 0 < cut < len(answers)
    assert re.search(r'<p class="summary">(.*?)</p>', page).group(1) == (
        '<strong>Studied:</strong> cranfield · 6 queries · systems BM25, BM25-r, Neural, Neural-r, Rel, NRel · '
        'k = 1, 3, 5 · P at label&gt;=2, label in {2,3} · reader gemma3-270m (temperature 0.3, top-k 50, at most '
        f'{settings["decoding"]["max_new_tokens"]} new tokens) · 2 samples per prompt · '
        f'{len(answers)} answers, {cut} ({cut / len(answers):.0%}) cut at max_new_tokens')
    overview = page[page.index('<section id="overview">'):page.index('<section id="explorer">')]
    marks = ('<p class="summary">', '<h2 id="table1">', '<h2 id="intervals">', '<h2 id="figures">',
             '<h2 id="correlations">', '<details id="settings">')
    starts = [overview.index(mark) for mark in marks]
    assert starts == sorted(starts)
    folded = overview[overview.index('<details id="settings">'):]
    # Every setting is a row; a mapping is rows of its own, the command line a shell line, never raw JSON.
    assert re.findall(r'<tr><th>([^<]+)</th>', folded)[:3] == ['datasets', 'queries', 'ks']
    def rows(value):
        return sum(1 + rows(v) for v in value.values()) if isinstance(value, dict) else 0
    assert len(re.findall(r'<tr><th>', folded)) == rows(settings) == len(settings) + 2 * len(settings['decoding']) + 5
    assert ('<tr><th>decoding</th><td><table class="settings"><tbody><tr><th>temperature</th><td>0.3</td></tr>'
            '<tr><th>top_k</th><td>50</td></tr><tr><th>top_p</th><td>none</td></tr>') in folded
    assert '<tr><th>stop</th><td>STOP, <code>&quot;\\n&quot;</code></td>' in folded  # the offline one-line stop
    assert f'<tr><th>argv</th><td><code>study --queries 6 --out {folder}</code></td></tr>' in folded
    assert '{&quot;' not in folded and '[' not in re.sub(r'<[^>]+>', '', folded)


def test_report_shows_the_confidence_correlations_beside_the_ndcg_ones(tmp_path):
    folder = write_study(tmp_path / 'study', queries=6, samples=2, figures=False)
    page = write_report(folder).read_text()
    shown = {(key, of): cell for key, row in re.findall(r'<tr data-cell="([^"]+)">(.*?)</tr>', page)
             for of, cell in re.findall(r'<td data-of="([^"]+)">(.*?)</td>', row)}
    for name, side in (('correlations', 'ndcg'), ('confidence_correlations', 'confidence')):
        csv = pd.read_csv(folder / f'{name}.csv')
        assert set(csv['method']) == {'pearson', 'spearman'}
        for row in csv.itertuples():
            key = html.escape(f'{row.labels}|{row.system}|{row.k}')
            why = 'n &lt; 3' if row.n < 3 else 'a side constant'
            assert shown[key, f'{side} {row.method}'] == (f'{row.r:.3f} <small>(p {row.p:.3f})</small>'
                                                          if math.isfinite(row.r) else
                                                          f'<small class="undefined">– ({why})</small>')
            assert shown[key, f'{side} n'] == str(row.n)
    assert len(shown) == 2 * 3 * len(pd.read_csv(folder / 'correlations.csv')) // 2
    assert 'r(nDCG@k, U)</th><th colspan="3" class="confidence">r(confidence, U)' in page


def test_report_title_is_a_setting_or_the_folder_name(tmp_path):
    folder = small_study(tmp_path / 'my-study')
    assert '<title>Context utility study: my-study</title>' in write_report(folder).read_text()
    (folder / 'settings.json').write_text(json.dumps({'title': 'Lift & drag'}))
    assert '<title>Lift &amp; drag</title><' in write_report(folder).read_text()
    assert '<h1>Given</h1>' in write_report(folder, title='Given').read_text()


def test_report_errors_name_the_file_row_and_column(tmp_path):
    with pytest.raises(SettingError, match=re.escape(f"{tmp_path / 'none'} does not exist: give a study folder")):
        write_report(tmp_path / 'none')
    folder = small_study(tmp_path / 'a', contexts=CONTEXTS.drop(columns=['position']))
    with pytest.raises(FrameError, match=r"contexts\.csv: no column 'position'"):
        write_report(folder)
    folder = small_study(tmp_path / 'b', per_query=PER_QUERY.assign(ndcg=['0.9', 'high', '0.6', '0.25']))
    # per_query.csv has one reader (validate.read_per_query), whose messages name the line and value so.
    with pytest.raises(FrameError, match=r"per_query\.csv, line 3, column ndcg: is not a number \('high'\)"):
        write_report(folder)
    folder = small_study(tmp_path / 'c', answers=ANSWERS.assign(dataset='x'))
    with pytest.raises(FrameError, match=r"answers\.csv: a column 'dataset', unlike per_query\.csv"):
        write_report(folder)
    folder = small_study(tmp_path / 'd', answers=SAID.assign(truncated=[True] * 11 + ['maybe']))
    with pytest.raises(FrameError,
                       match=r"answers\.csv row 13, column 'truncated': 'maybe' is not True, False or empty"):
        write_report(folder)
    folder = small_study(tmp_path / 'e', answers=SAID.assign(mean_logprob=['-1'] * 11 + ['low']))
    with pytest.raises(FrameError, match=r"answers\.csv row 13, column 'mean_logprob': 'low' is not a number"):
        write_report(folder)


def test_query_view_shows_contexts_in_order_and_scored_answers(tmp_path):
    folder = small_study(tmp_path / 'study')
    frames = dict(per_query=PER_QUERY, answers=ANSWERS, scores=SCORES, contexts=CONTEXTS, queries=QUERIES)
    for source in (folder, frames):
        page = query_view(source, 'q1', system='A-r')._repr_html_()
        assert '<h3>Query q1: what is lift</h3>' in page
        assert page.index('<td>1</td><td>d9</td><td>unjudged</td>') < page.index('<td>2</td><td>d1</td><td>2</td>')
        assert '&lt;b&gt;tags&lt;/b&gt;' in page and '<b>tags' not in page
        assert '<td>0</td><td>lift is force</td><td>0.400</td><td>d1</td>' in page  # 0-shot
        assert '<td>0</td><td>force up</td><td>0.600</td><td>d1</td>' in page
        assert 'A-r, k=2: nDCG@k 0.613, P_k 0.550, U 0.100' in page and 'A, k=2' not in page
    said = query_view(dict(frames, answers=SAID), 'q1', system='A')._repr_html_()
    assert '<th>mean log-prob</th>' in said
    assert ('<td>1</td><td>no idea <span class="cut" title="generation stopped at max_new_tokens">cut</span></td>'
            '<td>0.600</td><td>d1</td><td>-2.000</td>') in said
    assert '<td>0</td><td>upward force</td><td>0.700</td><td>d1</td><td>-0.500</td>' in said
    assert said.count('class="cut"') == 1  # of q1's answers under 0-shot and A, only 'no idea' was cut
    assert repr(query_view(frames, 'q2')) == 'QueryView(qid=\'q2\', label>=2; A k=2: U=nan, A-r k=2: U=nan)'
    with pytest.raises(SettingError, match="no per_query row for qid 'q3'"):
        query_view(folder, 'q3')
    with pytest.raises(FrameError, match="answers: no column 'qanswer'"):
        query_view(dict(frames, answers=ANSWERS.drop(columns=['qanswer'])), 'q1')


def screenshot_variance(png: bytes) -> float:
    from PIL import Image
    return float(np.asarray(Image.open(io.BytesIO(png)).convert('L'), float).var())


def test_report_in_a_browser(tmp_path, browser):
    folder = write_study(tmp_path / 'study', queries=12, samples=5)
    path = write_report(folder)
    seconds = browser.load(path)
    # The explorer's init() ran to its end (it stamps the milliseconds since navigation), before the load event.
    assert 0 < float(browser.evaluate('document.body.dataset.ready')) <= seconds * 1000
    assert browser.evaluate('document.title') == 'Context utility study: study'
    # The first screen (1400 x 1000) shows what was studied and the whole of Table 1.
    assert browser.evaluate('[innerWidth, innerHeight, scrollY]') == [1400, 1000, 0]
    table1 = browser.evaluate(
        'JSON.parse(JSON.stringify(document.querySelector("table.table1").getBoundingClientRect()))')
    assert 0 < table1['top'] and table1['bottom'] < 1000 and table1['right'] <= 1400
    assert browser.evaluate('document.querySelector("table.table1 tbody").rows.length') == len(SYSTEMS)
    assert browser.evaluate('document.querySelector("p.summary").getBoundingClientRect().bottom') < table1['top']
    assert browser.evaluate('document.getElementById("settings").open') is False
    png = browser.screenshot()
    assert screenshot_variance(png) > 100
    for table in browser.evaluate('[...document.querySelectorAll("table.ci")].map(t => [...t.querySelectorAll('
                                  '"tbody tr")].map(r => r.dataset.system))'):
        assert table == list(SYSTEMS)
    assert browser.evaluate('document.getElementById("count").textContent') == 'rows 1–50 of 432'
    browser.evaluate('for (const [id, v] of [["filter-system", "BM25"], ["filter-k", "3"]]) {'
                     'const s = document.getElementById(id); s.value = v; s.dispatchEvent(new Event("change")); }')
    assert browser.evaluate('document.getElementById("count").textContent') == 'rows 1–24 of 24'
    shown = browser.evaluate('[...document.querySelectorAll("#rows tbody tr")]'
                             '.map(r => [...r.cells].map(c => c.textContent))')
    per_query = pd.read_csv(folder / 'per_query.csv')
    expected = per_query[(per_query['system'] == 'BM25') & (per_query['k'] == 3)]
    assert [(r[0], r[1], r[2]) for r in shown] == [(s, 'BM25', '3') for s in expected['labels']]
    assert [r[7] for r in shown] == [f'{v:.3f}' for v in expected['quality']]

    browser.evaluate('document.querySelector("#rows tbody tr").click()')
    contexts = pd.read_csv(folder / 'contexts.csv', dtype={'qid': str})
    first = contexts[(contexts['system'] == 'BM25') & (contexts['k'] == 3) & (contexts['qid'] == 'q0')]
    shown = browser.evaluate('[...document.querySelectorAll(".pane li.context")]'
                             '.map(c => [c.dataset.docno, c.dataset.label])')
    assert shown == [[d, '' if math.isnan(lab) else f'{lab:g}'] for d, lab in zip(first['docno'], first['label'])]
    assert len(shown) == 3
    answers = pd.read_csv(folder / 'answers.csv', dtype={'qid': str})
    kshot = answers[(answers['system'] == 'BM25') & (answers['k'] == 3) & (answers['qid'] == 'q0')]['qanswer']
    assert browser.evaluate(
        '[...document.querySelectorAll(".pane tr.answer td.kshot .answer-text")].map(c => c.textContent)') \
        == list(kshot)
    assert browser.evaluate('document.querySelector(".question").textContent') \
        == pd.read_csv(folder / 'queries.csv')['query'][0]

    # A query with cut answers: each answer's mean log-probability, and a mark on those cut.
    cut = answers[answers['truncated'] & (answers['system'] == 'BM25') & (answers['k'] == 3)]
    qid = cut['qid'].iloc[0]
    browser.evaluate(
        f'[...document.querySelectorAll("#rows tbody tr")].find(r => r.cells[3].textContent === "{qid}").click()')
    for side, system, k in (('zero', '0-shot', 0), ('kshot', 'BM25', 3)):
        cell = answers[(answers['system'] == system) & (answers['k'] == k) & (answers['qid'] == qid)]
        assert browser.evaluate(
            f'[...document.querySelectorAll(".pane td.{side}-logprob")].map(c => c.textContent)') == \
            [f'{v:.3f}' for v in cell['mean_logprob']]
        assert browser.evaluate(
            f'[...document.querySelectorAll(".pane td.{side}")].map(c => c.classList.contains("truncated") '
            f'&& c.querySelector(".cut").textContent === "cut")') == cell['truncated'].tolist()
    assert browser.evaluate('document.querySelectorAll(".pane .cut").length') >= 1

    browser.evaluate('const c = document.getElementById("compare"); c.value = [...c.options].find('
                     'o => o.textContent === "Rel, k=3").value; c.dispatchEvent(new Event("change"));')
    assert browser.evaluate('[...document.querySelectorAll(".pane")]'
                            '.map(p => p.dataset.system + " " + p.dataset.k)') == ['BM25 3', 'Rel 3']
    browser.evaluate('document.getElementById("query").scrollIntoView()')
    assert screenshot_variance(browser.screenshot()) > 100

    browser.evaluate('const s = document.getElementById("search"); s.value = "Q11"; '
                     's.dispatchEvent(new Event("input"));')
    assert browser.evaluate('document.getElementById("count").textContent') == 'rows 1–2 of 2'
    browser.evaluate('document.getElementById("filter-system").value = ""; document.getElementById("filter-system")'
                     '.dispatchEvent(new Event("change")); document.querySelector("th[data-column=utility]").click();')
    u = [float(v) for v in browser.evaluate('[...document.querySelectorAll("#rows tbody tr td:last-child")]'
                                            '.map(c => c.textContent)')]
    assert u == sorted(u) and len(u) == 12
    assert browser.errors == []


def test_a_ten_times_larger_report_loads(tmp_path, browser):
    folder = write_study(tmp_path / 'study', queries=100, samples=5, figures=False)
    path = write_report(folder)
    seconds = browser.load(path)
    assert browser.evaluate('document.getElementById("count").textContent') == 'rows 1–50 of 3600'
    browser.evaluate('document.querySelectorAll("#rows tbody tr")[49].click()')
    assert browser.evaluate('document.querySelectorAll(".pane li.context").length') >= 1
    assert browser.errors == []
    assert seconds < 30
    print(f'{path.stat().st_size / 1e6:.2f} MB, loaded in {seconds:.2f} s')
    shutil.rmtree(folder)


def test_report_of_several_datasets_keeps_their_queries_apart(tmp_path):
    def two(frame):
        return pd.concat([frame.assign(dataset=d)[['dataset', *frame.columns]] for d in ('dl19', 'dl20')],
                         ignore_index=True)
    frames = {name: two(frame) for name, frame in
              dict(per_query=PER_QUERY, answers=ANSWERS, scores=SCORES, contexts=CONTEXTS, queries=QUERIES).items()}
    frames['queries'].loc[frames['queries']['dataset'] == 'dl20', 'query'] += ' (dl20)'
    data = embedded(write_report(small_study(tmp_path / 'study', **frames)))
    assert data['named_datasets'] and data['datasets'] == ['dl19', 'dl20']
    assert list(zip(data['queries']['dataset'], data['queries']['qid'], data['queries']['text'])) == [
        (0, 'q1', 'what is lift'), (0, 'q2', 'why does the nose heat up'),
        (1, 'q1', 'what is lift (dl20)'), (1, 'q2', 'why does the nose heat up (dl20)')]
    assert [data['queries']['dataset'][q] for q in data['rows']['qid']] == data['rows']['dataset']
    assert len(data['answers']) == 2 * len(ANSWERS.groupby(['system', 'k', 'qid']))


def test_an_answer_without_a_visible_character_is_marked_empty_in_a_browser(tmp_path, browser):
    # Sample 0 of A's answers to q1 is a NUL, sample 1 an ESC and a space; the 0-shot q2 sample 0 is ''.
    answers = ANSWERS.assign(qanswer=ANSWERS['qanswer'].where(~((ANSWERS['system'] == 'A') & (ANSWERS['qid'] == 'q1')),
                                                              ['\x00', '\x1b '] * 6))
    browser.load(write_report(small_study(tmp_path / 'study', answers=answers)))
    browser.evaluate('document.querySelector("#rows tbody tr").click()')  # system A, k 2, q1
    shown = browser.evaluate('[...document.querySelectorAll(".pane tr.answer td.kshot")].map(c => '
                             '[c.querySelector(".answer-text").textContent, c.querySelector(".note") !== null])')
    assert shown == [['\x00', True], ['\x1b ', True]]
    assert browser.evaluate('[...document.querySelectorAll(".pane tr.answer td.zero .note")].length') == 0
    assert browser.errors == []


def two_readers(folder: Path) -> Path:
    """The small study answered by two readers, with its answer health and correlations: every file with
    a ``reader`` column, as a study of several readers writes them."""
    def two(frame):
        return pd.concat([frame.assign(reader=r)[['reader', *frame.columns]] for r in ('gemma3-270m', 'smollm2-135m')],
                         ignore_index=True)
    health = pd.DataFrame({'system': ['0-shot', 'A', 'A-r'], 'k': [0, 2, 2], 'answers': [4, 4, 4],
                           'empty': [0.25, 0.0, 0.0], 'cut': [0.0, 0.0, 0.0], 'copied': [0.0, 0.5, 0.5],
                           'mean_tokens': [3.0, 2.0, 2.0]})
    correlations = pd.DataFrame({'labels': 'label>=2', 'system': ['A', 'A-r'], 'k': [2, 2], 'method': 'pearson',
                                 'r': [np.nan, np.nan], 'p': [np.nan, np.nan], 'n': [1, 1]})
    return small_study(folder, **{name: two(frame) for name, frame in dict(
        per_query=PER_QUERY, answers=ANSWERS, scores=SCORES, contexts=CONTEXTS, queries=QUERIES, health=health,
        correlations=correlations).items()})


def test_report_of_two_readers_heads_their_column_reader(tmp_path):
    page = write_report(two_readers(tmp_path / 'study')).read_text()
    overview = page[page.index('<section id="overview">'):page.index('<section id="explorer">')]
    health = overview[overview.index('<table class="health">'):]
    assert re.findall(r'<th>([^<]*)</th>', health[:health.index('</thead>')]) == [
        'Reader', 'System', 'k', 'answers', 'empty', 'cut', 'copied', 'mean tokens']
    assert re.findall(r'<td>(gemma3-270m|smollm2-135m)</td><td>(0-shot|A-r|A)', health[:health.index('</table>')]) == [
        (r, s) for r in ('gemma3-270m', 'smollm2-135m') for s in ('0-shot', 'A', 'A-r')]
    correlations = overview[overview.index('<table class="correlations">'):]
    assert re.findall(r'<th rowspan="2">([^<]*)</th>', correlations) == ['Reader', 'labels', 'system', 'k']
    assert not re.search(r'<th[^>]*>dataset', overview, re.I)
    data = embedded(tmp_path / 'study' / 'report.html')
    assert data['named_datasets'] and data['block'] == 'Reader'
    assert data['datasets'] == ['gemma3-270m', 'smollm2-135m']
    # A study of one reader over several datasets keeps the heading its blocks have.
    one = write_report(small_study(tmp_path / 'one', per_query=PER_QUERY.assign(dataset='dl19'),
                                   answers=None, scores=None, contexts=None, queries=None))
    assert embedded(one)['block'] == 'Dataset'


def test_report_of_two_readers_heads_their_column_reader_in_a_browser(tmp_path, browser):
    browser.load(write_report(two_readers(tmp_path / 'study')))
    assert browser.evaluate('[...document.querySelectorAll("#rows thead th")].map(t => t.textContent)')[:2] == [
        'Reader', 'Label set']
    assert browser.evaluate('document.getElementById("filter-dataset").parentElement.firstChild.textContent') == \
        'reader '
    assert browser.errors == []
