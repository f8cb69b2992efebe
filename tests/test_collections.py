"""Real test collections, offline: an ir_datasets collection registered from local files (two query
sets over one corpus, as DL'19 and DL'20 over MS MARCO), through get_dataset('irds:...'), the
study, the CLI with two datasets and a run file, and the report command."""
import math

import numpy as np
import pandas as pd
import pytest
from support.backends import CountingBackend

import pyterrier_utility as pu
from pyterrier_utility import study as ex

WORDS = ('lift drag wing flow shock boundary layer heat nose mach pressure vortex stall flap jet plume '
         'turbulence laminar supersonic hypersonic').split()


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    """Registers irds:pu-test/tiny/a and irds:pu-test/tiny/b (labels 0-3; b has queries without a label-3
    document) over 60 generated documents; returns the folder of its files."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload
    folder = tmp_path_factory.mktemp('tiny')
    rng = np.random.default_rng(4)
    docs = {f'd{i}': ' '.join(rng.choice(WORDS, 12)) for i in range(60)}
    (folder / 'docs.tsv').write_text(''.join(f'{d}\t{t}\n' for d, t in docs.items()))
    for part, qids in (('a', range(1, 5)), ('b', range(5, 10))):
        queries = {f'q{i}': ' '.join(rng.choice(WORDS, 3)) for i in qids}
        (folder / f'{part}.tsv').write_text(''.join(f'{q}\t{t}\n' for q, t in queries.items()))
        lines = []
        for j, q in enumerate(queries):
            judged = rng.choice(60, 8, replace=False)
            top = 3 if part == 'a' or j % 2 == 0 else 2  # b: every other query has no label-3 document
            labels = [top, 2, 2, 1, 0, 0, 0, 0]
            lines += [f'{q} 0 d{d} {label}\n' for d, label in zip(judged, labels)]
        (folder / f'{part}.qrels').write_text(''.join(lines))
    if 'pu-test/tiny' not in ir_datasets.registry:
        corpus = TsvDocs(LocalDownload(folder / 'docs.tsv'), namespace='pu-test/tiny')
        ir_datasets.registry.register('pu-test/tiny', Dataset(corpus))
        for part in 'ab':
            ir_datasets.registry.register(f'pu-test/tiny/{part}', Dataset(
                corpus, TsvQueries(LocalDownload(folder / f'{part}.tsv')),
                TrecQrels(LocalDownload(folder / f'{part}.qrels'),
                          {0: 'no', 1: 'related', 2: 'relevant', 3: 'perfect'})))
    return folder


def test_an_ir_datasets_collection_fetches_only_the_texts_asked_for(tiny):
    d = pu.datasets.get_dataset('irds:pu-test/tiny/a')
    assert list(d.get_topics()['qid']) == ['q1', 'q2', 'q3', 'q4']
    assert set(d.get_qrels()['label']) == {0, 1, 2, 3}
    assert d.corpus_name == pu.datasets.get_dataset('irds:pu-test/tiny/b').corpus_name == 'irds:pu-test/tiny'
    texts = d.texts
    assert isinstance(texts, pu.datasets.LazyTexts) and texts.fetched == 0
    out = (d.bm25(num_results=50) % 3).compile()(d.get_topics().head(2))
    assert len(out) == 6 and texts.fetched == out['docno'].nunique()  # the cut is fused below the text loader
    assert out['text'].str.len().gt(0).all() and len(texts) == 60


def test_nrel_draws_unjudged_documents_by_docstore_position(tiny, monkeypatch):
    d = pu.datasets.get_dataset('irds:pu-test/tiny/a')
    texts = d.texts
    assert [texts.docno_at(i) for i in (0, 1, 59)] == ['d0', 'd1', 'd59']
    monkeypatch.setattr(pu.datasets.LazyTexts, '__iter__', lambda self: pytest.fail('the corpus was enumerated'))
    qrels = d.get_qrels()
    out = pu.OracleSampler(qrels, texts, relevant=False, fill_unjudged=True, num_results=20)(d.get_topics())
    assert out.groupby('qid').size().tolist() == [20] * 4
    judged = set(zip(qrels['qid'], qrels['docno'], qrels['label']))
    for qid, docno in zip(out['qid'], out['docno']):
        assert not any((qid, docno, label) in judged for label in (1, 2, 3))
    assert texts.fetched <= 60


def test_oracle_cut_is_pushed_into_the_sampler():
    qrels = pd.DataFrame({'qid': ['q'] * 5, 'docno': list('abcde'), 'label': [2] * 5})
    pipeline = (pu.OracleSampler(qrels, dict.fromkeys('abcde', 'x')) % 2).compile()
    assert isinstance(pipeline, pu.OracleSampler) and pipeline.num_results == 2
    whole = pu.OracleSampler(qrels, dict.fromkeys('abcde', 'x'))(pd.DataFrame({'qid': ['q'], 'query': ['x']}))
    assert list(pipeline(pd.DataFrame({'qid': ['q'], 'query': ['x']}))['docno']) == list(whole['docno'][:2])


def write_run(path, qids, docs):
    path.write_text(''.join(f'{q} Q0 {d} {r} {10 - r} myrun\n' for q in qids for r, d in enumerate(docs)))


@pytest.mark.slow
def test_cli_study_over_two_collections_with_a_run_writes_the_papers_table_and_figures(tiny, tmp_path, monkeypatch,
                                                                                       capsys):
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    write_run(tmp_path / 'run.txt', ['q1', 'q2', 'q5'], ['d3', 'd1', 'd2', 'd4'])
    out = tmp_path / 'study'
    assert cli.main(['study', '--dataset', 'irds:pu-test/tiny/a', 'irds:pu-test/tiny/b', '--labels', '2,3', '3',
                     '--queries', '0', '-k', '1', '2', '--systems', 'BM25', 'Rel', 'NRel',
                     '--run', f'myrun={tmp_path / "run.txt"}',
                     '--fig4-k', '2', '--out', str(out)]) == 0
    per_query = pd.read_csv(out / 'per_query.csv', dtype={'qid': str})
    assert list(per_query['dataset'].unique()) == ['irds:pu-test/tiny/a', 'irds:pu-test/tiny/b']
    b = per_query[per_query['dataset'] == 'irds:pu-test/tiny/b']
    # Topics kept when answerable under the broadest label set: b's queries without a label-3
    # document count in the {2,3} column and are NaN in the {3} column.
    assert sorted(b['qid'].unique()) == ['q5', 'q6', 'q7', 'q8', 'q9']
    narrow = b[(b['labels'] == 'label>=3') & b['qid'].isin(['q6', 'q8'])]
    assert narrow['utility'].isna().all() and len(narrow)
    assert set(per_query['system']) == {'BM25', 'BM25-r', 'Rel', 'NRel', 'myrun', 'myrun-r'}
    assert set(b.loc[b['system'] == 'myrun', 'qid']) == {'q5', 'q6', 'q7', 'q8', 'q9'}
    paper = (out / 'table1_paper.md').read_text()
    assert ('| Dataset | System | label in {2,3}, 0-shot | label in {2,3}, k=1 | label in {2,3}, k=2 '
            '| label>=3, 0-shot | label>=3, k=1 | label>=3, k=2 |') in paper
    assert paper.count('| irds:pu-test/tiny/') == 2
    tex = (out / 'table1.tex').read_text()
    for piece in ('\\toprule', '\\cmidrule(lr){3-5}\\cmidrule(lr){6-8}', '\\midrule', '\\bottomrule',
                  'label in \\{2,3\\}', 'irds:pu-test/tiny/a'):
        assert piece in tex
    for name in ('fig3_utility_vs_k', 'fig4_ndcg_vs_utility_k2', 'fig5_pearson_vs_k'):
        assert (out / f'{name}.png').read_bytes()[:4] == b'\x89PNG'
        assert (out / f'{name}.pdf').read_bytes()[:4] == b'%PDF'
    printed = capsys.readouterr().out
    assert '| Dataset | System | label in {2,3}, 0-shot |' in printed

    # The report command rebuilds the same tables from per_query.csv, generating nothing.
    again = tmp_path / 'report'
    assert cli.main(['report', str(out), '--out', str(again), '--fig4-k', '2']) == 0
    for name in ('table1.csv', 'table1.md', 'table1_paper.md', 'table1.tex', 'correlations.csv'):
        assert (again / name).read_text() == (out / name).read_text(), name


def test_rel_samples_from_its_own_labels_whatever_the_order_of_the_label_sets(tiny, tmp_path, monkeypatch):
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    answers = {}
    for order in (['2', '3'], ['3', '2']):
        out = tmp_path / '-'.join(order)
        cli.main(['study', '--dataset', 'irds:pu-test/tiny/b', '--labels', *order, '-k', '2', '--systems', 'Rel',
                  '--queries', '0', '--out', str(out)])
        frame = pd.read_csv(out / 'answers.csv', dtype={'qid': str})
        answers[tuple(order)] = frame[frame['system'] == 'Rel'].sort_values('qid')['qanswer'].tolist()
    assert answers[('2', '3')] == answers[('3', '2')]


def test_ndcg_of_reversed_systems_in_retrieval_order_equals_the_unreversed(minilm):
    import pyterrier as pt
    topics = pd.DataFrame({'qid': ['q1'], 'query': ['lift']})
    qrels = pd.DataFrame({'qid': ['q1'] * 3, 'docno': ['a', 'b', 'c'], 'label': [3, 1, 0]})
    ranking = pd.DataFrame({'qid': ['q1'] * 3, 'query': ['lift'] * 3, 'docno': ['a', 'b', 'c'], 'text': ['A', 'B', 'C'],
                            'rank': [0, 1, 2], 'score': [3.0, 2.0, 1.0]})
    ndcg = {}
    for order in ('context', 'retrieval'):
        results = ex.run_study(topics, qrels, {'S': pt.Transformer.from_df(ranking)}, pu.Reader(CountingBackend()),
                               {'a': 'A', 'b': 'B', 'c': 'C'}, ks=[3], label_sets=[2], reverse=['S'],
                               bertscore=minilm, ndcg_order=order, verbose=False)
        ndcg[order] = results.per_query.set_index('system')['ndcg']
    assert ndcg['context']['S-r'] < ndcg['context']['S'] == ndcg['retrieval']['S'] == ndcg['retrieval']['S-r']


def test_holm_correction_is_statsmodels_on_each_family():
    from statsmodels.stats.multitest import multipletests
    rng = np.random.default_rng(0)
    rows = []
    for system, shift in (('Rel', 0), ('A', 0.05), ('B', 0.2), ('C', 0.02)):
        for i in range(12):
            rows.append(('label>=2', system, 5, f'q{i}', 0.5, 0.2 + shift + rng.normal(0, 0.1) + i * 0.01))
    per_query = pd.DataFrame(rows, columns=['labels', 'system', 'k', 'qid', 'quality_0shot', 'utility'])
    raw = ex.table1(per_query).set_index('system')['p_baseline']
    holm = ex.table1(per_query, correction='holm').set_index('system')['p_baseline']
    expected = multipletests(raw[['A', 'B', 'C']].to_numpy(), method='holm')[1]
    assert holm[['A', 'B', 'C']].to_numpy() == pytest.approx(expected)
    assert math.isnan(holm['Rel'])


def test_a_trec_run_file_is_a_reversible_system(tmp_path):
    write_run(tmp_path / 'run.txt', ['1'], ['5', '2', '9'])
    texts = {'5': 'five', '2': 'two', '9': 'nine'}
    run = pu.RunFile(tmp_path / 'run.txt', texts)
    out = (run % 2 >> pu.ReverseOrder())(pd.DataFrame({'qid': ['1', '7'], 'query': ['x', 'y']}))
    assert list(out['docno']) == ['2', '5'] and list(out['text']) == ['two', 'five']
    with pytest.raises(pu.errors.SettingError, match='does not exist'):
        pu.RunFile(tmp_path / 'nope.txt', texts)


@pytest.fixture(scope='module')
def binary(tmp_path_factory):
    """Registers irds:pu-test/binary: 6 queries judged as MS MARCO dev_small is, one or two documents
    labelled 1 each (and one judged 0), over 40 generated documents."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload
    folder = tmp_path_factory.mktemp('binary')
    rng = np.random.default_rng(7)
    (folder / 'docs.tsv').write_text(''.join(f'p{i}\t{" ".join(rng.choice(WORDS, 12))}\n' for i in range(40)))
    queries = {f'b{i}': ' '.join(rng.choice(WORDS, 3)) for i in range(6)}
    (folder / 'queries.tsv').write_text(''.join(f'{q}\t{t}\n' for q, t in queries.items()))
    lines = [f'{q} 0 p{d} 1\n' for i, q in enumerate(queries) for d in rng.choice(40, 1 + i % 2, replace=False)]
    (folder / 'qrels').write_text(''.join(lines) + 'b0 0 p39 0\n')
    if 'pu-test/binary' not in ir_datasets.registry:
        ir_datasets.registry.register('pu-test/binary', Dataset(
            TsvDocs(LocalDownload(folder / 'docs.tsv'), namespace='pu-test/binary'),
            TsvQueries(LocalDownload(folder / 'queries.tsv')),
            TrecQrels(LocalDownload(folder / 'qrels'), {0: 'not relevant', 1: 'relevant'})))
    return 'irds:pu-test/binary'


