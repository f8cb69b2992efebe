
import ir_measures
import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from support.backends import CountingBackend, FirstContextBackend

import pyterrier_utility as pu
from pyterrier_utility import ERAGLabeller, FBertScorer, Reader, erag_measure
from pyterrier_utility.errors import SettingError

TEXTS = {'d1': 'Paris', 'd2': 'the capital is London', 'd3': 'Rome, maybe', 'd4': 'lift acts upward on a wing'}
QRELS = pd.DataFrame({'qid': ['q1', 'q1', 'q2'], 'docno': ['d1', 'd2', 'd4'], 'label': [2, 0, 2]})


def ranking(rows, extra=None):
    frame = pd.DataFrame(rows, columns=['qid', 'docno'])
    frame['query'] = frame['qid'].map({'q1': 'capital of France?', 'q2': 'what is lift?'})
    frame['text'] = frame['docno'].map(TEXTS)
    frame['rank'] = frame.groupby('qid').cumcount()
    frame['score'] = 10.0 - frame['rank']
    return frame.assign(**(extra or {}))


def test_labels_are_scores_of_single_document_answers(minilm):
    backend = FirstContextBackend()
    reader = Reader(backend)
    scorer = FBertScorer(QRELS, TEXTS, labels=2, model_type=minilm)
    out = ERAGLabeller(reader, scorer)(ranking([('q1', 'd2'), ('q1', 'd1'), ('q2', 'd4'), ('q2', 'd3')]))
    assert list(out['erag_answer']) == ['the capital is London', 'Paris', 'lift acts upward on a wing', 'Rome, maybe']
    expected = scorer.score(['q1', 'q1', 'q2', 'q2'], list(out['erag_answer']))
    assert np.allclose(out['erag_label'], expected)
    assert out['erag_label'].iloc[1] == pytest.approx(1.0, abs=1e-5)  # the relevant document itself
    assert len(backend.calls) == 4
    # A single-document prompt is the k=1 prompt: the reader does not generate it again.
    reader(ranking([('q1', 'd2')]))
    assert len(backend.calls) == 4


def test_gold_answer_labels_exact_match_and_f1():
    golds = {'gold_answer': [['Paris'], ['Paris'], ['lift', 'upward force']]}
    frame = ranking([('q1', 'd1'), ('q1', 'd2'), ('q2', 'd4')], golds)
    em = ERAGLabeller(Reader(FirstContextBackend()), metric='em')(frame)
    assert list(em['erag_label']) == [1.0, 0.0, 0.0]
    f1 = ERAGLabeller(Reader(FirstContextBackend()), metric='f1')(frame)
    # 'lift acts upward on wing' (article removed): vs 'lift' P=1/5, R=1; vs 'upward force' P=1/5, R=1/2.
    def f1_of(p, r):
        return 2 * p * r / (p + r)
    assert list(f1['erag_label']) == pytest.approx([1.0, 0.0, max(f1_of(1 / 5, 1), f1_of(1 / 5, 1 / 2))])
    with pytest.raises(Exception, match="input has no column 'gold_answer'"):
        ERAGLabeller(Reader(FirstContextBackend()), metric='em')(frame.drop(columns=['gold_answer']))


def test_labels_average_over_samples(minilm):
    reader = Reader(CountingBackend(), n_samples=3)
    scorer = FBertScorer(QRELS, TEXTS, labels=2, model_type=minilm)
    out = ERAGLabeller(reader, scorer)(ranking([('q1', 'd1')]))
    answers = [f'Paris (seed {s}, 1 contexts)' for s in range(3)]
    assert out['erag_label'].iloc[0] == pytest.approx(scorer.score(['q1'] * 3, answers).mean())


LABELLED = pd.DataFrame({
    'qid': ['a'] * 5 + ['b'] * 3 + ['c'] * 2,
    'docno': [f'x{i}' for i in range(10)],
    'score': [5, 4, 3, 2, 1, 3, 2, 1, 2, 1.0],
    'erag_label': [0.2, 0.9, 0.1, 0.7, 0.6, 0.3, 0.1, 0.2, 0.8, 0.9],
})


@pytest.mark.parametrize('name,reference', [('P', ir_measures.P), ('R', ir_measures.R), ('MAP', ir_measures.AP),
                                            ('MRR', ir_measures.RR), ('nDCG', ir_measures.nDCG),
                                            ('Hit', ir_measures.Success)])
@pytest.mark.parametrize('cutoff', [2, 3])
def test_binary_aggregations_match_ir_measures(name, reference, cutoff):
    threshold = 0.5
    # Independent: the labelled ranking as qrels (label >= threshold relevant) for trec_eval's measures.
    qrels = LABELLED.assign(relevance=(LABELLED['erag_label'] >= threshold).astype(int))
    qrels = qrels.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})[['query_id', 'doc_id', 'relevance']]
    run = LABELLED.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})
    expected = {m.query_id: m.value for m in ir_measures.iter_calc([reference @ cutoff], qrels, run)}
    ours = {m.query_id: m.value for m in ir_measures.iter_calc([erag_measure(name, threshold) @ cutoff], qrels, run)}
    assert ours == pytest.approx(expected)


