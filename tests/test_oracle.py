import pandas as pd
import pytest

from pyterrier_utility import OracleSampler

QRELS = pd.DataFrame([
    ('q1', 'r1', 3), ('q1', 'r2', 2), ('q1', 'r3', 2), ('q1', 'm1', 1), ('q1', 'n1', 0),
    ('q2', 'r4', 3), ('q2', 'n2', 0), ('q2', 'n3', 0),
], columns=['qid', 'docno', 'label'])
TEXTS = {d: f'text of {d}' for d in ['r1', 'r2', 'r3', 'r4', 'm1', 'n1', 'n2', 'n3', 'u1', 'u2', 'u3']}
TOPICS = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['one', 'two']})


def test_rel_samples_only_relevant_labels():
    out = OracleSampler(QRELS, TEXTS, labels=2, num_results=2)(TOPICS)
    q1 = out[out.qid == 'q1']
    assert len(q1) == 2 and set(q1['docno']) <= {'r1', 'r2', 'r3'}
    assert list(out[out.qid == 'q2']['docno']) == ['r4']  # fewer than k: all of them
    assert list(q1['rank']) == [0, 1]
    assert (out['text'] == out['docno'].map(TEXTS)).all()
    assert q1['score'].is_monotonic_decreasing


def test_label_set_and_minimum():
    only3 = OracleSampler(QRELS, TEXTS, labels={3})(TOPICS)
    assert set(only3['docno']) == {'r1', 'r4'}
    from1 = OracleSampler(QRELS, TEXTS, labels=1)(TOPICS)
    assert set(from1[from1.qid == 'q1']['docno']) == {'r1', 'r2', 'r3', 'm1'}


def test_sampling_is_seeded_per_query_and_nested():
    a = OracleSampler(QRELS, TEXTS, labels=1, seed=3)(TOPICS)
    b = OracleSampler(QRELS, TEXTS, labels=1, seed=3)(TOPICS.iloc[::-1])
    assert list(a[a.qid == 'q1']['docno']) == list(b[b.qid == 'q1']['docno'])
    small = OracleSampler(QRELS, TEXTS, labels=1, seed=3, num_results=2)(TOPICS)
    assert list(small[small.qid == 'q1']['docno']) == list(a[a.qid == 'q1']['docno'][:2])
    orders = {tuple(OracleSampler(QRELS, TEXTS, labels=1, seed=s).sample('q1')) for s in range(20)}
    assert len(orders) > 1


def test_nrel_judged_only_and_filled_from_unjudged():
    judged = OracleSampler(QRELS, TEXTS, relevant=False, num_results=3)(TOPICS)
    assert set(judged[judged.qid == 'q1']['docno']) == {'n1'}
    assert set(judged[judged.qid == 'q2']['docno']) == {'n2', 'n3'}
    filled = OracleSampler(QRELS, TEXTS, relevant=False, fill_unjudged=True, num_results=3)(TOPICS)
    q1 = list(filled[filled.qid == 'q1']['docno'])
    assert len(q1) == 3 and q1[0] == 'n1'
    assert set(q1[1:]) <= {'r4', 'n2', 'n3', 'u1', 'u2', 'u3'}  # never a document judged for q1


def test_query_without_candidates_warns_and_is_absent():
    topics = pd.concat([TOPICS, pd.DataFrame({'qid': ['q9'], 'query': ['nine']})])
    with pytest.warns(UserWarning, match='q9'):
        out = OracleSampler(QRELS, TEXTS)(topics)
    assert 'q9' not in set(out['qid'])
