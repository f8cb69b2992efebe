import pandas as pd
from pandas.testing import assert_frame_equal

from pyterrier_utility import ReverseOrder


def test_reverse_order_turns_top_into_last(results):
    out = ReverseOrder()(results)
    expected = pd.DataFrame([
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd3', 'text': 'third doc', 'score': 3.0, 'rank': 0},
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd2', 'text': 'second doc', 'score': 2.0, 'rank': 1},
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd1', 'text': 'first doc', 'score': 1.0, 'rank': 2},
        {'qid': 'q2', 'query': 'what is drag', 'docno': 'd4', 'text': 'drag doc', 'score': 1.0, 'rank': 0},
    ])
    assert_frame_equal(out, expected)


def test_reverse_twice_is_identity_on_order(results):
    twice = ReverseOrder()(ReverseOrder()(results))
    assert list(twice['docno']) == ['d1', 'd2', 'd3', 'd4']


def test_reverse_ranks_by_score_when_rank_missing(results):
    out = ReverseOrder()(results.drop(columns=['rank']))
    assert list(out[out.qid == 'q1']['docno']) == ['d3', 'd1', 'd2']


def test_reversed_ranking_is_what_ndcg_sees(results):
    import ir_measures
    from ir_measures import nDCG
    qrels = pd.DataFrame({'query_id': ['q1', 'q1'], 'doc_id': ['d1', 'd3'], 'relevance': [2, 1]})
    def ndcg(frame):
        run = frame.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})
        return ir_measures.calc_aggregate([nDCG@3], qrels, run[run.query_id == 'q1'])[nDCG@3]
    def ranking(docnos):
        return pd.DataFrame({'qid': 'q1', 'docno': docnos, 'score': [3.0, 2.0, 1.0]})
    assert ndcg(ReverseOrder()(results)) == ndcg(ranking(['d3', 'd2', 'd1']))
    assert ndcg(ReverseOrder()(results)) < ndcg(ranking(['d1', 'd2', 'd3']))
