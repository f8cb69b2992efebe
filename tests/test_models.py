"""The study's re-rankers: scores kept across runs in pyterrier-caching's ScorerCache."""
import pickle

import pandas as pd
import pyterrier as pt

import pyterrier_utility as pu


class CountingScorer(pt.Transformer):
    """Scores a document by its text length, counting the rows it is asked to score."""

    def __init__(self):
        self.scored = 0

    def transform(self, inp):
        self.scored += len(inp)
        return inp.assign(score=inp['text'].str.len().astype(float))


def _frame():
    return pd.DataFrame({'qid': ['1', '1', '2'], 'query': ['lift', 'lift', 'drag'], 'docno': ['a', 'b', 'a'],
                         'text': ['short', 'a longer text', 'short']})


def test_a_cached_scorer_scores_each_pair_once_across_runs(tmp_path):
    first = pu.models.cached_scorer(CountingScorer(), tmp_path / 'scores')
    out = first(_frame())
    assert first.scorer.scored == 3
    assert out.sort_values(['qid', 'docno'])[['docno', 'score', 'rank']].values.tolist() == [
        ['a', 5.0, 1], ['b', 13.0, 0], ['a', 5.0, 0]]
    first.close()
    again = pu.models.cached_scorer(CountingScorer(), tmp_path / 'scores')  # a later run
    pd.testing.assert_frame_equal(again(_frame()), out)
    assert again.scorer.scored == 0
    more = pd.concat([_frame(), pd.DataFrame({'qid': ['2'], 'query': ['drag'], 'docno': ['b'], 'text': ['xx']})])
    again(more)
    assert again.scorer.scored == 1


def test_a_cached_scorer_pickles_as_its_folder(tmp_path):
    cached = pu.models.cached_scorer(CountingScorer(), tmp_path / 'scores')
    cached(_frame())
    copy = pickle.loads(pickle.dumps(cached))
    assert copy.scorer.scored == 3
    assert str(copy.path) == str(cached.path) and copy(_frame())['score'].tolist() == [5.0, 13.0, 5.0]
    assert copy.scorer.scored == 3  # read from the folder


def test_the_study_reranker_is_cached_per_model_and_corpus(tmp_path, monkeypatch, cranfield):
    monkeypatch.setenv('PYTERRIER_UTILITY_CACHE', str(tmp_path))
    dense = pu.models.reranker('dense', cranfield.corpus_name)
    assert str(dense.path) == str(tmp_path / 'scores' / 'dense@cranfield')
    topics = cranfield.get_topics().head(2)
    run = (cranfield.bm25(num_results=5))(topics)
    first = dense(run)
    inner = dense.scorer.transform
    calls = []
    monkeypatch.setattr(dense.scorer, 'transform', lambda inp: calls.append(len(inp)) or inner(inp))
    second = pu.models.reranker('dense', cranfield.corpus_name)
    second.scorer = dense.scorer
    pd.testing.assert_frame_equal(second(run), first)
    assert sum(calls) == 0  # (pt.inspect probes it with an empty frame)
    assert not isinstance(pu.models.reranker('dense', 'x', cache=False), type(dense))
