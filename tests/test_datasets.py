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
