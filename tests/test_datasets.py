import pandas as pd
import pytest

import pyterrier_utility as pu


def test_topics_are_numbered_in_file_order(cranfield):
    topics = cranfield.get_topics()
    assert len(topics) == 225
    assert list(topics['qid'][:3]) == ['1', '2', '3']
    # the file's third query carries .I 004: ids follow file order, not .I
    assert topics['query'][2] == 'what problems of heat conduction in composite slabs have been solved so far .'
    assert not topics['query'].str.contains('\n').any()


def test_qrels_map_cleverdon_codes_to_graded_labels(cranfield):
    qrels = cranfield.get_qrels()
    assert len(qrels) == 1837
    assert set(qrels['label']) == {0, 1, 2, 3, 4}
    label = qrels.set_index(['qid', 'docno'])['label']
    assert label[('1', '184')] == 3   # code 2, high relevance
    assert label[('1', '12')] == 2    # code 3, useful background
    assert (qrels['label'] == 0).sum() == 225  # one "no interest" (-1) per query
    assert (qrels['label'] == 4).sum() == 128  # code 1, complete answer


def test_corpus_and_texts(cranfield):
    docs = list(cranfield.get_corpus_iter())
    assert len(docs) == 1400
    assert set(docs[0]) == {'docno', 'title', 'text'}
    assert docs[0]['title'] == 'experimental investigation of the aerodynamics of a wing in a slipstream .'
    assert cranfield.texts['471'] == '' and cranfield.texts['995'] == ''
    assert cranfield.texts['1'].startswith('experimental investigation of the aerodynamics')


def test_text_loader_adds_text_and_names_missing_docnos(cranfield):
    frame = pd.DataFrame({'qid': ['1', '1'], 'docno': ['1', '2']})
    out = cranfield.text_loader()(frame)
    assert list(out['text']) == [cranfield.texts['1'], cranfield.texts['2']]
    with pytest.raises(KeyError, match='nope'):
        cranfield.text_loader()(pd.DataFrame({'qid': ['1'], 'docno': ['nope']}))


def test_bm25_retrieves_with_text(cranfield):
    res = cranfield.bm25(num_results=5)(cranfield.get_topics().head(2))
    assert len(res) == 10
    assert {'qid', 'docno', 'score', 'rank', 'text'} <= set(res.columns)
    assert (res['text'] == res['docno'].map(cranfield.texts)).all()


def test_the_package_gives_every_name_of_its_modules_and_the_entry_point_resolves():
    import importlib
    import tomllib
    from pathlib import Path
    defined = {'collection': ['Dataset', 'answerable_topics'],
               'embedded': ['CRANFIELD_LABELS', 'Cranfield', 'UtilityDatasetProvider', 'cranfield'],
               'external': ['PyTerrierDataset'], 'gold': ['GOLD_COLUMNS', 'GoldLike', 'gold_answers'],
               'local': ['LocalDataset'], 'pisa': ['PisaBM25'], 'records': ['read_qrels', 'read_records'],
               'texts': ['LazyTexts', 'TextLoader', 'texts_of']}
    modules = {m: importlib.import_module(f'pyterrier_utility.datasets.{m}') for m in defined}
    assert sorted(pu.datasets.__all__) == sorted(['get_dataset', *(n for names in defined.values() for n in names)])
    assert [(m, n) for m, names in defined.items() for n in names
            if getattr(pu.datasets, n) is not getattr(modules[m], n)] == []
    project = tomllib.loads((Path(__file__).resolve().parents[1] / 'pyproject.toml').read_text())['project']
    module, _, name = project['entry-points']['pyterrier.dataset_provider']['utility'].partition(':')
    assert getattr(importlib.import_module(module), name) is modules['embedded'].UtilityDatasetProvider


def test_get_dataset_default():
    assert isinstance(pu.datasets.get_dataset('cranfield'), pu.datasets.Cranfield)


