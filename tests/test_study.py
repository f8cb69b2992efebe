import math
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pandas.testing import assert_frame_equal
from pyterrier_rag.backend import BackendOutput
from scipy import stats as sps
from support.backends import CountingBackend

from pyterrier_utility import GenerationCache, OracleSampler, Reader, report, study as ex
from pyterrier_utility.errors import SettingError

TEXTS = {'d1': 'Lift is the upward force on a wing.', 'd2': 'Drag slows an aircraft down.',
         'd3': 'The boundary layer separates near the trailing edge.', 'd4': 'Hypersonic flow heats the nose.',
         'd5': 'Heat transfer rises with Mach number.'}
TOPICS = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['what is lift', 'why does the nose heat up']})
QRELS = pd.DataFrame({'qid': ['q1', 'q1', 'q1', 'q2', 'q2'], 'docno': ['d1', 'd2', 'd3', 'd4', 'd5'],
                      'label': [2, 1, 0, 2, 1]})


def ranking(rows):
    frame = pd.DataFrame(rows, columns=['qid', 'docno'])
    frame = frame.merge(TOPICS, on='qid')
    frame['text'] = frame['docno'].map(TEXTS)
    frame['rank'] = frame.groupby('qid').cumcount()
    frame['score'] = -frame['rank'].astype(float)
    return pt.Transformer.from_df(frame)


def systems():
    return {
        'A': ranking([('q1', 'd1'), ('q1', 'd2'), ('q1', 'd3'), ('q2', 'd5'), ('q2', 'd4'), ('q2', 'd1')]),
        'B': ranking([('q1', 'd3'), ('q1', 'd2'), ('q1', 'd1')]),
        'Rel': OracleSampler(QRELS, TEXTS, labels={2}),
    }


def study(backend, path, minilm, **kw):
    reader = Reader(GenerationCache(backend, path), n_samples=2)
    return ex.run_study(TOPICS, QRELS, systems(), reader, TEXTS, ks=[1, 2], label_sets=[2],
                        reverse=['A'], bertscore=minilm, verbose=False, **kw)


def test_study_generates_each_distinct_prompt_and_seed_once_and_nothing_on_rerun(tmp_path, minilm):
    backend = CountingBackend()
    with pytest.warns(UserWarning, match='B retrieved nothing.*q2'):
        first = study(backend, tmp_path / 'answers.sqlite', minilm)
    # Distinct prompts, by hand: 0-shot q1 q2; k=1: [d1] [d5] (A and A-r alike) [d3] (B; B's q2 is
    # the 0-shot prompt) [d4] (Rel q2; Rel q1 = [d1]); k=2: A [d1 d2] [d5 d4], A-r [d2 d1] [d4 d5],
    # B [d3 d2]; Rel at k=2 repeats k=1 (one relevant document each).
    assert len(set(backend.calls)) == 11
    assert set(Counter(backend.calls).values()) == {2}  # once per sample seed
    assert first.generated == 22
    again = CountingBackend()
    second = study(again, tmp_path / 'answers.sqlite', minilm)
    assert again.calls == [] and second.generated == 0
    assert_frame_equal(first.per_query, second.per_query)
    assert_frame_equal(first.answers, second.answers)


def test_study_values(tmp_path, minilm):
    out = study(CountingBackend(), None, minilm).per_query
    assert list(out.columns) == ['labels', 'system', 'k', 'qid', 'n_docs', 'ndcg', 'quality_0shot', 'quality',
                                 'utility']
    assert list(dict.fromkeys(out['system'])) == ['A', 'A-r', 'B', 'Rel']
    assert len(out) == 2 * 4 * 2
    row = out[(out.system == 'A-r') & (out.k == 2) & (out.qid == 'q1')].iloc[0]
    # Context order d2 (label 1), d1 (label 2); trec_eval's nDCG uses the label as gain.
    assert row['ndcg'] == pytest.approx((1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3)))
    assert row['n_docs'] == 2
    assert np.allclose(out['utility'], (out['quality'] - out['quality_0shot']) / out['quality_0shot'])
    empty = out[(out.system == 'B') & (out.qid == 'q2')]
    assert (empty['n_docs'] == 0).all() and (empty['ndcg'] == 0).all() and (empty['utility'] == 0).all()
    same = out[out.k == 1].pivot(index='qid', columns='system', values='utility')
    assert (same['A'] == same['A-r']).all()


def test_study_rejects_bad_arguments(minilm):
    reader = Reader(CountingBackend())
    with pytest.raises(SettingError, match='reverse names systems that are not given'):
        ex.run_study(TOPICS, QRELS, systems(), reader, TEXTS, reverse=['Z'], bertscore=minilm)
    with pytest.raises(ValueError, match='k must be an integer >= 1'):
        ex.run_study(TOPICS, QRELS, systems(), reader, TEXTS, ks=[0, 1], bertscore=minilm)


