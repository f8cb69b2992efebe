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