def _write_collection(folder, docs='tsv'):
    """Ten short documents, three topics, graded qrels: a user's own collection."""
    import json
    folder.mkdir()
    texts = {f'D{i}': f'document {i} about {"aerodynamics" if i < 5 else "thermodynamics"}' for i in range(10)}
    texts['D1'] = 'document 1 about wings and lift: a wing gives lift'
    texts['D6'] = 'document 6 about heat in slabs: heat moves in slabs by conduction'
    if docs == 'tsv':
        (folder / 'docs.tsv').write_text('docno\ttext\n' + ''.join(f'{d}\t{t}\n' for d, t in texts.items()))
    else:
        (folder / 'docs.jsonl').write_text(''.join(json.dumps({'docno': d, 'text': t}) + '\n'
                                                   for d, t in texts.items()))
    (folder / 'topics.tsv').write_text('q1\twhat gives a wing lift\nq2\thow does heat move in slabs\n'
                                       'q3\tnothing judged\n')
    (folder / 'qrels').write_text('q1 0 D1 2\nq1 0 D2 1\nq1 0 D7 0\nq2 0 D6 3\nq2 0 D8 2\nq2 0 D1 0\n')
    return texts


@pytest.mark.parametrize('docs', ['tsv', 'jsonl'])
def test_a_folder_of_files_is_a_collection_like_cranfield(tmp_path, docs):
    texts = _write_collection(tmp_path / 'mine', docs)
    d = pu.datasets.get_dataset(str(tmp_path / 'mine'))
    assert isinstance(d, pu.datasets.LocalDataset) and d.name == 'mine'
    pd.testing.assert_frame_equal(d.get_topics(), pd.DataFrame({
        'qid': ['q1', 'q2', 'q3'],
        'query': ['what gives a wing lift', 'how does heat move in slabs', 'nothing judged']}))
    assert d.get_qrels().values.tolist() == [['q1', 'D1', 2], ['q1', 'D2', 1], ['q1', 'D7', 0],
                                             ['q2', 'D6', 3], ['q2', 'D8', 2], ['q2', 'D1', 0]]
    assert dict(d.texts) == texts
    run = d.bm25(num_results=3)(d.get_topics().head(2))
    assert run.groupby('qid')['docno'].first().to_dict() == {'q1': 'D1', 'q2': 'D6'}
    assert (run['text'] == run['docno'].map(texts)).all()


def test_an_edited_corpus_gets_a_new_index(tmp_path):
    _write_collection(tmp_path / 'mine')
    before = pu.datasets.get_dataset(str(tmp_path / 'mine')).corpus_name
    with open(tmp_path / 'mine' / 'docs.tsv', 'a') as f:
        f.write('D10\ta new document\n')
    assert pu.datasets.get_dataset(str(tmp_path / 'mine')).corpus_name != before


def test_a_folder_without_the_conventional_files_says_which_are_needed(tmp_path):
    from pyterrier_utility.errors import SettingError
    _write_collection(tmp_path / 'mine')
    (tmp_path / 'mine' / 'qrels').rename(tmp_path / 'mine' / 'judgements')
    with pytest.raises(SettingError, match=r"exactly one of \['qrels', 'qrels.txt'\], found none"):
        pu.datasets.get_dataset(str(tmp_path / 'mine'))


def test_rag_datasets_cannot_drive_the_study_and_the_error_says_what_can():
    from pyterrier_utility.errors import SettingError
    with pytest.raises(SettingError, match=r'rag:nq.*gold answers.*irds:.*docs.tsv'):
        pu.datasets.get_dataset('rag:nq')