def test_the_paper_presets_dev_small_path_on_a_binary_collection(binary, tmp_path, monkeypatch, capsys):
    """The preset's study of a collection judged as dev_small: one label set {1}, BM25, BM25-r,
    Neural, Neural-r (MT5 in the paper), k = 2, 5, 10, 15, no oracles and so no †: Table 1's dev_small
    block, with its own 0-shot FBERT, in Markdown and LaTeX."""
    import json

    from pyterrier_utility import cli
    assert 'irds:msmarco-passage/dev/small' in ex.PRESETS['paper'].datasets
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    out = tmp_path / 'dev'
    # As the docs run dev_small (Reproducing the paper): Table 1's k for the figures too (the paper
    # draws no dev_small figure).
    assert cli.main(['study', '--preset', 'paper', '--dataset', binary, '--bm25', 'pisa', '--neural', 'dense',
                     '--scorer', 'minilm', '--figure-k', '2', '5', '10', '15', '--out', str(out)]) == 0
    printed = capsys.readouterr()
    assert (f'{binary} is judged in two grades (labels [0, 1]): P counts label 1 (one label set, label in {{1}}); '
            'Rel and NRel left out') in printed.err
    assert 'repeat_last_n=64: llama-cpp-python 0.2.75 default' in printed.err
    per_query = pd.read_csv(out / 'per_query.csv', dtype={'qid': str})
    assert set(per_query['labels']) == {'label in {1}'} and sorted(per_query['k'].unique()) == [2, 5, 10, 15]
    assert list(dict.fromkeys(per_query['system'])) == ['BM25', 'BM25-r', 'Neural', 'Neural-r']
    assert per_query['qid'].nunique() == 6 and per_query['utility'].notna().all()
    zero = per_query['quality_0shot'].mean()
    paper = (out / 'table1_paper.md').read_text()
    legend, rows = paper.split('\n\n')
    assert legend.startswith('Mean utility, n = 6 queries; \u2021 differs from its unreversed ordering')
    lines = rows.strip().split('\n')
    assert lines[0] == ('| System | label in {1}, 0-shot | label in {1}, k=2 | label in {1}, k=5 | label in {1}, k=10 '
                        '| label in {1}, k=15 |')
    assert [line.split(' | ')[0] for line in lines[2:]] == ['| BM25', '| BM25-r', '| Neural', '| Neural-r']
    assert lines[2].split(' | ')[1] == f'{zero:.3f}' and '\u2020' not in rows
    table = pd.read_csv(out / 'table1.csv')
    assert table['p_baseline'].isna().all() and table['p_reversal'].notna().any()
    tex = (out / 'table1.tex').read_text()
    assert tex.count('\\multicolumn{5}{c}{label in \\{1\\}}') == 1 and '\\dagger' not in tex.split('\\caption')[1]
    assert 'Neural-r & ' in tex and 'Rel &' not in tex
    settings = json.loads((out / 'settings.json').read_text())
    assert settings['studied_as'] == {binary: {'label_sets': ['label in {1}'],
                                               'systems': ['BM25', 'Neural']}}
    assert settings['decoding_sources']['min_p'].startswith('llama-cpp-python 0.2.75 default')


def test_a_binary_collection_without_the_preset_is_studied_without_oracles_and_says_so(binary, tmp_path,
                                                                                        monkeypatch, capsys):
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    out = tmp_path / 'plain'
    assert cli.main(['study', '--dataset', binary, '--systems', 'BM25', 'Rel', 'NRel', '-k', '1', '2',
                     '--samples', '1', '--queries', '0', '--out', str(out)]) == 0
    assert 'Rel and NRel left out' in capsys.readouterr().err
    per_query = pd.read_csv(out / 'per_query.csv')
    assert set(per_query['labels']) == {'label in {1}'} and set(per_query['system']) == {'BM25', 'BM25-r'}
    with pytest.raises(SystemExit):
        cli.main(['study', '--dataset', binary, '--systems', 'Rel', '--out', str(tmp_path / 'oracles')])
    assert 'judged in two grades (labels [0, 1]): it is studied without the oracles' in capsys.readouterr().err
