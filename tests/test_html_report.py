import io
import json
import math
import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps
from synthetic_study import SYSTEMS, write_study

from pyterrier_utility.errors import FrameError, SettingError
from pyterrier_utility.experiment import stats
from pyterrier_utility.experiment.html import markdown_html, query_view, write_report

PER_QUERY = pd.DataFrame({
    'labels': ['label>=2'] * 4, 'system': ['A', 'A', 'A-r', 'A-r'], 'k': [2, 2, 2, 2], 'qid': ['q1', 'q2', 'q1', 'q2'],
    'n_docs': [2, 1, 2, 1], 'ndcg': [0.9, 0.25, 0.6131471927654584, 0.25],
    'fbert_0shot': [0.5, 0.0, 0.5, 0.0], 'fbert': [0.6, 0.3, 0.55, 0.3], 'utility': [0.2, np.nan, 0.1, np.nan]})
ANSWERS = pd.DataFrame({
    'system': ['0-shot'] * 4 + ['A'] * 4 + ['A-r'] * 4, 'k': [0] * 4 + [2] * 8, 'qid': ['q1', 'q1', 'q2', 'q2'] * 3,
    'sample': [0, 1] * 6,
    'qanswer': ['lift is force', 'no idea', '', 'heat </script><!-- x', 'upward force', 'lift', 'nose heats',
                'friction', 'force up', 'lift', 'nose heats', 'friction']})
SCORES = ANSWERS[['system', 'k', 'qid', 'sample']].assign(
    fbert=[0.4, 0.6, 0.0, 0.0, 0.7, 0.5, 0.3, 0.3, 0.6, 0.5, 0.3, 0.3],
    best_docno=['d1', 'd1', 'd4', 'd4', 'd1', 'd1', 'd4', 'd4', 'd1', 'd1', 'd4', 'd4'])
SCORES.insert(0, 'labels', 'label>=2')
CONTEXTS = pd.DataFrame({
    'system': ['A', 'A', 'A', 'A-r', 'A-r', 'A-r'], 'k': [2] * 6, 'qid': ['q1', 'q1', 'q2', 'q1', 'q1', 'q2'],
    'position': [1, 2, 1, 1, 2, 1], 'docno': ['d1', 'd9', 'd5', 'd9', 'd1', 'd5'],
    'label': [2, np.nan, 1, np.nan, 2, 1],
    'text': ['Lift is the upward force.', 'Unjudged, with "quotes" & <b>tags</b>.', 'Heat rises.',
             'Unjudged, with "quotes" & <b>tags</b>.', 'Lift is the upward force.', 'Heat rises.']})
QUERIES = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['what is lift', 'why does the nose heat up']})


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
        **{c: rows[c].astype(float) for c in ('ndcg', 'fbert_0shot', 'fbert', 'utility')}})
    pd.testing.assert_frame_equal(decoded, pd.read_csv(folder / 'per_query.csv', dtype={'qid': str}))
    assert data['queries']['text'] == ['what is lift', 'why does the nose heat up']

    def cell(qid, system, k):
        return f'{data["queries"]["qid"].index(qid)}|{data["systems"].index(system)}|{k}'
    for (system, k, qid), group in ANSWERS.groupby(['system', 'k', 'qid']):
        assert [(s, data['answer_texts'][a]) for s, a in data['answers'][cell(qid, system, k)]] == \
            list(zip(group['sample'], group['qanswer']))
    for (system, k, qid), group in CONTEXTS.groupby(['system', 'k', 'qid']):
        shown = [(data['docs']['docno'][d], data['docs']['text'][d], label)
                 for d, label in data['contexts'][cell(qid, system, k)]]
        assert shown == [(d, t, None if math.isnan(lab) else lab) for d, t, lab in
                         zip(group['docno'], group['text'], group['label'])]
    for (system, k, qid), group in SCORES.groupby(['system', 'k', 'qid']):
        key = cell(qid, system, k).replace('|', '|0|', 1)
        assert data['scores'][key] == [list(x) for x in zip(group['sample'], group['fbert'], group['best_docno'])]
    # An answer holding '</script>' and '<!--' stays inside the data.
    assert path.read_text().count('</script>') == 2


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