def test_the_cli_runs_a_study_on_a_folder_of_files(tmp_path, monkeypatch, capsys):
    from support.backends import CountingBackend

    from pyterrier_utility import cli
    _write_collection(tmp_path / 'mine')
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    out = tmp_path / 'out'
    assert cli.main(['study', '--dataset', str(tmp_path / 'mine'), '-k', '1', '--labels', '2',
                     '--systems', 'BM25', 'Rel', 'NRel', '--fig4-k', '1', '--samples', '1', '--out', str(out)]) == 0
    per_query = pd.read_csv(out / 'per_query.csv', dtype={'qid': str})
    assert sorted(set(per_query['qid'])) == ['q1', 'q2']  # q3 has no relevant document
    assert set(per_query['system']) == {'BM25', 'BM25-r', 'Rel', 'NRel'}
    answers = pd.read_csv(out / 'answers.csv', dtype={'qid': str})
    assert answers['qanswer'].str.contains('document 1 about wings').any()


def _collection(folder, docs: bytes, kind='tsv', topics='q1\twhat gives a wing lift\n', qrels='q1 0 D1 2\n'):
    """A folder collection whose documents file holds exactly ``docs`` (and its qrels file ``qrels``, given
    as bytes): the bytes a user's file may have."""
    folder.mkdir()
    (folder / f'docs.{kind}').write_bytes(docs)
    (folder / 'topics.tsv').write_text(topics)
    (folder / 'qrels').write_bytes(qrels if isinstance(qrels, bytes) else qrels.encode())
    return pu.datasets.get_dataset(str(folder))


def _jsonl(*docs) -> bytes:
    import json
    return b''.join(json.dumps(d).encode() + b'\n' for d in docs)


@pytest.mark.parametrize('kind', ['tsv', 'jsonl'])
def test_a_document_longer_than_the_csv_field_limit_is_read_whole(tmp_path, kind):
    long = 'lift ' * 60_000 + 'end'  # 300003 characters, beyond csv's 131072
    docs = {'D1': 'short', 'D2': long, 'D3': 'after the long one'}
    raw = (b''.join(f'{d}\t{t}\n'.encode() for d, t in docs.items()) if kind == 'tsv' else
           _jsonl(*({'docno': d, 'text': t} for d, t in docs.items())))
    d = _collection(tmp_path / 'c', raw, kind)
    assert dict(d.texts) == docs and len(d.texts['D2']) == 300_003
    assert [doc['docno'] for doc in d.get_corpus_iter()] == ['D1', 'D2', 'D3']


def test_texts_keep_every_character_the_format_can_carry(tmp_path):
    odd = 'nul \x00 rtl \u200f\u05e9\u05dc\u05d5\u05dd emoji \U0001F600 \u00e9 bare cr \r end'
    tsv = _collection(tmp_path / 't', b'\xef\xbb\xbfdocno\ttext\r\nD1\t' + odd.encode() + b'\r\nD2\t\nD3\tlast', 'tsv')
    assert dict(tsv.texts) == {'D1': odd, 'D2': '', 'D3': 'last'}  # BOM, header and CR LF are not text
    jsonl = _collection(tmp_path / 'j', _jsonl({'docno': 'D1', 'text': odd + '\ttab\r\nnewline'},
                                               {'docno': 7, 'text': ''}), 'jsonl')
    assert dict(jsonl.texts) == {'D1': odd + '\ttab\r\nnewline', '7': ''}


def test_a_lone_surrogate_is_refused_naming_file_line_and_docno(tmp_path):
    from pyterrier_utility.errors import SettingError
    raw = b'{"docno": "D1", "text": "fine"}\n\n{"docno": "D2", "text": "half a pair \\ud83d here"}\n'
    d = _collection(tmp_path / 'c', raw, 'jsonl')
    with pytest.raises(SettingError) as e:
        list(d.get_corpus_iter())
    assert str(e.value) == (f'{tmp_path / "c" / "docs.jsonl"} line 3, docno D2: text holds a lone UTF-16 surrogate '
                            '(\\ud83d), which is not a character: no tokenizer, cache or file can take it')