def synthetic(n=12, seed=3):
    """Per-query values: A far above Rel, A-r like A, NRel with constant nDCG."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in (1, 3):
        rel = rng.normal(0.2, 0.1, n)
        values = {'Rel': rel, 'A': rel + 0.3 + rng.normal(0, 0.05, n), 'NRel': rel + rng.normal(0, 0.1, n)}
        values['A-r'] = values['A'] + rng.normal(0, 0.1, n)
        for system in ('A', 'A-r', 'Rel', 'NRel'):
            ndcg = np.zeros(n) if system == 'NRel' else rng.uniform(0, 1, n)
            for i in range(n):
                rows.append(('label>=2', system, k, f'q{i}', k, ndcg[i], 0.5, 0.5 * (1 + values[system][i]),
                             values[system][i]))
    return pd.DataFrame(rows, columns=['labels', 'system', 'k', 'qid', 'n_docs', 'ndcg', 'quality_0shot',
                                       'quality', 'utility'])


def test_table1_marks_match_scipy():
    per_query = synthetic()
    table = ex.table1(per_query)
    for (k, system), row in table.set_index(['k', 'system']).iterrows():
        u = per_query[(per_query.k == k)].pivot(index='qid', columns='system', values='utility')
        assert row['utility'] == pytest.approx(u[system].mean())
        assert row['n'] == 12
        if system == 'Rel':
            assert math.isnan(row['p_baseline'])
        else:
            assert row['p_baseline'] == pytest.approx(sps.ttest_rel(u[system], u['Rel']).pvalue)
        if system == 'A-r':
            assert row['p_reversal'] == pytest.approx(sps.ttest_rel(u['A-r'], u['A']).pvalue)
        else:
            assert math.isnan(row['p_reversal'])
        expected = ('\u2020' if row['p_baseline'] < 0.05 else '') + ('\u2021' if row['p_reversal'] < 0.05 else '')
        assert row['mark'] == expected
    assert table.set_index(['k', 'system']).loc[(1, 'A'), 'mark'] == '\u2020'


def test_table1_ignores_nan_queries_and_identical_systems():
    per_query = synthetic()
    per_query.loc[per_query.qid == 'q0', 'utility'] = np.nan
    per_query.loc[per_query.system == 'A-r', 'utility'] = per_query.loc[per_query.system == 'A', 'utility'].values
    table = ex.table1(per_query).set_index(['k', 'system'])
    assert (table['n'] == 11).all()
    u = per_query[(per_query.k == 1) & (per_query.qid != 'q0')].pivot(index='qid', columns='system', values='utility')
    assert table.loc[(1, 'A'), 'p_baseline'] == pytest.approx(sps.ttest_rel(u['A'], u['Rel']).pvalue)
    assert math.isnan(table.loc[(1, 'A-r'), 'p_reversal'])


def test_table1_markdown_layout():
    table = pd.DataFrame({
        'labels': ['label>=2'] * 4, 'k': [1, 1, 3, 3], 'system': ['A', 'Rel', 'A', 'Rel'],
        'utility': [0.12345, -0.5, 0.2, 0.1], 'n': [5] * 4, 'quality_0shot': [0.4] * 4,
        'p_baseline': [0.01, np.nan, 0.2, np.nan], 'p_reversal': [np.nan] * 4, 'mark': ['\u2020', '', '', '']})
    assert report.table1_markdown(table) == (
        '**label>=2**: mean utility, n = 5 queries; \u2020 differs from Rel, \u2021 differs from its unreversed '
        'ordering (paired t-test, p < 0.05; no mark on fewer than 5 paired queries, too few for the test to say '
        'much)\n\n'
        '| k | 0-shot FBERT | A | Rel |\n'
        '|---:|---:|---:|---:|\n'
        '| 1 | 0.400 | 0.123\u2020 | -0.500 |\n'
        '| 3 | 0.400 | 0.200 | 0.100 |\n')


@pytest.mark.parametrize('method,fn', [('pearson', sps.pearsonr), ('spearman', sps.spearmanr),
                                       ('kendall', sps.kendalltau)])
def test_correlations_match_scipy(method, fn):
    per_query = synthetic()
    corr = ex.correlations(per_query, method).set_index(['system', 'k'])
    for system in ('A', 'A-r', 'Rel'):
        cell = per_query[(per_query.system == system) & (per_query.k == 3)]
        expected = fn(cell['ndcg'], cell['utility'])
        assert corr.loc[(system, 3), 'r'] == pytest.approx(expected[0])
        assert corr.loc[(system, 3), 'p'] == pytest.approx(expected[1])
    assert math.isnan(corr.loc[('NRel', 3), 'r'])  # nDCG constant at 0


def test_figures_show_what_their_titles_say(tmp_path):
    per_query = synthetic()
    fig3 = report.utility_vs_k(per_query, tmp_path / 'fig3.png')
    ax = fig3.axes[0]
    assert ax.get_xlabel().startswith('k') and ax.get_ylabel() == 'mean utility U'
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ['A', 'A-r', 'Rel']  # NRel left out, as the paper
    assert list(ax.lines[0].get_ydata()) == pytest.approx(ex.table1(per_query).query("system == 'A'")['utility'])
    fig4 = report.ndcg_vs_utility(per_query, 3, path=tmp_path / 'fig4.png')
    # not the oracles
    assert [a.get_title().split('\n')[0] for a in fig4.axes] == ['label\u22652, A', 'label\u22652, A-r']
    assert fig4.axes[0].get_xlabel() == 'nDCG@3 (context order)' and len(fig4.axes[0].lines) == 1  # least squares
    oracles = report.ndcg_vs_utility(per_query, 3, systems=['Rel', 'NRel'])
    assert len(oracles.axes[1].lines) == 0  # NRel: nDCG constant, no line
    fig5 = report.correlation_vs_k(per_query, path=tmp_path / 'fig5.png')
    assert fig5.axes[0].get_ylabel() == 'Pearson r(nDCG@k, U)'
    assert [t.get_text() for t in fig5.axes[0].get_legend().get_texts()] == ['A', 'A-r', 'Rel']
    for name in ('fig3.png', 'fig4.png', 'fig5.png'):
        assert (tmp_path / name).read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    with pytest.raises(ValueError, match='k=7'):
        report.ndcg_vs_utility(per_query, 7)


@pytest.mark.slow
def test_cli_study_writes_table_figures_and_csvs(tmp_path, monkeypatch, capsys):
    import pyterrier_utility as pu
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    assert cli.main(['study', '--queries', '2', '-k', '1', '2', '--fig4-k', '2', '--out', str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    # One dataset: no Dataset column; each label set's 0-shot FBERT in its own column, on the first row.
    assert ('| System | label>=2, 0-shot | label>=2, k=1 | label>=2, k=2 | label>=3, 0-shot | label>=3, k=1 '
            '| label>=3, k=2 |') in printed
    table = pd.read_csv(tmp_path / 'table1.csv')
    first = (tmp_path / 'table1_paper.md').read_text().splitlines()[4].split('|')[1:-1]
    assert first[0].strip() == 'BM25'
    for j, lab in enumerate(['label>=2', 'label>=3']):
        zero = table.loc[table['labels'] == lab, 'quality_0shot'].iloc[0]
        assert float(first[1 + 3 * j]) == pytest.approx(zero, abs=5e-4)
    header = '| k | 0-shot FBERT | BM25 | BM25-r | Neural | Neural-r | Rel | NRel |'
    assert header in (tmp_path / 'table1.md').read_text()
    for name in ('per_query.csv', 'answers.csv', 'table1.csv', 'table1.md', 'table1_paper.md', 'table1.tex',
                 'correlations.csv', 'settings.json', 'fig3_utility_vs_k.png', 'fig4_ndcg_vs_utility_k2.pdf',
                 'fig5_pearson_vs_k.png', 'generations.sqlite'):
        assert (tmp_path / name).stat().st_size > 0, name
    per_query = pd.read_csv(tmp_path / 'per_query.csv')
    assert len(per_query) == 2 * 2 * 6 * 2  # label sets x k x systems x queries
    assert set(per_query['labels']) == {'label>=2', 'label>=3'}
    # health.csv: a row per system and k, 0-shot first; its shares counted from answers.csv.
    health = pd.read_csv(tmp_path / 'health.csv')
    answers = pd.read_csv(tmp_path / 'answers.csv', keep_default_na=False)
    counted = answers.assign(empty=answers['qanswer'].str.strip().eq('')).groupby(['system', 'k'], sort=False)
    assert list(zip(health['system'], health['k'])) == list(counted.groups)
    assert health['answers'].tolist() == counted.size().tolist()
    assert health['empty'].tolist() == counted['empty'].mean().tolist()
    # This backend does not say whether it cut an answer, nor how many tokens it generated: unknown, not 0.
    assert answers['truncated'].eq('').all() and health[['cut', 'mean_tokens']].isna().all().all()
    assert f'Answer health: {len(answers)} answers, 0.0% empty, unknown cut at max_new_tokens, ' in printed
    assert 'tokens per answer unknown' in printed and health.loc[health['system'] == '0-shot', 'copied'].eq(0).all()
    # The positive control after every study: Rel against NRel at each k, the paired test's p.
    assert 'Rel against NRel (label>=2): k=1 ' in printed and 'Rel against NRel (label>=3): k=1 ' in printed


def test_orderings_and_windows_give_the_contexts_their_names_say(minilm):
    deep = ranking([('q1', d) for d in ('d1', 'd2', 'd3', 'd4', 'd5')])
    reader = Reader(CountingBackend(), n_samples=1)
    results = ex.run_study(TOPICS.head(1), QRELS, {'A': deep}, reader, TEXTS, ks=[3], label_sets=[2],
                           reverse=['A'], orderings=['original', 'lim', 'lim-r'], windows=[3], bertscore=minilm,
                           verbose=False)
    shown = results.contexts.groupby('system', sort=False)['docno'].agg(list).to_dict()
    # Lost in the middle of ranks 1 2 3: 1 3 2; its reversal, the best in the middle: 3 1 2 ... of 3 2 1.
    assert shown == {'A': ['d1', 'd2', 'd3'], 'A-lim': ['d1', 'd3', 'd2'], 'A-lim-r': ['d3', 'd1', 'd2'],
                     'A@3': ['d3', 'd4', 'd5']}
    assert list(results.per_query['system']) == ['A', 'A-lim', 'A-lim-r', 'A@3']
    # nDCG@3 (trec_eval's linear gains) in context order: d1 (label 2) and d2 (label 1) where the reader sees them.
    ndcg = results.per_query.set_index('system')['ndcg']
    ideal = 2 + 1 / math.log2(3)
    assert ndcg['A'] == pytest.approx(1.0)
    assert ndcg['A-lim'] == pytest.approx((2 + 1 / math.log2(4)) / ideal)
    assert ndcg['A-lim-r'] == pytest.approx((2 / math.log2(3) + 1 / math.log2(4)) / ideal)
    assert ndcg['A@3'] == 0.0
    assert 'Context 1: The boundary layer' in results.prompt(reader, 'A@3', 3, 'q1')


def test_windows_from_the_tail_of_a_grid_as_the_authors_compose_context(minilm):
    """window_grid (tops 2, tails 2, step 2) over five documents at k = 2: the grid starts at ranks 1,
    3 (its last window fitting is 3-4; rank 5 is left out), so the windows from the top are A and
    A@3, from the tail A@-2 (ranks 1-2) and A@-1 (ranks 3-4)."""
    deep = ranking([('q1', d) for d in ('d1', 'd2', 'd3', 'd4', 'd5')])
    config = ex.StudyConfig(window_grid=(2, 2, 2))
    assert (config.study_windows, config.window_step) == ((3, -2, -1), 2)
    results = ex.run_study(TOPICS.head(1), QRELS, {'A': deep}, Reader(CountingBackend(), n_samples=1), TEXTS,
                           ks=[2], label_sets=[2], reverse=['A'], orderings=['original'],
                           windows=config.study_windows, window_step=config.window_step, bertscore=minilm,
                           verbose=False)
    shown = results.contexts.groupby('system', sort=False)['docno'].agg(list).to_dict()
    assert shown == {'A': ['d1', 'd2'], 'A@3': ['d3', 'd4'], 'A@-2': ['d1', 'd2'], 'A@-1': ['d3', 'd4']}
    assert list(results.per_query['system']) == ['A', 'A@3', 'A@-2', 'A@-1']
    with pytest.raises(SettingError, match='window_grid'):
        ex.StudyConfig(window_grid=(0, 1, 1))
    from pyterrier_utility import cli
    assert cli.config_of(cli.parser().parse_args(['study', '--window-grid', '2', '1', '5']),
                         ex.StudyConfig()).window_grid == (2, 1, 5)


def test_several_readers_each_with_its_own_zero_shot_baseline(tmp_path, monkeypatch, minilm):
    import pyterrier_utility as pu
    from pyterrier_utility import cli

    class Named(CountingBackend):
        def generate(self, inps, **kw):
            return [BackendOutput(text=f'{self.model_id}: {o.text}')
                    for o in super().generate(inps, **kw)]

    def build(spec, **kw):
        backend = Named()
        backend.model_id = 'wing lift drag' if spec == 'gemma3-270m' else 'heat nose'
        return backend
    monkeypatch.setattr(pu.backends, 'get_backend', build)
    assert cli.main(['study', '--queries', '2', '-k', '1', '--systems', 'Rel', '--samples', '1', '--no-reverse',
                     '--reader', 'gemma3-270m', 'smollm2-135m', '--out', str(tmp_path)]) == 0
    per_query = pd.read_csv(tmp_path / 'per_query.csv', dtype={'qid': str})
    assert list(per_query.columns[:2]) == ['reader', 'labels'] and set(per_query['reader']) == {'gemma3-270m',
                                                                                                  'smollm2-135m'}
    zero = per_query.groupby(['reader', 'qid'])['quality_0shot'].first().unstack('reader')
    assert (zero['gemma3-270m'] != zero['smollm2-135m']).all()  # each reader's own 0-shot answers
    answers = pd.read_csv(tmp_path / 'answers.csv')
    assert answers.groupby('reader')['qanswer'].apply(lambda a: a.str.split(':').str[0].unique().tolist()).to_dict() \
        == {'gemma3-270m': ['wing lift drag'], 'smollm2-135m': ['heat nose']}
    # Its 0-shot FBERT is that of its own 0-shot answer against the query's relevant documents.
    d = pu.datasets.cranfield()
    scorer = pu.FBertScorer(d.get_qrels(), d.texts, labels=2, model_type=minilm)
    first = answers[(answers['system'] == '0-shot') & (answers['reader'] == 'smollm2-135m')].iloc[0]
    own = per_query[(per_query['reader'] == 'smollm2-135m') & (per_query['labels'] == 'label>=2')
                    & (per_query['qid'] == str(first['qid']))]['quality_0shot'].iloc[0]
    assert own == pytest.approx(scorer.score([str(first['qid'])], [first['qanswer']])[0], abs=1e-6)
    # Table 1 stacks a block per reader, headed so.
    paper, latex = (tmp_path / 'table1_paper.md').read_text(), (tmp_path / 'table1.tex').read_text()
    assert '| Reader | System |' in paper and '| gemma3-270m | Rel |' in paper and 'Dataset' not in paper
    assert 'Reader & System &' in latex and 'Dataset' not in latex


def test_each_readers_stops_are_recorded_and_printed_where_the_decoding_does_not_say_them(tmp_path, monkeypatch,
                                                                                            capsys, minilm):
    import json

    import pyterrier_utility as pu
    from pyterrier_utility import cli
    backend = CountingBackend()
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: backend)
    assert cli.main(['study', '--queries', '1', '-k', '1', '--systems', 'Rel', '--samples', '1', '--no-reverse',
                     '--prompt-format', 'authors-short', '--stop', 'END', '--out', str(tmp_path)]) == 0
    settings = json.loads((tmp_path / 'settings.json').read_text())
    assert settings['decoding']['stop'] == ['END']
    assert settings['engines']['gemma3-270m']['stop'] == ['</answer>']  # the authors' short prompt: its tag alone
    assert "gemma3-270m: stops at ['</answer>'] (prompt format 'authors-short': its stop alone)" in \
        capsys.readouterr().err
    assert set(backend.stops) == {('</answer>',)}


def test_answers_carry_what_the_backend_said_and_truncation_is_warned_once(tmp_path, minilm):
    with pytest.warns(UserWarning) as caught:
        results = study(CountingBackend(logprobs=True), None, minilm)
    answers = results.answers
    assert list(answers.columns) == ['system', 'k', 'qid', 'sample', 'qanswer', 'logprob', 'mean_logprob', 'tokens',
                                     'truncated']
    # CountingBackend: as many tokens as words, each of log-probability -0.5 per context - 0.25; odd seeds cut.
    assert answers['tokens'].tolist() == answers['qanswer'].str.split().str.len().astype(float).tolist()
    contexts = answers['qanswer'].str.extract(r'(\d+) contexts\)$')[0].astype(int)
    per_token = -0.5 * contexts - 0.25
    assert answers['mean_logprob'].tolist() == per_token.tolist()
    assert answers['logprob'].tolist() == (per_token * answers['qanswer'].str.split().str.len()).tolist()
    assert answers['truncated'].tolist() == (answers['sample'] == 1).tolist()
    assert (answers.loc[answers['system'] == '0-shot', 'mean_logprob'] == -0.25).all()
    cut = [str(w.message) for w in caught if 'max_new_tokens' in str(w.message)]
    assert cut == [f'{len(answers) // 2} of {len(answers)} answers reached max_new_tokens; raise --max-new-tokens '
                   "(Reader(max_new_tokens=...) or the decoding's) (answers.csv says which, in its truncated column)"]
    paths = results.save(tmp_path)
    saved = pd.read_csv(paths['answers.csv'])
    assert saved['truncated'].tolist() == answers['truncated'].tolist()
    assert saved['logprob'].tolist() == answers['logprob'].tolist()
    corr = pd.read_csv(paths['confidence_correlations.csv'])
    assert list(corr.columns) == ['labels', 'system', 'k', 'method', 'r', 'p', 'n']
    assert len(corr) == 3 * len(results.per_query.drop_duplicates(['system', 'k']))


def test_a_study_of_a_backend_that_gives_no_log_probabilities_writes_no_confidence_correlations(tmp_path, minilm):
    results = study(CountingBackend(), None, minilm)
    assert results.answers['logprob'].isna().all() and results.answers['truncated'].isna().all()
    assert 'confidence_correlations.csv' not in results.save(tmp_path)
    assert results.confidence_correlations()['n'].eq(0).all()


@pytest.mark.parametrize('method,fn', [('pearson', sps.pearsonr), ('spearman', sps.spearmanr)])
def test_confidence_correlations_are_those_of_each_querys_mean_over_samples(method, fn):
    utility = [0.1, 0.4, 0.2, 0.9]
    per_query = pd.DataFrame({'labels': 'label>=2', 'system': 'A', 'k': 1, 'qid': ['q1', 'q2', 'q3', 'q4'],
                              'n_docs': 1, 'ndcg': 1.0, 'quality_0shot': 0.5, 'quality': 0.5, 'utility': utility})
    per_query = pd.concat([per_query, per_query.assign(system='B')], ignore_index=True)
    samples = {'q1': (-2.0, -1.0), 'q2': (-0.5, -0.7), 'q3': (-1.2, -1.6), 'q4': (-0.1, -0.3)}
    answers = pd.DataFrame(
        [('A', 1, q, j, 'x', m * 4, m, False) for q, ms in samples.items() for j, m in enumerate(ms)]
        + [('0-shot', 0, q, 0, 'x', -9.0, -9.0 if q == 'q1' else 0.0, False) for q in samples]
        + [('B', 1, q, 0, 'x', None, None, None) for q in samples],
        columns=['system', 'k', 'qid', 'sample', 'qanswer', 'logprob', 'mean_logprob', 'truncated'])
    out = ex.StudyResults(per_query, answers).confidence_correlations(method)
    expected = fn([-1.5, -0.6, -1.4, -0.2], utility)
    assert list(out.columns) == ['labels', 'system', 'k', 'method', 'r', 'p', 'n']
    a = out[out['system'] == 'A'].iloc[0]
    assert (a['r'], a['p'], a['n']) == (pytest.approx(expected[0], abs=1e-12), pytest.approx(expected[1], abs=1e-12), 4)
    b = out[out['system'] == 'B'].iloc[0]
    assert math.isnan(b['r']) and b['n'] == 0


@pytest.mark.slow
def test_figures_sweep_their_own_ks_over_answers_shared_with_table_1(tmp_path, monkeypatch):
    """Table 1 at k = 2 and Figures 3 and 5 at k = 1, 2, 3 answer exactly the prompts of one study at
    k = 1, 2, 3, each once; Table 1 shows k = 2 only, the figures 1 to 3, and the report command
    rebuilds the same from the folder."""
    import pyterrier_utility as pu
    from pyterrier_utility import cli
    from pyterrier_utility.report import figures
    backends = []

    def build(spec, **kw):
        backends.append(CountingBackend())
        return backends[-1]
    monkeypatch.setattr(pu.backends, 'get_backend', build)
    drawn = {}
    for name in ('utility_vs_k', 'correlation_vs_k'):
        real = getattr(figures, name)
        monkeypatch.setattr(figures, name, lambda frame, *a, _real=real, _name=name, **kw: (
            drawn.setdefault(_name, []).append(sorted(set(frame['k']))), _real(frame, *a, **kw))[1])
    common = ['study', '--queries', '2', '--systems', 'BM25', 'Rel', '--labels', '2', '--samples', '1']
    figure_study = ['-k', '2', '--figure-k', '1', '2', '3', '--fig4-k', '3', '--out', str(tmp_path / 'f')]
    assert cli.main(common + figure_study) == 0
    assert drawn == {'utility_vs_k': [[1, 2, 3]], 'correlation_vs_k': [[1, 2, 3]]}
    assert cli.main(common + ['-k', '1', '2', '3', '--out', str(tmp_path / 'all')]) == 0
    shared, whole = backends[0].calls, backends[1].calls
    assert sorted(shared) == sorted(whole) and len(set(shared)) == len(shared)
    per_query = pd.read_csv(tmp_path / 'f' / 'per_query.csv')
    assert sorted(per_query['k'].unique()) == [1, 2, 3]
    assert_frame_equal(per_query, pd.read_csv(tmp_path / 'all' / 'per_query.csv'))
    assert set(pd.read_csv(tmp_path / 'f' / 'table1.csv')['k']) == {2}
    assert '| label>=2, k=2 |' in (tmp_path / 'f' / 'table1_paper.md').read_text()
    assert 'k=1' not in (tmp_path / 'f' / 'table1_paper.md').read_text()
    assert (tmp_path / 'f' / 'fig4_ndcg_vs_utility_k3.png').exists()
    assert cli.main(['report', str(tmp_path / 'f'), '--out', str(tmp_path / 'again'), '--fig4-k', '3']) == 0
    assert (tmp_path / 'again' / 'table1_paper.md').read_text() == (tmp_path / 'f' / 'table1_paper.md').read_text()
    assert drawn['utility_vs_k'][-1] == drawn['correlation_vs_k'][-1] == [1, 2, 3]


@pytest.mark.slow
def test_an_absolute_study_tests_p_k_minus_p_0_and_report_redraws_a_relative_study_as_that_study(tmp_path, monkeypatch,
                                                                                                  capsys):
    """--utility absolute: Table 1's means and marks are scipy's paired t-tests on per_query.csv's P_k - P_0;
    the report command redraws a relative study absolute, generating nothing, into the absolute study's files."""
    import json

    import pyterrier_utility as pu
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    common = ['study', '--queries', '5', '--systems', 'BM25', 'Rel', 'NRel', '--labels', '2', '--samples', '1',
              '-k', '1', '3', '--min-n', '2', '--fig4-k', '3']
    absolute, relative = tmp_path / 'absolute', tmp_path / 'relative'
    assert cli.main(common + ['--utility', 'absolute', '--out', str(absolute)]) == 0
    assert cli.main(common + ['--out', str(relative)]) == 0
    assert json.loads((absolute / 'settings.json').read_text())['utility'] == 'absolute'
    assert json.loads((relative / 'settings.json').read_text())['utility'] == 'relative'
    per_query = pd.read_csv(absolute / 'per_query.csv', dtype={'qid': str})
    gain = per_query['quality'] - per_query['quality_0shot']
    assert (per_query['utility'] == gain).all()
    table = pd.read_csv(absolute / 'table1.csv').fillna({'mark': ''})
    assert len(table) == 2 * 4  # k x systems (BM25, BM25-r, Rel, NRel)
    marked = 0
    for row in table.itertuples():
        d = per_query[per_query['k'] == row.k].assign(d=gain).pivot(index='qid', columns='system', values='d')
        assert row.utility == pytest.approx(d[row.system].mean(), rel=1e-12) and row.n == 5
        p_base = sps.ttest_rel(d[row.system], d['Rel']).pvalue if row.system != 'Rel' else float('nan')
        p_rev = sps.ttest_rel(d['BM25-r'], d['BM25']).pvalue if row.system == 'BM25-r' else float('nan')
        for got, want in ((row.p_baseline, p_base), (row.p_reversal, p_rev)):
            assert (math.isnan(got) and math.isnan(want)) or got == pytest.approx(want, rel=1e-9)
        mark = ('\u2020' if p_base < 0.05 else '') + ('\u2021' if p_rev < 0.05 else '')
        assert row.mark.rstrip('\u00a7') == mark  # a health mark may follow
        marked += bool(mark)
    assert marked  # the marks are not all empty (NRel lies below Rel)
    legend = (absolute / 'table1_paper.md').read_text()
    assert legend.startswith('Mean absolute utility, n = 5 queries; ')
    assert (relative / 'table1_paper.md').read_text().startswith('Mean utility, n = 5 queries; ')
    # The same answers, P_k and P_0 in both studies; only U differs.
    other = pd.read_csv(relative / 'per_query.csv', dtype={'qid': str})
    assert_frame_equal(other.drop(columns='utility'), per_query.drop(columns='utility'))

    capsys.readouterr()
    again = tmp_path / 'again'
    assert cli.main(['report', str(relative), '--utility', 'absolute', '--min-n', '2', '--fig4-k', '3',
                     '--out', str(again), '--html']) == 0
    assert 'nothing generated' in capsys.readouterr().out
    for name in ('per_query.csv', 'table1.csv', 'table1.md', 'table1_paper.md', 'table1.tex', 'correlations.csv',
                 'fig3_utility_vs_k.png', 'fig4_ndcg_vs_utility_k3.png', 'fig5_pearson_vs_k.png'):
        assert (again / name).read_bytes() == (absolute / name).read_bytes(), name
    # The page too: its overview (verdict, Table 1, intervals, figures, correlations) and its explorer's data
    # are the absolute study's own; only its title and its settings (as the study was run) differ.
    def page(path):
        text = path.read_text()
        overview = text[text.index('<section id="overview">'):text.index('<details id="settings">')]
        return overview, text[text.index('<script type="application/json"'):text.index('</script>')]
    assert page(again / 'report.html') == page(absolute / 'report.html')
    assert 'Table 1: mean context absolute utility U per system and k' in page(again / 'report.html')[0]
    assert page(relative / 'report.html') != page(absolute / 'report.html')
    # Without --utility, the gain each study was run with; two studies run differently need one given.
    assert cli.main(['report', str(absolute), '--min-n', '2', '--out', str(tmp_path / 'same')]) == 0
    assert (tmp_path / 'same' / 'table1_paper.md').read_text() == legend
    with pytest.raises(SystemExit):
        cli.main(['report', str(absolute), str(relative), '--out', str(tmp_path / 'both')])
    assert 'different utility gains' in capsys.readouterr().err