def test_report_errors_name_the_file_row_and_column(tmp_path):
    with pytest.raises(SettingError, match=re.escape(str(tmp_path / 'none' / 'per_query.csv'))):
        write_report(tmp_path / 'none')
    folder = small_study(tmp_path / 'a', contexts=CONTEXTS.drop(columns=['position']))
    with pytest.raises(FrameError, match=r"contexts\.csv: no column 'position'"):
        write_report(folder)
    folder = small_study(tmp_path / 'b', per_query=PER_QUERY.assign(ndcg=['0.9', 'high', '0.6', '0.25']))
    with pytest.raises(FrameError, match=r"per_query\.csv row 3, column 'ndcg': 'high' is not a number"):
        write_report(folder)
    folder = small_study(tmp_path / 'c', answers=ANSWERS.assign(dataset='x'))
    with pytest.raises(FrameError, match=r"answers\.csv: a column 'dataset', unlike per_query\.csv"):
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
    assert repr(query_view(frames, 'q2')) == 'QueryView(qid=\'q2\', label>=2; A k=2: U=nan, A-r k=2: U=nan)'
    with pytest.raises(SettingError, match="no per_query row for qid 'q3'"):
        query_view(folder, 'q3')
    with pytest.raises(FrameError, match="answers: no column 'qanswer'"):
        query_view(dict(frames, answers=ANSWERS.drop(columns=['qanswer'])), 'q1')


@pytest.fixture(scope='module')
def browser():
    """Headless Chromium; in CI (CI=true) its absence fails the test instead of skipping it."""
    try:
        from browser import Browser, executable
        path = executable()
    except ImportError as e:
        path, why = None, f'{e} (pip install -r requirements-test.txt)'
    else:
        why = 'no Chromium on PATH (apt-get install chromium)'
    if path is None:
        if os.environ.get('CI') == 'true':
            pytest.fail(f'{why}: .ci/run installs it')
        pytest.skip(why)
    with Browser(path) as b:
        yield b


def screenshot_variance(png: bytes) -> float:
    from PIL import Image
    return float(np.asarray(Image.open(io.BytesIO(png)).convert('L'), float).var())


def test_report_in_a_browser(tmp_path, browser):
    folder = write_study(tmp_path / 'study', queries=12, samples=5)
    path = write_report(folder)
    seconds = browser.load(path)
    # The explorer's init() ran to its end (it stamps the milliseconds since navigation), before the load event.
    assert 0 < float(browser.evaluate('document.body.dataset.ready')) <= seconds * 1000
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
    assert [r[7] for r in shown] == [f'{v:.3f}' for v in expected['fbert']]

    browser.evaluate('document.querySelector("#rows tbody tr").click()')
    contexts = pd.read_csv(folder / 'contexts.csv', dtype={'qid': str})
    first = contexts[(contexts['system'] == 'BM25') & (contexts['k'] == 3) & (contexts['qid'] == 'q0')]
    shown = browser.evaluate('[...document.querySelectorAll(".pane li.context")]'
                             '.map(c => [c.dataset.docno, c.dataset.label])')
    assert shown == [[d, '' if math.isnan(lab) else f'{lab:g}'] for d, lab in zip(first['docno'], first['label'])]
    assert len(shown) == 3
    answers = pd.read_csv(folder / 'answers.csv', dtype={'qid': str})
    kshot = answers[(answers['system'] == 'BM25') & (answers['k'] == 3) & (answers['qid'] == 'q0')]['qanswer']
    assert browser.evaluate('[...document.querySelectorAll(".pane tr.answer td.kshot")]'
                            '.map(c => c.textContent)') == list(kshot)
    question = pd.read_csv(folder / 'queries.csv')['query'][0]
    assert browser.evaluate('document.querySelector(".question").textContent') == question

    browser.evaluate('const c = document.getElementById("compare"); c.value = [...c.options].find('
                     'o => o.textContent === "Rel, k=3").value; c.dispatchEvent(new Event("change"));')
    assert browser.evaluate('[...document.querySelectorAll(".pane")]'
                            '.map(p => p.dataset.system + " " + p.dataset.k)') == ['BM25 3', 'Rel 3']
    browser.evaluate('document.getElementById("query").scrollIntoView()')
    png = browser.screenshot()
    assert screenshot_variance(png) > 100
    if os.environ.get('PYTERRIER_UTILITY_REPORT_SCREENSHOT'):
        Path(os.environ['PYTERRIER_UTILITY_REPORT_SCREENSHOT']).write_bytes(png)

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