def test_a_docno_given_two_texts_is_refused_and_an_identical_repeat_is_read_once(tmp_path):
    from pyterrier_utility.errors import SettingError
    d = _collection(tmp_path / 'a', b'D1\tone\nD2\ttwo\nD1\tone\nD3\tthree\n')
    assert dict(d.texts) == {'D1': 'one', 'D2': 'two', 'D3': 'three'}
    assert [doc['docno'] for doc in d.get_corpus_iter()] == ['D1', 'D2', 'D3']
    d = _collection(tmp_path / 'b', b'D1\tone\nD2\ttwo\nD1\tanother text\n')
    with pytest.raises(SettingError) as e:
        d.texts
    assert str(e.value) == (f'{tmp_path / "b" / "docs.tsv"} line 3: docno D1 again, with a text different from '
                            'that of line 1')


@pytest.mark.parametrize('kind, raw, message', [
    ('tsv', b'D1\tfine\nD2\tbad \xff byte\nD3\tfine\n',
     'line 2, docno D2: bytes that are not UTF-8 (0xff at byte 8); save the file as UTF-8'),
    ('jsonl', b'{"docno": "D1", "text": "fine"}\n{"docno": "D2", "text": "bad \xe9t\xe9"}\n',
     'line 2, docno D2: bytes that are not UTF-8 (0xe9 at byte 30); save the file as UTF-8'),
    ('tsv', b'D1\tone\nD2\nD3\tthree\n', 'line 2: 1 field, expected 2 (docno<TAB>text)'),
    ('tsv', b'D1\tone\nD2\ttwo\tmore\n', 'line 2: 3 fields, expected 2 (docno<TAB>text)'),
    ('tsv', b'D1\tone\n\ttwo\n', 'line 2: empty docno'),
    ('jsonl', b'{"docno": "D1", "text": "one"}\n{"docno": "D2", "text": "tw\n', 'line 2: not a JSON object '
              '(Unterminated string starting at: column 25)'),
    ('jsonl', b'{"docno": "D1", "body": "one"}\n', 'line 1: a document needs "docno" and "text", has [\'body\', '
              '\'docno\']'),
    ('jsonl', b'{"docno": "D1", "text": null}\n', 'line 1, docno D1: text is null, not a string'),
    ('tsv', b'D1\tone\nAB 12\ttwo\n', "line 2: docno 'AB 12' holds white space, where the BM25 index (PISA) and TREC "
                                      'runs and qrels cut it; give docnos without white space'),
    ('jsonl', b'{"docno": "D1", "text": "one"}\n{"docno": "AB\\t12", "text": "two"}\n',
     "line 2: docno 'AB\\t12' holds white space, where the BM25 index (PISA) and TREC runs and qrels cut it; give "
     'docnos without white space'),
])
def test_a_faulty_line_is_refused_naming_file_line_and_docno(tmp_path, kind, raw, message):
    from pyterrier_utility.errors import SettingError
    d = _collection(tmp_path / 'c', raw, kind)
    with pytest.raises(SettingError) as e:
        d.texts
    assert str(e.value) == f'{tmp_path / "c" / f"docs.{kind}"} {message}'


@pytest.mark.parametrize('file, raw, message', [
    ('topics.tsv', 'q1\tlift\nq2 what is drag\n', 'line 2: 1 field, expected 2 (qid<TAB>query)'),
    ('topics.tsv', 'Q 1\tlift\n', "line 1: qid 'Q 1' holds white space, where TREC runs and qrels cut it; give qids "
                                  'without white space'),
    ('qrels', 'q1 0 D1 2\nq1 0 D2 extra 2\n', 'line 2: 5 fields, expected 4 (qid 0 docno label, separated by white '
                                             'space)'),
    ('qrels', 'q1 0 D1 2\nq1 0 D2\n', 'line 2: 3 fields, expected 4 (qid 0 docno label, separated by white space)'),
    ('qrels', 'q1 0 D1 2\nq1 0 D2 high\n', "line 2, qid q1 docno D2: label 'high' is not an integer"),
    ('qrels', 'q1 0 D1 2.0\n', "line 1, qid q1 docno D1: label '2.0' is not an integer"),
    ('qrels', '# judged by hand\nq1 0 D1 2\n', 'line 1: a comment, which TREC qrels cannot hold (trec_eval reads '
                                              'every line as a judgement); remove it'),
    ('qrels', 'q1 0 D1 2\nq1 0 D2 \xb2\n'.encode('latin-1'), 'line 2, qid q1 docno D2: bytes that are not UTF-8 (0xb2 '
                                                              'at byte 9); save the file as UTF-8'),
])
def test_a_faulty_topics_or_qrels_line_is_refused_naming_file_and_line(tmp_path, file, raw, message):
    from pyterrier_utility.errors import SettingError
    topics = file == 'topics.tsv'
    d = _collection(tmp_path / 'c', b'D1\tone\nD2\ttwo\n', **{'topics' if topics else 'qrels': raw})
    with pytest.raises(SettingError) as e:
        d.get_topics() if topics else d.get_qrels()
    assert str(e.value) == f'{tmp_path / "c" / file} {message}'


