"""The study's re-rankers: scores kept across runs in pyterrier-caching's ScorerCache."""
import os
import pickle
import subprocess
import sys
from pathlib import Path

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
    first = pu.rerankers.cached_scorer(CountingScorer(), tmp_path / 'scores')
    out = first(_frame())
    assert first.scorer.scored == 3
    assert out.sort_values(['qid', 'docno'])[['docno', 'score', 'rank']].values.tolist() == [
        ['a', 5.0, 1], ['b', 13.0, 0], ['a', 5.0, 0]]
    first.close()
    again = pu.rerankers.cached_scorer(CountingScorer(), tmp_path / 'scores')  # a later run
    pd.testing.assert_frame_equal(again(_frame()), out)
    assert again.scorer.scored == 0
    more = pd.concat([_frame(), pd.DataFrame({'qid': ['2'], 'query': ['drag'], 'docno': ['b'], 'text': ['xx']})])
    again(more)
    assert again.scorer.scored == 1


def test_a_cached_scorer_pickles_as_its_folder(tmp_path):
    cached = pu.rerankers.cached_scorer(CountingScorer(), tmp_path / 'scores')
    cached(_frame())
    copy = pickle.loads(pickle.dumps(cached))
    assert copy.scorer.scored == 3
    assert str(copy.path) == str(cached.path) and copy(_frame())['score'].tolist() == [5.0, 13.0, 5.0]
    assert copy.scorer.scored == 3  # read from the folder


def test_the_study_reranker_is_cached_per_model_and_corpus(tmp_path, monkeypatch, cranfield):
    monkeypatch.setenv('PYTERRIER_UTILITY_CACHE', str(tmp_path))
    dense = pu.rerankers.reranker('dense', cranfield.corpus_name)
    assert str(dense.path) == str(tmp_path / 'scores' / 'dense@cranfield')
    topics = cranfield.get_topics().head(2)
    run = (cranfield.bm25(num_results=5))(topics)
    first = dense(run)
    inner = dense.scorer.transform
    calls = []
    monkeypatch.setattr(dense.scorer, 'transform', lambda inp: calls.append(len(inp)) or inner(inp))
    second = pu.rerankers.reranker('dense', cranfield.corpus_name)
    second.scorer = dense.scorer
    pd.testing.assert_frame_equal(second(run), first)
    assert sum(calls) == 0  # (pt.inspect probes it with an empty frame)
    assert not isinstance(pu.rerankers.reranker('dense', 'x', cache=False), type(dense))


# One process of the test below: the scorer logs each call that scores rows and holds it until both
# processes are about to open the cache and score, so that their lookups overlap.
SCORING = '''
import os, sys, time
from pathlib import Path
import pandas as pd
import pyterrier as pt
from pyterrier_utility.rerankers import cached_scorer
path, log, ready = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])

def slow(inp):
    if len(inp):
        with open(log, 'a') as f:
            f.write(f'{os.getpid()}\\n')
        deadline = time.time() + 240
        while len(ready.read_text().split()) < 2 and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(2)
    return inp.assign(score=inp['text'].str.len().astype(float))

frame = pd.DataFrame({'qid': ['1', '1', '2'], 'query': ['lift', 'lift', 'drag'], 'docno': ['a', 'b', 'a'],
                      'text': ['short', 'a longer text', 'short']})
with open(ready, 'a') as f:
    f.write(f'{os.getpid()}\\n')
print(cached_scorer(pt.apply.generic(slow), path)(frame)['score'].tolist())
'''


def test_two_processes_scoring_into_one_fresh_cache_score_each_pair_once(tmp_path):
    root = Path(__file__).resolve().parents[1]
    log, ready = tmp_path / 'scored.log', tmp_path / 'ready'
    ready.write_text('')
    procs = [subprocess.Popen([sys.executable, '-c', SCORING, str(tmp_path / 'scores'), str(log), str(ready)],
                              cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert [out for out, _ in outs] == ['[5.0, 13.0, 5.0]\n'] * 2
    assert len(log.read_text().split()) == 1  # the second process read the first's scores

