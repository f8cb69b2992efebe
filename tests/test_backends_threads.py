"""ThreadBackend: a backend as replica threads of this process, each computing on one torch thread, the
model built once and shared. The replicas compute at once, each on one torch thread; their answers are
those of the backend in process; a replica raising ends the run with every answer already returned
kept, and a re-run generates exactly the rest. The offline reader's study equals one in process, bit for
bit."""
import copy
import functools
import json
import threading

import pytest
import torch
from support.scripted import EXPECTED, PROMPTS, SEEDS, ScriptedBackend, answered, stored

import pyterrier_utility as pu
from pyterrier_utility import cli
from pyterrier_utility.backends.hf.invariant import one_thread
from pyterrier_utility.errors import BackendError, SettingError


class Shareable(ScriptedBackend):
    """The scripted backend, shareable by threads; each call records the torch threads it ran on and which
    Python thread made it, and with ``meet`` waits there until every replica has come (or fails)."""

    def __init__(self, meet=None, calls=None, **kwargs):
        super().__init__(**kwargs)
        self.meet, self.calls = meet, calls if calls is not None else []

    @property
    def generation_key(self):  # answers as the scripted backend's, cached under its key
        return dict(super().generation_key, backend='ScriptedBackend')

    def thread_replica(self):
        return copy.copy(self)

    def generate(self, inps, **kwargs):
        self.calls.append((threading.get_ident(), torch.get_num_threads()))
        if self.meet is not None:
            self.meet.wait(timeout=60)  # a BrokenBarrierError if the replicas do not run at once
        return super().generate(inps, **kwargs)


def test_two_replica_threads_answer_as_the_backend_in_process_and_name_a_failing_query(tmp_path):
    """One pool: answers and copies with other settings as in process; then a replica raising on one
    prompt stops the run naming its query and thread, the answers completed are kept, the pool answers
    again and a re-run generates the rest."""
    raising = functools.partial(Shareable, fail_on='question 7', batch_size=4)
    path = tmp_path / 'answers.sqlite'
    with pu.backends.ThreadBackend(raising, replicas=2) as backend:
        assert [a['thread'] for a in backend.nodes] == [0, 1]
        assert all(a['device'].endswith(', 1 torch thread') for a in backend.nodes)
        assert backend.generation_key == ScriptedBackend().generation_key
        assert backend.placement == {'runner': 'threads', 'replicas': 2, 'threads_each': 1, 'actors': backend.nodes}
        assert backend.generate(PROMPTS[:7], seeds=[3] * 7) == ScriptedBackend().generate(PROMPTS[:7], seeds=[3] * 7)
        greedy = backend.with_settings(temperature=0)
        assert greedy.generation_key == ScriptedBackend(temperature=0).generation_key
        assert greedy.generate(PROMPTS[:3], seeds=[5, 6, 7]) == ScriptedBackend().generate(PROMPTS[:3], seeds=[5, 6, 7])
        cache = pu.GenerationCache(backend, path)
        with pytest.raises(BackendError) as raised:
            cache.answer(PROMPTS, SEEDS)
        assert backend.generate(PROMPTS[:2], seeds=[0, 1])[1].text == "'question 1' #1"
    message = str(raised.value)
    assert '\n' not in message
    assert "answering the prompt of the query 'question 7': ValueError: scripted failure" in message
    assert 'on replica thread 0' in message or 'on replica thread 1' in message
    kept = cache.generated
    assert 0 < kept < 20 and stored(path) == kept
    assert answered(pu.GenerationCache(ScriptedBackend(), path)) == (EXPECTED, 20 - kept)


def test_the_replicas_compute_at_once_each_on_one_torch_thread_and_the_thread_count_comes_back():
    """The mechanism itself: every batch is answered on a replica's own Python thread with torch on one
    thread, both replicas inside a call at the same moment (they meet at a barrier), and this process's
    torch threads are as they were once the answers are in, and after a failure."""
    calls: list = []
    meet = threading.Barrier(2)
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # as a process on two cores runs: the replicas must each run one, whatever this is
    try:
        _replicas_meet(calls, meet)
    finally:
        torch.set_num_threads(before)


