"""ThreadBackend: a backend as replica threads of this process, each computing on one torch thread, the
model built once and shared. The replicas compute at once, each on one torch thread; their answers are
those of the backend in process; a replica raising ends the run with every answer already returned
kept, and a re-run generates exactly the rest. The offline reader's study equals one in process, bit for
bit."""
import collections
import functools
import itertools
import json
import pickle
import queue
import threading
import time
import types
from dataclasses import replace

import pytest
import torch
from support.interrupt import answers_in, interrupt_command
from support.scripted import EXPECTED, PROMPTS, SEEDS, ScriptedBackend, ShareableScripted, answered, stored

import pyterrier_utility as pu
from pyterrier_utility import cli
from pyterrier_utility.backends import _threads
from pyterrier_utility.backends.hf import invariant
from pyterrier_utility.backends.hf.backend import INVARIANT_BATCHING
from pyterrier_utility.backends.hf.invariant import one_thread
from pyterrier_utility.errors import BackendError, SettingError


class Shareable(ShareableScripted):
    """The scripted backend, shareable by threads; each call records the torch threads it ran on and which
    Python thread made it, and with ``meet`` waits there until every replica has come (or fails)."""

    def __init__(self, meet=None, calls=None, **kwargs):
        super().__init__(**kwargs)
        self.meet, self.calls = meet, calls if calls is not None else []

    def generate(self, inps, **kwargs):
        self.calls.append((threading.get_ident(), torch.get_num_threads()))
        if self.meet is not None:
            self.meet.wait(timeout=60)  # a BrokenBarrierError if the replicas do not run at once
        return super().generate(inps, **kwargs)


class FirstMeeting:
    """A barrier for the first two calls, which meet there (both replicas inside a batch); later calls pass."""

    def __init__(self):
        self.barrier, self.calls = threading.Barrier(2), itertools.count()

    def wait(self, timeout: float) -> None:
        if next(self.calls) < 2:
            self.barrier.wait(timeout)


class Decoded(ShareableScripted):
    """The scripted backend saying the temperature it answered at: ``'<query> #<seed> at <temperature>'``."""

    def _generate(self, inps, seeds, **options):
        return [replace(a, text=f'{a.text} at {self.decoding.temperature:g}')
                for a in super()._generate(inps, seeds, **options)]


def test_two_replica_threads_answer_as_the_backend_in_process_and_name_a_failing_query(tmp_path):
    """One pool: answers and copies with other settings as in process; then a replica raising on one
    prompt stops the run naming its query and thread, the answers completed are kept, the pool answers
    again and a re-run generates the rest."""
    with pu.backends.ThreadBackend(functools.partial(Decoded, batch_size=2), replicas=2) as backend:
        assert [a['thread'] for a in backend.nodes] == [0, 1]
        assert all(a['device'].endswith(', 1 torch thread') for a in backend.nodes)
        assert backend.placement == {'runner': 'threads', 'replicas': 2, 'threads_each': 1, 'actors': backend.nodes}
        assert [a.text for a in backend.generate(PROMPTS[:7], seeds=[3] * 7)] == \
            [f"'question {i}' #3 at 0.3" for i in range(7)]
        greedy = backend.with_settings(temperature=0)
        assert [a.text for a in greedy.generate(PROMPTS[:3], seeds=[5, 6, 7])] == \
            ["'question 0' #5 at 0", "'question 1' #6 at 0", "'question 2' #7 at 0"]
        assert greedy.generation_key == Decoded(temperature=0).generation_key != backend.generation_key
        assert backend.generation_key == Decoded().generation_key
    raising = functools.partial(Shareable, fail_on='question 7', batch_size=4)
    path = tmp_path / 'answers.sqlite'
    with pu.backends.ThreadBackend(raising, replicas=2) as backend:
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
    seeds = list(range(8))
    with pu.backends.ThreadBackend(functools.partial(Shareable, batch_size=2), replicas=1) as one:
        alone = one.generate(PROMPTS[:8], seeds=seeds)
    with pu.backends.ThreadBackend(functools.partial(Shareable, meet=meet, calls=calls, batch_size=2),
                                   replicas=2) as backend:
        assert pickle.dumps(backend.generate(PROMPTS[:8], seeds=seeds)) == pickle.dumps(alone)  # four batches
        assert torch.get_num_threads() == before
    assert len(calls) == 4 and {threads for _, threads in calls} == {1}
    served = collections.Counter(ident for ident, _ in calls)
    assert sorted(served.values()) == [2, 2] and threading.get_ident() not in served  # in pairs, at the barrier
    assert not meet.broken
    with pu.backends.ThreadBackend(functools.partial(Shareable, fail_on='question 0'), replicas=2) as backend:
        with pytest.raises(BackendError, match="ThreadBackend.* on replica thread [01], answering the prompt of the "
                                               "query 'question 0'"):
            backend.generate(PROMPTS[:6])
        assert torch.get_num_threads() == before


def test_a_failing_replica_stops_the_pool_the_other_starting_no_other_batch():
    """Ten batches of one answer: once both replicas are inside their first, replica 0 fails at once;
    replica 1 ends the batch it is answering (a fifth of a second) and starts no other."""
    calls: list = []
    failing = functools.partial(Shareable, meet=FirstMeeting(), calls=calls, fail_on='question 0', batch_size=1,
                                hold=0.2)
    with pu.backends.ThreadBackend(failing, replicas=2) as backend:
        with pytest.raises(BackendError, match="answering the prompt of the query 'question 0'"):
            backend.generate(PROMPTS)
    assert len(calls) == 2