def test_continuous_aggregations():
    run = LABELLED.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})
    qrels = pd.DataFrame({'query_id': ['a', 'b', 'c'], 'doc_id': ['x0', 'x5', 'x8'], 'relevance': [1, 1, 1]})
    def values(m):
        return {x.query_id: x.value for x in ir_measures.iter_calc([m], qrels, run)}
    assert values(pu.ERAG_P @ 3) == pytest.approx({'a': 0.4, 'b': 0.2, 'c': 1.7 / 3})  # c has 2 documents: over k
    assert values(pu.ERAG_Hit @ 3) == pytest.approx({'a': 0.9, 'b': 0.3, 'c': 0.9})
    # Gains 0.2, 0.9 against the best order of a's labels, 0.9, 0.7.
    disc = 1 / np.log2([2, 3])
    assert values(erag_measure('nDCG') @ 2)['a'] == pytest.approx((0.2 + 0.9 * disc[1]) / (0.9 + 0.7 * disc[1]))
    with pytest.raises(SettingError, match='needs binary labels'):
        erag_measure('MAP')


def test_erag_measures_in_experiment_next_to_ndcg():
    rows = LABELLED.assign(query=LABELLED['qid'])
    topics = pd.DataFrame({'qid': ['a', 'b', 'c'], 'query': ['a', 'b', 'c']})
    qrels = pd.DataFrame({'qid': ['a', 'b', 'c'], 'docno': ['x1', 'x5', 'x9'], 'label': [1, 1, 1]})
    res = pt.Experiment([pt.Transformer.from_df(rows)], topics, qrels,
                        [ir_measures.nDCG @ 3, pu.ERAG_P @ 3, erag_measure('MRR', 0.5) @ 3], names=['s'])
    assert res['eRAG_P@3'][0] == pytest.approx((0.4 + 0.2 + 1.7 / 3) / 3)
    assert res['eRAG_MRR(t=0.5)@3'][0] == pytest.approx((1 / 2 + 0 + 1) / 3)


def test_continuous_precision_on_zero_one_labels_is_trec_evals_precision_even_for_short_rankings():
    short = LABELLED.assign(erag_label=(LABELLED['erag_label'] >= 0.5).astype(float))
    run = short.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})
    qrels = short.rename(columns={'qid': 'query_id', 'docno': 'doc_id', 'erag_label': 'relevance'})
    qrels = qrels.astype({'relevance': int})[['query_id', 'doc_id', 'relevance']]
    for cutoff in (3, 5):
        expected = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.P @ cutoff], qrels, run)}
        ours = {m.query_id: m.value for m in ir_measures.iter_calc([pu.ERAG_P @ cutoff], qrels, run)}
        assert ours == pytest.approx(expected)


def test_samples_of_a_reader_output_label_each_document_once_with_the_mean_over_samples(minilm):
    reader = Reader(CountingBackend(), n_samples=2)
    scorer = FBertScorer(QRELS, TEXTS, labels=2, model_type=minilm)
    answered = reader(ranking([('q1', 'd1'), ('q1', 'd2')]))
    assert len(answered) == 4
    out = ERAGLabeller(reader, scorer)(answered)
    assert list(out['docno']) == ['d1', 'd2'] and 'sample' not in out.columns
    by_hand = [scorer.score(['q1'] * 2, [f'{t} (seed {s}, 1 contexts)' for s in (0, 1)]).mean()
               for t in ('Paris', 'the capital is London')]
    assert list(out['erag_label']) == pytest.approx(by_hand)
    run = out.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})
    qrels = pd.DataFrame({'query_id': ['q1'], 'doc_id': ['d1'], 'relevance': [1]})
    value = next(ir_measures.iter_calc([pu.ERAG_P @ 2], qrels, run)).value
    assert value == pytest.approx(sum(by_hand) / 2)


def test_an_over_long_single_document_prompt_keeps_its_instructions_and_question():
    from test_edge_cases import WordTokenizer
    backend = FirstContextBackend()
    backend.tokenizer = WordTokenizer()
    reader = Reader(backend, prompt='Answer from this. {contexts}\nQ: {query}', context_format='C{i}: {text}',
                    max_prompt_tokens=10)
    long = ' '.join(f'w{i}' for i in range(50))
    with pytest.warns(UserWarning, match='truncated evenly'):
        ERAGLabeller(reader, metric='em')(ranking([('q2', 'd4')]).assign(text=long, gold_answer='w0'))
    assert backend.calls == ['Answer from this. C1: w0 w1\nQ: what is lift?']  # 8 tokens of frame, 2 of text