def _replicas_meet(calls: list, meet: threading.Barrier) -> None:
    before = torch.get_num_threads()
    with pu.backends.ThreadBackend(functools.partial(Shareable, meet=meet, calls=calls, batch_size=2),
                                   replicas=2) as backend:
        seeds = list(range(4))
        assert backend.generate(PROMPTS[:4], seeds=seeds) == ScriptedBackend().generate(PROMPTS[:4], seeds=seeds)
        assert torch.get_num_threads() == before
    assert len(calls) == 2 and {threads for _, threads in calls} == {1}
    assert len({ident for ident, _ in calls}) == 2 and threading.get_ident() not in {ident for ident, _ in calls}
    assert not meet.broken
    with pu.backends.ThreadBackend(functools.partial(Shareable, fail_on='question 0'), replicas=2) as backend:
        with pytest.raises(BackendError, match="ThreadBackend.* on replica thread [01], answering the prompt of the "
                                               "query 'question 0'"):
            backend.generate(PROMPTS[:6])
        assert torch.get_num_threads() == before


def test_a_thread_pool_is_checked_where_it_is_made():
    with pytest.raises(SettingError, match='ThreadBackend: replicas must be an integer >= 1, got 0'):
        pu.backends.ThreadBackend(Shareable, replicas=0)
    with pytest.raises(SettingError, match='ThreadBackend: backend must be a reader name or a function'):
        pu.backends.ThreadBackend(Shareable(), replicas=2)
    with pytest.raises(SettingError, match=r"ThreadBackend\('ScriptedBackend'\).*cannot be shared by threads \(it "
                                           r'has no thread_replica\(\)\); run it in processes'):
        pu.backends.ThreadBackend(ScriptedBackend, replicas=2)
    with pytest.raises(BackendError, match=r"ThreadBackend\('openai:m'\): the backend could not be built: "
                                           r'SettingError: .*base_urls must be'):
        pu.backends.ThreadBackend('openai:m', replicas=1, base_urls=['ftp://127.0.0.1'])


@pytest.mark.slow
def test_the_study_command_runs_a_reader_in_replica_threads_and_records_them(tmp_path):
    """The study's replicas (``--replicas 2``) and in process on one thread (``--replicas 1``): the same
    answers and their token log-probabilities, per-query scores and Table 1, byte for byte; settings.json
    says where."""
    options = ['study', '--systems', 'Rel', '--no-reverse', '-k', '1', '--queries', '2', '--samples', '2',
               '--max-new-tokens', '8', '--labels', '2', '--temperature', '0.7']
    with one_thread():  # the scores are computed in this process: on one thread for both runs
        assert cli.main([*options, '--out', str(tmp_path / 'here'), '--replicas', '1']) == 0
        assert cli.main([*options, '--out', str(tmp_path / 'replicas'), '--replicas', '2']) == 0
    for name in ('answers.csv', 'token_logprobs.csv', 'per_query.csv', 'table1.csv'):
        assert (tmp_path / 'replicas' / name).read_bytes() == (tmp_path / 'here' / name).read_bytes(), name
    engine = json.loads((tmp_path / 'replicas' / 'settings.json').read_text())['engines']['gemma3-270m']
    assert engine['placement']['runner'] == 'threads' and engine['placement']['replicas'] == 2
    assert all(a['device'].endswith('1 torch thread') for a in engine['placement']['actors'])


def test_a_closed_pool_answers_nothing_nor_do_its_copies():
    backend = pu.backends.ThreadBackend(Shareable, replicas=2)
    greedy = backend.with_settings(temperature=0)
    backend.close()
    for pool in (backend, greedy):
        with pytest.raises(SettingError, match=r'ThreadBackend\(.*\): closed; build a new pool'):
            pool.generate(PROMPTS[:2])
