import numpy as np
import pandas as pd
import pytest
from bert_score import BERTScorer

from pyterrier_utility import BertScore, FBertScorer
from pyterrier_utility.rerankers import minilm_path

ANSWERS = ['the lift of a wing in a slipstream increases', 'heat conduction in slabs',
           'a sigmet is a weather advisory', 'wing']


@pytest.fixture(scope='module')
def reference():
    return BERTScorer(model_type=minilm_path(), num_layers=6)


def test_f1_matrix_equals_bert_score(minilm, cranfield, reference):
    docs = [cranfield.texts[d] for d in ['1', '12', '51', '184']]
    ours = minilm.f1_matrix(ANSWERS, docs)
    for i, a in enumerate(ANSWERS):
        _, _, f = reference.score([a] * len(docs), docs)
        np.testing.assert_allclose(ours[i], f.numpy(), atol=1e-5)


def test_idf_weighting_equals_bert_score(cranfield):
    docs = [cranfield.texts[d] for d in ['1', '12', '51', '184', '29']]
    ours = BertScore('minilm', idf=True, idf_sents=docs).f1_matrix(ANSWERS, docs)
    ref = BERTScorer(model_type=minilm_path(), num_layers=6, idf=True, idf_sents=docs)
    for i, a in enumerate(ANSWERS):
        _, _, f = ref.score([a] * len(docs), docs)
        np.testing.assert_allclose(ours[i], f.numpy(), atol=1e-5)


def test_a_score_is_the_same_bits_whatever_else_is_scored_or_encoded_beside_it(cranfield):
    """Each pair's P, R and F1 scored alone, by a scorer that has encoded nothing else, equal to the bit
    their values among other answers and documents of other lengths, encoded together first."""
    docs = [cranfield.texts[d] for d in ['1', '12', '51', '184']]
    answers = ANSWERS + ['a much longer answer about the boundary layer of a flat plate in a supersonic flow ' * 3]
    together = BertScore('minilm', batch_size=3).matrices(answers, docs)
    for i in (0, 3):
        for j in (1, 2):
            alone = BertScore('minilm').matrices([answers[i]], [docs[j]])
            for name in ('P', 'R', 'F1'):
                assert alone[name][0, 0] == together[name][i, j], (name, i, j)


def test_texts_are_encoded_once(cranfield):
    scorer = BertScore('minilm')
    docs = [cranfield.texts[d] for d in ['1', '12']]
    scorer.f1_matrix(ANSWERS, docs)
    scorer.f1_matrix(ANSWERS[:2], docs)
    assert scorer.encoded == len(ANSWERS) + 2


def test_fbert_is_max_over_relevant_documents(minilm, cranfield, reference):
    qrels = cranfield.get_qrels()
    scorer = FBertScorer(qrels, cranfield.texts, labels={3, 4}, model_type=minilm)
    rel = qrels[(qrels.qid == '1') & qrels.label.isin([3, 4])]['docno'].tolist()
    frame = pd.DataFrame({'qid': ['1', '1'], 'docno': ['x', 'y'], 'qanswer': [ANSWERS[0]] * 2})
    out = scorer(frame)
    docs = [cranfield.texts[d] for d in rel]
    _, _, f = reference.score([ANSWERS[0]] * len(docs), docs)
    assert out['fbert'].tolist() == pytest.approx([f.max().item()] * 2, abs=1e-5)
    assert list(out.columns) == ['qid', 'docno', 'qanswer', 'fbert']


def test_unjudged_and_unanswerable_queries_are_nan_with_warning(minilm):
    qrels = pd.DataFrame([('q1', 'd1', 2), ('q2', 'd2', 0)], columns=['qid', 'docno', 'label'])
    scorer = FBertScorer(qrels, {'d1': 'lift of wings', 'd2': 'other'}, model_type=minilm)
    with pytest.warns(UserWarning) as record:
        out = scorer.score(['q1', 'q2', 'q3'], ['wings lift', 'x', 'y'])
    messages = ' '.join(str(w.message) for w in record)
    assert 'q2' in messages and 'q3' in messages and 'no relevant document' in messages
    assert out[0] > 0 and np.isnan(out[1]) and np.isnan(out[2])


def test_empty_answer_scores_zero_with_warning(minilm):
    qrels = pd.DataFrame([('q1', 'd1', 2)], columns=['qid', 'docno', 'label'])
    scorer = FBertScorer(qrels, {'d1': 'lift of wings'}, model_type=minilm)
    with pytest.warns(UserWarning, match='empty answer'):
        assert scorer.score(['q1'], ['  ']).tolist() == [0.0]


