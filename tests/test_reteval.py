import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pyterrier_rag.backend import Backend, BackendOutput
from test_erag import EchoBackend

import pyterrier_utility as pu
from pyterrier_utility import LLMRetEval, Reader
from pyterrier_utility.reteval import disagreement

TEXTS = {'d1': 'Paris', 'd2': 'the capital is London', 'd3': 'Rome, maybe', 'd4': 'lift acts upward on a wing',
         'd5': 'Paris'}
QRELS = pd.DataFrame({'qid': ['q1', 'q1', 'q2', 'q3'], 'docno': ['d1', 'd2', 'd4', 'd3'], 'label': [2, 0, 2, 0]})
QUERIES = {'q1': 'capital of France?', 'q2': 'what is lift?', 'q3': 'anything?'}


class JudgeBackend(Backend):
    """Says Yes exactly when the candidate equals the reference."""

    def __init__(self):
        super().__init__('judge')
        self.calls = []

    def generate(self, inps, **kw):
        self.calls.extend(inps)
        def same(p):
            ref = p.split('Reference answer: ')[1].split('\n')[0]
            cand = p.split('Candidate answer: ')[1].split('\n')[0]
            return 'Yes.' if ref == cand else 'No, it does not.'
        return [BackendOutput(text=same(p)) for p in inps]


def answered(reader, rows):
    frame = pd.DataFrame(rows, columns=['qid', 'docno'])
    frame['query'] = frame['qid'].map(QUERIES)
    frame['text'] = frame['docno'].map(TEXTS)
    frame['rank'] = frame.groupby('qid').cumcount()
    frame['score'] = 10.0 - frame['rank']
    return reader(frame)


def test_judge_decides_match_with_gold_context_answer():
    backend = EchoBackend()
    reader = Reader(backend)
    judge = JudgeBackend()
    reteval = LLMRetEval(reader, QRELS, TEXTS, judge=judge)
    good = answered(reader, [('q1', 'd1'), ('q1', 'd3'), ('q2', 'd3'), ('q3', 'd2')])
    with pytest.warns(UserWarning, match='LLM-retEval is NaN.*qid q3'):
        out = reteval(good)
    per_query = out.drop_duplicates('qid').set_index('qid')
    assert per_query.loc['q1', 'reteval'] == 1.0 and per_query.loc['q1', 'gold_qanswer'] == 'Paris'
    assert per_query.loc['q2', 'reteval'] == 0.0 and per_query.loc['q2', 'gold_qanswer'] == 'lift acts upward on a wing'
    assert np.isnan(per_query.loc['q3', 'reteval'])
    assert len(judge.calls) == 2
    # The gold context: relevant documents, at most as many as were retrieved (q1: d1 only).
    assert Reader(EchoBackend()).build_prompt(QUERIES['q1'], ['Paris']) in backend.calls


def test_bertscore_threshold_match(minilm):
    reader = Reader(EchoBackend())
    reteval = LLMRetEval(reader, QRELS, TEXTS, bertscore=minilm, threshold=0.99)
    out = reteval(answered(reader, [('q1', 'd5'), ('q2', 'd2')])).set_index('qid')
    assert out.loc['q1', 'reteval'] == 1.0  # 'Paris' from an unjudged copy of the gold document
    f1 = minilm.f1_matrix(['the capital is London'], ['lift acts upward on a wing'])[0, 0]
    assert f1 < 0.99 and out.loc['q2', 'reteval'] == 0.0


def test_reteval_measure_and_recall_disagreement():
    reader = Reader(EchoBackend())
    reteval = LLMRetEval(reader, QRELS, TEXTS, judge=JudgeBackend())
    # q1 misses its gold document d1 yet answers 'Paris' (from d5); q2 finds d4 yet answers from d3 first.
    out = reteval(answered(reader, [('q1', 'd5'), ('q1', 'd3'), ('q2', 'd3'), ('q2', 'd4')]))
    topics = pd.DataFrame({'qid': ['q1', 'q2'], 'query': [QUERIES['q1'], QUERIES['q2']]})
    res = pt.Experiment([pt.Transformer.from_df(out)], topics, QRELS, [pu.RetEval], names=['s'])
    assert res['RetEval'][0] == pytest.approx(0.5)
    table = disagreement(out, QRELS, k=2).set_index('qid')
    assert table.loc['q1', 'R@2'] == 0.0 and table.loc['q1', 'reteval'] == 1.0
    assert table.loc['q2', 'R@2'] == 1.0 and table.loc['q2', 'reteval'] == 0.0
    assert list(table['disagree']) == [1.0, 1.0]


def test_needs_a_way_to_match():
    with pytest.raises(ValueError, match='judge backend or a bertscore'):
        LLMRetEval(Reader(EchoBackend()), QRELS, TEXTS)