def test_a_caller_stopping_early_stops_the_replicas_at_their_next_step_and_the_pool_answers_again():
    """A caller that stops while a replica holds a batch for a minute (a Ctrl-C, an error) is back within
    seconds, the replica thread ended; the pool then answers as before."""
    held = functools.partial(Shareable, batch_size=1, hold=60, hold_on='question 1')
    with pu.backends.ThreadBackend(held, replicas=2) as backend:
        # Replica 0 answers questions 0 and 1 (held), replica 1 questions 2 and 3.
        stream = backend.stream(lambda b, prompts, seeds: b.generate(prompts, seeds=seeds),
                                [([p], [0]) for p in PROMPTS[:4]])
        assert sorted(next(stream)[0] for _ in range(3)) == [0, 2, 3]
        start = time.monotonic()
        stream.close()
        assert time.monotonic() - start < 5
        assert not [t for t in threading.enumerate() if t.name.startswith('pyterrier-utility replica')]
        assert [a.text for a in backend.generate(PROMPTS[2:4], seeds=[4, 5])] == ["'question 2' #4", "'question 3' #5"]


#: Seconds a replica waits between its first two batches (:class:`Delivered`): the caller stops within
#: microseconds of reading the first answer.
BETWEEN_S = 1.0


class Delivered(queue.SimpleQueue):
    """The pool's results queue, the replica putting the first batch's answers then waiting :data:`BETWEEN_S`:
    a replica between two batches while its caller reads those answers and stops."""

    def put(self, item, *args, **kwargs):
        super().put(item, *args, **kwargs)
        if item is not None and item[0] == 0:
            time.sleep(BETWEEN_S)


def test_a_caller_stopping_while_no_replica_answers_a_batch_is_back_at_once_no_other_batch_begun(monkeypatch):
    """A caller that stops while its one replica is between two batches (none to interrupt) is back when the
    replica has taken the next step, having begun no other batch (each held for a minute)."""
    calls: list = []
    monkeypatch.setattr(_threads, 'queue', types.SimpleNamespace(SimpleQueue=Delivered, Empty=queue.Empty))
    held = functools.partial(Shareable, calls=calls, batch_size=1, hold=60, quick=1)
    with pu.backends.ThreadBackend(held, replicas=1) as backend:
        stream = backend.stream(lambda b, prompts, seeds: b.generate(prompts, seeds=seeds),
                                [([p], [0]) for p in PROMPTS[:3]])
        assert next(stream)[0] == 0
        start = time.monotonic()
        stream.close()
        assert time.monotonic() - start < BETWEEN_S + 3
    assert len(calls) == 1
    assert not [t for t in threading.enumerate() if t.name.startswith('pyterrier-utility replica')]


def test_the_replicas_backend_measures_its_row_tile_on_the_one_thread_they_compute_on(gemma, monkeypatch):
    """Where the offline reader's row tiles hold at one number of threads only (as on a Xeon with AMX in
    float32), a pool built by a caller on two threads measures the tile on the one its replicas compute on:
    its batching (part of the generation key) says 1 thread, as the reader's built on one thread does."""
    holds = invariant._tile_holds
    monkeypatch.setattr(invariant, '_tile_holds', lambda *args, threads=None, **kwargs:
                        threads is not None and holds(*args, threads=threads, **kwargs))
    monkeypatch.setattr(invariant, '_TILES', {})
    build = functools.partial(pu.backends.CausalLMBackend, gemma.model, gemma.tokenizer, model_id='gemma-test',
                              max_new_tokens=6)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pu.backends.ThreadBackend(build, replicas=2) as backend:
            assert backend.generation_key['batching'] == f'{INVARIANT_BATCHING} at 1 thread'
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    with one_thread():
        assert backend.generation_key == build().generation_key


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


#: The child's reader: the offline reader in batches of two answers (one prompt's samples), so that the
#: replicas are each in the middle of a batch when the first answers are stored.
SMALL_BATCHES = '''
Pool = pu.backends.ThreadBackend
pu.backends.ThreadBackend = lambda name, replicas, **options: Pool(name, replicas, **dict(options, batch_size=2))
'''


@pytest.mark.slow
def test_ctrl_c_stops_a_study_on_replica_threads_of_the_offline_reader_in_one_line(tmp_path):
    """SIGINT while two replica threads of the offline reader each answer a batch: the command exits 130
    within 5 s, saying in one line how many answers are kept, and those are whole answers in the cache."""
    out = tmp_path / 'study'
    argv = ['study', '--systems', 'Rel', '--no-reverse', '-k', '1', '3', '--queries', '3', '--samples', '2',
            '--labels', '2', '--replicas', '2', '--out', str(out)]
    done = interrupt_command(argv, SMALL_BATCHES, lambda: answers_in(out / 'generations.sqlite') >= 2)
    kept = answers_in(out / 'generations.sqlite')
    assert done.returncode == 130, done.stderr[-6000:]
    assert done.after == [f'pyterrier-utility study: interrupted; {kept} answers are kept in {out}/generations.sqlite,'
                          ' and the same command goes on from them'], done.stderr[-6000:]
    assert done.seconds < 5, done.stderr[-6000:]  # a batch of the offline reader takes about 10 s here
    assert 2 <= kept < 18 and kept % 2 == 0  # each batch stored whole: both samples of its prompt