def test_missing_relevant_text_is_named():
    qrels = pd.DataFrame([('q1', 'd1', 2)], columns=['qid', 'docno', 'label'])
    with pytest.raises(KeyError, match='d1'):
        FBertScorer(qrels, {}, model_type='minilm')


def test_disk_cache_reloads_identical_embeddings(tmp_path, cranfield):
    docs = [cranfield.texts['1']]
    first = BertScore('minilm', cache_path=tmp_path / 'emb.sqlite')
    a = first.f1_matrix(ANSWERS, docs)
    second = BertScore('minilm', cache_path=tmp_path / 'emb.sqlite')
    b = second.f1_matrix(ANSWERS, docs)
    assert second.encoded == 0
    np.testing.assert_array_equal(a, b)


def test_progress_counts_the_texts_encoded_when_verbose(cranfield, capsys):
    scorer = BertScore('minilm', verbose=True)
    scorer.embed(['one text', 'another text', 'one text'])
    err = capsys.readouterr().err
    assert 'texts encoded: 100%' in err and '2/2' in err and 'text/s' in err
    scorer.embed(['one text', 'a third'], verbose=False)
    assert capsys.readouterr().err == ''
    assert scorer.encoded == 3


def test_a_pickled_scorer_holds_the_model_name_not_its_weights(cranfield, minilm):
    import pickle
    scorer = FBertScorer(cranfield.get_qrels(), cranfield.texts, labels=2, model_type=minilm)
    data = pickle.dumps(scorer)
    assert len(data) < 5e6  # 93 MB with the MiniLM weights
    copy = pickle.loads(data)
    assert copy.bertscore.model_type == minilm.model_type
    answers = ['the lift of a wing in a slipstream increases', 'heat conduction in slabs']
    assert copy.score(['1', '2'], answers).tolist() == pytest.approx(scorer.score(['1', '2'], answers).tolist(),
                                                                     abs=1e-6)


def test_precision_and_recall_matrices_equal_bert_score(minilm, cranfield, reference):
    docs = [cranfield.texts[d] for d in ['1', '12', '51']]
    ours = minilm.matrices(ANSWERS, docs)
    for i, a in enumerate(ANSWERS):
        p, r, f = reference.score([a] * len(docs), docs)
        for name, theirs in (('P', p), ('R', r), ('F1', f)):
            np.testing.assert_allclose(ours[name][i], theirs.numpy(), atol=1e-5, err_msg=name)


@pytest.mark.parametrize('submeasure, agg', [('P', 'max'), ('R', 'max'), ('F1', 'mean'), ('R', 'mean')])
def test_fbert_submeasure_and_aggregation_equal_bert_score(minilm, cranfield, reference, submeasure, agg):
    qrels = cranfield.get_qrels()
    scorer = FBertScorer(qrels, cranfield.texts, labels={3, 4}, model_type=minilm, submeasure=submeasure, agg=agg)
    rel = qrels[(qrels.qid == '1') & qrels.label.isin([3, 4])]['docno'].tolist()
    docs = [cranfield.texts[d] for d in rel]
    p, r, f = reference.score([ANSWERS[0]] * len(docs), docs)
    theirs = {'P': p, 'R': r, 'F1': f}[submeasure].numpy()
    scores, best = scorer.score_with_reference(['1'], [ANSWERS[0]])
    assert scores[0] == pytest.approx(theirs.max() if agg == 'max' else theirs.mean(), abs=1e-5)
    assert best == ([rel[int(theirs.argmax())]] if agg == 'max' else [None])
    assert repr(scorer) == (f"FBertScorer('{minilm_path()}@L6', label in {{3,4}}, submeasure={submeasure!r}, "
                            f"agg={agg!r})")
    assert scorer.measure == f'FBERT({submeasure}, {agg})'


def test_default_fbert_is_max_f1_and_unknown_submeasures_are_refused(minilm):
    from pyterrier_utility.errors import SettingError
    qrels = pd.DataFrame([('q1', 'd1', 2), ('q1', 'd2', 2)], columns=['qid', 'docno', 'label'])
    texts = {'d1': 'lift of wings', 'd2': 'heat transfer in slabs'}
    default = FBertScorer(qrels, texts, model_type=minilm)
    assert default.measure == 'FBERT' and "submeasure='F1', agg='max'" in repr(default)
    assert default.score(['q1'], ['wings lift'])[0] == pytest.approx(
        minilm.f1_matrix(['wings lift'], list(texts.values())).max())
    for bad in (dict(submeasure='f1'), dict(agg='min')):
        with pytest.raises(SettingError, match='FBertScorer'):
            FBertScorer(qrels, texts, model_type=minilm, **bad)