class TokenCountingBackend(CountingBackend):
    """CountingBackend(logprobs=True) reporting each word's log-probability (the sum it reports)."""

    def __init__(self):
        super().__init__(logprobs=True)

    def generate(self, inps, **kw):
        from dataclasses import replace
        return [replace(a, token_logprobs=(a.logprob / a.tokens,) * a.tokens) for a in super().generate(inps, **kw)]


def test_each_tokens_log_probability_is_kept_beside_the_answers_their_sums_unchanged(tmp_path, minilm):
    import json
    with pytest.warns(UserWarning):
        results = study(TokenCountingBackend(), None, minilm)
    answers, each = results.answers, results.token_logprobs
    assert list(answers.columns) == ['system', 'k', 'qid', 'sample', 'qanswer', 'logprob', 'mean_logprob', 'tokens',
                                     'truncated']
    assert list(each.columns) == ['system', 'k', 'qid', 'sample', 'token_logprobs']
    assert_frame_equal(each[['system', 'k', 'qid', 'sample']], answers[['system', 'k', 'qid', 'sample']])
    assert [sum(t) for t in each['token_logprobs']] == answers['logprob'].tolist()
    results.save(tmp_path)
    saved = pd.read_csv(tmp_path / 'token_logprobs.csv')
    assert [tuple(json.loads(t)) for t in saved['token_logprobs']] == list(each['token_logprobs'])
    assert pd.read_csv(tmp_path / 'answers.csv')['logprob'].tolist() == answers['logprob'].tolist()
    # An engine that reports only the sum, or nothing: no file.
    with pytest.warns(UserWarning):
        study(CountingBackend(logprobs=True), None, minilm).save(tmp_path / 'sums')
    assert not (tmp_path / 'sums' / 'token_logprobs.csv').exists()