def test_qrels_are_read_by_white_space_with_blank_lines_skipped(tmp_path):
    qrels = '\ufeffq1 0 D1 2\r\n\n   \nq1\tQ0\tD2  -1\nq2 0 D1 +3\n'  # a BOM, CR LF, blank lines, tabs, signs
    d = _collection(tmp_path / 'c', b'D1\tone\nD2\ttwo\n', qrels=qrels)
    qrels = d.get_qrels()
    assert qrels.values.tolist() == [['q1', 'D1', 2], ['q1', 'D2', -1], ['q2', 'D1', 3]]
    assert qrels['label'].dtype.kind == 'i'


def test_topics_without_a_question_are_skipped_and_named(tmp_path):
    d = _collection(tmp_path / 'c', b'D1\tone\n', topics='q1\twhat gives a wing lift\nq2\t   \nq3\t\nq4\tdrag\n')
    with pytest.warns(UserWarning) as caught:
        topics = d.get_topics()
    assert topics.values.tolist() == [['q1', 'what gives a wing lift'], ['q4', 'drag']]
    assert [str(w.message) for w in caught] == [f'{tmp_path / "c" / "topics.tsv"}: topics with an empty query '
                                                'skipped: qid q2, q3']
    assert caught[0].filename == __file__  # the user's line, not the cached property's


def test_judgements_of_documents_not_in_the_collection_are_dropped_and_named(tmp_path):
    d = _collection(tmp_path / 'c', b'D1\tone\nD2\ttwo\n', topics='q1\tlift\nq2\tdrag\n',
                    qrels='q1 0 D1 2\nq1 0 D9 3\nq2 0 D8 2\nq2 0 D2 1\nq2 0 D7 0\n')
    with pytest.warns(UserWarning) as caught:
        qrels = d.get_qrels()
    assert qrels.values.tolist() == [['q1', 'D1', 2], ['q2', 'D2', 1]]
    assert [str(w.message) for w in caught] == [
        f'{tmp_path / "c" / "qrels"}: 3 judgements of documents not in {tmp_path / "c" / "docs.tsv"} dropped: '
        'qid q1 docno D9, qid q2 docno D8, qid q2 docno D7']
    assert caught[0].filename == __file__
    with pytest.warns(UserWarning, match='found no relevant document to sample: qid q2$'):  # D9, D8 absent
        rel = pu.OracleSampler(qrels, d.texts, labels=2, num_results=5)(d.get_topics())
    assert rel[['qid', 'docno', 'text']].values.tolist() == [['q1', 'D1', 'one']]
    with pytest.warns(UserWarning, match='found no non-relevant document to sample: qid q1, q2$'):  # D7 absent
        nrel = pu.OracleSampler(qrels, d.texts, relevant=False, num_results=5)(d.get_topics())
    assert nrel.empty


def test_qrels_that_judge_none_of_the_documents_are_refused(tmp_path):
    from pyterrier_utility.errors import SettingError
    d = _collection(tmp_path / 'c', b'1\tone\n2\ttwo\n', qrels='q1 0 D1 2\nq1 0 D2 0\n')
    with pytest.raises(SettingError) as e:
        d.get_qrels()
    assert str(e.value) == (f'{tmp_path / "c" / "qrels"}: none of its 2 judged documents is in '
                            f'{tmp_path / "c" / "docs.tsv"} (it judges docno D1, D2; the collection has 1, 2): '
                            'do the docnos match?')


@pytest.mark.parametrize('kind, raw, message', [
    ('jsonl', b'{"docno": "D1", "text": "one"}\n{"docno": "D2", "text": "\\udc00"}\n',
     'line 2, docno D2: text holds a lone UTF-16 surrogate (\\udc00), which is not a character: no tokenizer, cache or '
     'file can take it'),
    ('tsv', b'D1\twings give lift\nAB 12\tlift of a wing\n', "line 2: docno 'AB 12' holds white space, where the BM25 "
                                                           'index (PISA) and TREC runs and qrels cut it; give docnos '
                                                           'without white space'),
])
def test_the_cli_stops_in_one_line_naming_the_line_at_fault_before_indexing_or_generating(kind, raw, message, tmp_path,
                                                                                          monkeypatch, capsys):
    from pyterrier_utility import cli
    monkeypatch.setenv('PYTERRIER_UTILITY_CACHE', str(tmp_path / 'cache'))
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: pytest.fail(f'a reader was built ({spec})'))
    _collection(tmp_path / 'c', raw, kind)
    with pytest.raises(SystemExit) as e:
        cli.main(['study', '--dataset', str(tmp_path / 'c'), '-k', '1', '--labels', '2', '--systems', 'BM25', '--out',
                  str(tmp_path / 'out')])
    assert e.value.code == 2
    assert capsys.readouterr().err == f'pyterrier-utility study: error: {tmp_path / "c" / f"docs.{kind}"} {message}\n'
    assert not (tmp_path / 'cache' / 'indices').exists() and not (tmp_path / 'out' / 'answers.csv').exists()


def test_an_index_is_published_whole_with_what_bm25_writes_on_first_retrieval(tmp_path, monkeypatch):
    # Readers of a shared cache only read: PISA's compressed BM25 index, which the first retrieval
    # would write into the folder (two processes writing it at once crashed PISA), is already there.
    monkeypatch.setenv('PYTERRIER_UTILITY_CACHE', str(tmp_path / 'cache'))
    _write_collection(tmp_path / 'mine')
    d = pu.datasets.get_dataset(str(tmp_path / 'mine'))
    folder = d.pisa_index().path
    assert folder.parent == tmp_path / 'cache' / 'indices'
    assert sorted(p.name for p in folder.parent.iterdir()) == [f'.{folder.name}.lock', folder.name]
    before = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    assert {'pt_meta.json', 'bm25.k1-0.9.b-0.4.q0.bmw.64', 'bm25.k1-0.9.b-0.4.q0.bmw.64.block_simdbp'} <= set(before)
    run = d.bm25(num_results=3)(d.get_topics().head(2))
    assert run.groupby('qid')['docno'].first().to_dict() == {'q1': 'D1', 'q2': 'D6'}
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == before


def test_an_index_folder_holding_something_else_is_refused_not_overwritten(tmp_path):
    from pyterrier_utility.errors import SettingError
    _write_collection(tmp_path / 'mine')
    (tmp_path / 'notes').mkdir()
    (tmp_path / 'notes' / 'todo.txt').write_text('mine')
    d = pu.datasets.get_dataset(str(tmp_path / 'mine'))
    with pytest.raises(SettingError, match='notes is neither a PISA index nor an empty folder'):
        d.bm25(index=str(tmp_path / 'notes'))
    assert [p.name for p in (tmp_path / 'notes').iterdir()] == ['todo.txt']
    run = d.bm25(num_results=3, index=str(tmp_path / 'new'))(d.get_topics().head(1))
    assert run['docno'].tolist()[0] == 'D1' and (tmp_path / 'new' / 'pt_meta.json').exists()