SMALL_STUDY = ['study', '--queries', '2', '-k', '1', '--samples', '1', '--max-new-tokens', '8', '--systems', 'BM25',
               'Rel']


def converted_gemma() -> Path:
    """The offline Gemma converted already (this session's cache, else the user's), or converted now."""
    from pyterrier_utility import backends
    from pyterrier_utility._files import cache_dir
    for cache in (cache_dir(), Path.home() / '.cache' / 'pyterrier_utility'):
        if (cache / 'models' / 'gemma-3-270m' / 'config.json').exists():
            return cache / 'models' / 'gemma-3-270m'
    return backends.gemma3_270m_path()


@pytest.mark.slow
def test_two_studies_started_together_on_one_fresh_cache_give_the_tables_of_each_alone(tmp_path):
    # Real processes over one fresh cache folder: the PISA index is built in it by one of them while
    # the other waits (they aborted with SIGABRT, the index half written). The converted reader is
    # linked in to keep the test short; tests/test_files.py races a conversion.
    root = Path(__file__).resolve().parents[1]

    def fresh_cache(name: str) -> Path:
        (tmp_path / name / 'models').mkdir(parents=True)
        (tmp_path / name / 'models' / 'gemma-3-270m').symlink_to(converted_gemma())
        return tmp_path / name

    def start(cache: Path, out: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, '-m', 'pyterrier_utility.cli'] + SMALL_STUDY
                                + ['--out', str(tmp_path / out)], cwd=root, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTERRIER_UTILITY_CACHE=str(cache), PYTHONPATH=str(root)))

    def finish(*procs: subprocess.Popen) -> None:
        outs = [p.communicate(timeout=1500) for p in procs]
        assert [p.returncode for p in procs] == [0] * len(procs), [err[-3000:] for _, err in outs]

    shared = fresh_cache('shared')
    finish(start(shared, 'A'), start(shared, 'B'))
    finish(start(fresh_cache('alone'), 'alone'))
    for name in ('per_query.csv', 'table1.csv'):
        alone = (tmp_path / 'alone' / name).read_bytes()
        assert (tmp_path / 'A' / name).read_bytes() == alone == (tmp_path / 'B' / name).read_bytes(), name
    assert sorted(p.name for p in (shared / 'indices').iterdir()) == ['.cranfield.pisa.lock', 'cranfield.pisa']
