"""ProcessBackend: a backend as replica processes of one thread each on this machine, forked from one
process that built it and sharing its memory. The offline reader's answers equal those in replica threads
and in process, bit for bit; a replica raising or killed with SIGKILL ends the run with every answer
already returned kept, and a re-run generates exactly the rest."""
import functools
import os
import threading
import time
from pathlib import Path

import psutil
import pytest
from support.interrupt import answers_in, interrupt_command
from support.scripted import EXPECTED, PROMPTS, SEEDS, ScriptedBackend, ShareableScripted, answered, stored

import pyterrier_utility as pu
from pyterrier_utility import cli
from pyterrier_utility.backends import _replica as replica
from pyterrier_utility.backends.hf.invariant import one_thread
from pyterrier_utility.errors import BackendError, SettingError, UtilityWarning

TESTS = Path(__file__).resolve().parent
#: What :func:`weighty` holds (MiB): more than a replica's own memory, so that a copy of it shows.
WEIGHT_MB = 256


def weighty(threaded: bool = False) -> ScriptedBackend:
    """A scripted backend holding :data:`WEIGHT_MB` of written memory, as a model's weights are; ``threaded``:
    its build leaves a thread running, as a library's worker may."""
    backend = ScriptedBackend()
    backend.weights = b'w' * (WEIGHT_MB * 2**20)  # type: ignore[attr-defined]
    if threaded:
        threading.Thread(target=time.sleep, args=(600,), name='worker', daemon=True).start()
    return backend


@pytest.fixture(autouse=True)
def importable(monkeypatch):
    """The replicas import the package and tests/support."""
    before = os.environ.get('PYTHONPATH')
    monkeypatch.setenv('PYTHONPATH', os.pathsep.join([str(TESTS.parent), str(TESTS)] + ([before] if before else [])))


def test_two_replicas_of_one_thread_each_answer_as_the_backend_in_process_and_name_a_failing_query(tmp_path):
    """One pool: answers and copies with other settings as in process; then a replica raising on one
    prompt stops the run naming its query and process, the answers completed are kept, the pool
    answers again (nothing of the failed call is read by the next) and a re-run generates the rest."""
    # Two prompts per batch: 'question 7' shares its batch with 'question 6', and is still the one named.
    raising = functools.partial(ScriptedBackend, fail_on='question 7', batch_size=4)
    path = tmp_path / 'answers.sqlite'
    with pu.backends.ProcessBackend(raising, replicas=2) as backend:
        assert [a['device'].rsplit(', ', 1)[1] for a in backend.nodes] == ['1 torch threads'] * 2
        assert len({a['pid'] for a in backend.nodes}) == 2 and os.getpid() not in {a['pid'] for a in backend.nodes}
        assert backend.generation_key == ScriptedBackend().generation_key
        assert backend.placement == {'runner': 'processes', 'replicas': 2, 'threads_each': 1, 'forked': True,
                                     'actors': backend.nodes}
        assert backend.generate(PROMPTS[:7], seeds=[3] * 7) == ScriptedBackend().generate(PROMPTS[:7], seeds=[3] * 7)
        greedy = backend.with_settings(temperature=0)
        assert greedy.generation_key == ScriptedBackend(temperature=0).generation_key
        assert greedy.generate(PROMPTS[:3], seeds=[5, 6, 7]) == ScriptedBackend().generate(PROMPTS[:3], seeds=[5, 6, 7])
        cache = pu.GenerationCache(backend, path)
        with pytest.raises(BackendError) as raised:
            cache.answer(PROMPTS, SEEDS)
        assert backend.generate(PROMPTS[:2], seeds=[0, 1])[1].text == "'question 1' #1"
    assert backend.zygote.poll() == 0 and not any(psutil.pid_exists(a['pid']) for a in backend.nodes)
    message = str(raised.value)
    assert '\n' not in message
    assert "answering the prompt of the query 'question 7': ValueError: scripted failure" in message
    assert any(f"replica process {a['pid']}" in message for a in backend.nodes)
    kept = cache.generated
    assert 0 < kept < 20 and stored(path) == kept
    assert f'[{kept} answers of the batches completed are in the cache' in message
    assert answered(pu.GenerationCache(ScriptedBackend(), path)) == (EXPECTED, 20 - kept)


def test_a_failing_replica_stops_the_pool_nothing_more_being_sent(tmp_path):
    """Ten batches of one prompt: replica 0 fails at once on its first; the batches sent before the pool
    heard of it (its second, replica 1's two, a fifth of a second each) are answered and kept, and no
    other is sent."""
    path = tmp_path / 'answers.sqlite'
    failing = functools.partial(ScriptedBackend, fail_on='question 0', batch_size=1, hold=0.2)
    with pu.backends.ProcessBackend(failing, replicas=2) as backend:
        with pytest.raises(BackendError, match="answering the prompt of the query 'question 0'"):
            pu.GenerationCache(backend, path).answer(PROMPTS, [0])
    assert stored(path) == 3


def test_a_caller_stopping_early_is_back_at_once_and_the_next_call_reads_its_own_answers():
    """A caller that stops while a replica holds a batch for 3 s returns at once; the next call waits for
    that batch's answer, discards it, and answers its own prompts."""
    held = functools.partial(ScriptedBackend, batch_size=1, hold=3, hold_on='question 1')
    with pu.backends.ProcessBackend(held, replicas=2) as backend:
        # Replica 0 answers questions 0 and 1 (held), replica 1 questions 2 and 3.
        stream = backend.stream(replica._answered, [([p], [0]) for p in PROMPTS[:4]])
        assert sorted(next(stream)[0] for _ in range(3)) == [0, 2, 3]
        start = time.monotonic()
        stream.close()
        assert time.monotonic() - start < 1
        assert [a.text for a in backend.generate(PROMPTS[4:8], seeds=[1] * 4)] == \
            [f"'question {i}' #1" for i in range(4, 8)]


def test_a_pool_is_checked_where_it_is_made_and_a_backend_that_cannot_be_built_is_named_with_its_replica():
    with pytest.raises(SettingError, match='ProcessBackend: replicas must be an integer >= 1, got 0'):
        pu.backends.ProcessBackend(ScriptedBackend, replicas=0)
    with pytest.raises(SettingError, match='ProcessBackend: backend must be a reader name or a function'):
        pu.backends.ProcessBackend(ScriptedBackend(), replicas=2)
    with pytest.raises(BackendError, match=r"ProcessBackend\('openai:m'\) on replica process \d+: the backend could "
                                           r'not be built: SettingError: .*base_urls must be'):
        pu.backends.ProcessBackend('openai:m', replicas=1, base_urls=['ftp://127.0.0.1'])


def test_a_replica_killed_mid_run_stops_it_naming_the_replica_and_a_rerun_generates_the_rest(tmp_path):
    path = tmp_path / 'answers.sqlite'
    killing = functools.partial(ScriptedBackend, kill_on='question 8', marker=str(tmp_path / 'killed'))
    with pu.backends.ProcessBackend(killing, replicas=2) as backend:
        cache = pu.GenerationCache(backend, path)
        with pytest.raises(BackendError, match=r"replica [01] \(process \d+\) died \(exit code -9: killed, or out of "
                                               r"memory\), holding \d batch(es)? of \d+ prompts .*'question 8'"):
            cache.answer(PROMPTS, SEEDS)
        with pytest.raises(BackendError, match=r'replica [01] \(process \d+\) has died; build a new pool'):
            backend.generate(PROMPTS[:1])
    assert (tmp_path / 'killed').exists()
    kept = cache.generated
    assert 4 <= kept < 20 and stored(path) == kept
    with pu.backends.ProcessBackend(ScriptedBackend, replicas=2) as backend:
        assert answered(pu.GenerationCache(backend, path)) == (EXPECTED, 20 - kept)


def test_replicas_are_forked_from_one_process_and_share_what_it_built():
    """Each replica's own memory (its unique set) is a small part of the backend built once; a build that
    leaves a thread running is not forked from (a fork could hang), and each replica builds its own."""
    with pu.backends.ProcessBackend(weighty, replicas=2) as backend:
        processes = [psutil.Process(a['pid']) for a in backend.nodes]
        assert backend.forked and {p.ppid() for p in processes} == {backend.zygote.pid}
        assert all(p.memory_full_info().uss < WEIGHT_MB * 2**20 / 2 for p in processes)
        seeds = [1, 2, 3]
        assert backend.generate(PROMPTS[:3], seeds=seeds) == ScriptedBackend().generate(PROMPTS[:3], seeds=seeds)
    with pytest.warns(UtilityWarning, match=r"ProcessBackend\(.*weighty.*\): each replica holds its own copy of the "
                                            r"model, as the process that built the backend runs 2 threads \(Python's "
                                            r'worker\), and a process forked from it could hang'):
        backend = pu.backends.ProcessBackend(functools.partial(weighty, threaded=True), replicas=2)
    with backend:
        processes = [psutil.Process(a['pid']) for a in backend.nodes]
        assert not backend.forked and not backend.placement['forked']
        assert {p.ppid() for p in processes} == {backend.zygote.pid}
        assert all(p.memory_full_info().uss > WEIGHT_MB * 2**20 for p in processes)
        seeds = [1, 2, 3]
        assert backend.generate(PROMPTS[:3], seeds=seeds) == ScriptedBackend().generate(PROMPTS[:3], seeds=seeds)


@pytest.mark.slow
def test_the_offline_reader_in_replica_processes_answers_as_in_replica_threads_and_in_process(monkeypatch):
    """The offline reader as two replica processes (forked from the one that built it), as two replica
    threads, and in this process on one thread: the same answers, their token log-probabilities
    included, bit for bit, the batches shared between the replicas."""
    settings = dict(max_new_tokens=8, temperature=0.7, batch_size=2)
    prompts = [f'Question: what is {what}?\nAnswer:' for what in ('lift', 'drag', 'a shock wave', 'a boundary layer')
               for _ in range(2)]
    seeds = [0, 1] * 4
    with one_thread():
        here = pu.backends.get_backend('gemma3-270m', **settings).generate(prompts, seeds=seeds)
    with pu.backends.ProcessBackend('gemma3-270m', replicas=2, **settings) as processes:
        assert processes.forked and 'in 2 replica processes of one thread each' in processes.reproducibility
        in_processes = processes.generate(prompts, seeds=seeds)
    served = []

    def answered(backend, batch, batch_seeds):
        served.append(threading.current_thread().name)
        return answered_whole(backend, batch, batch_seeds)
    answered_whole = replica._answered
    with pu.backends.ThreadBackend('gemma3-270m', replicas=2, **settings) as threads:
        monkeypatch.setattr(replica, '_answered', answered)
        in_threads = threads.generate(prompts, seeds=seeds)
    assert in_processes == here and in_threads == here
    # Four batches of one prompt's two samples, both replica threads serving some.
    assert len(served) == 4 and set(served) == {'pyterrier-utility replica 0', 'pyterrier-utility replica 1'}


#: The child's reader: the scripted backend in replica processes, each answering its first batch at once and
#: holding every later one for a minute.
HELD_IN_PROCESSES = '''
from support.scripted import ScriptedBackend
held = functools.partial(ScriptedBackend, batch_size=2, hold=60, quick=1)
pu.backends.ThreadBackend = lambda name, replicas, **options: pu.backends.ProcessBackend(held, replicas)
'''


@pytest.mark.slow
def test_ctrl_c_stops_a_study_on_replica_processes_in_one_line_and_the_same_command_goes_on(tmp_path, monkeypatch,
                                                                                             capsys):
    """Ctrl-C as a terminal gives it (to the replicas too) while both replica processes hold a batch: the
    command exits 130 within 5 s, in one line, with the replicas gone; the same command then generates
    only the rest."""
    out = tmp_path / 'study'
    argv = ['study', '--systems', 'Rel', '--no-reverse', '-k', '1', '--queries', '3', '--samples', '2', '--labels',
            '2', '--replicas', '2', '--out', str(out)]
    done = interrupt_command(argv, HELD_IN_PROCESSES, lambda: answers_in(out / 'generations.sqlite') >= 4)
    assert done.returncode == 130, done.stderr[-6000:]
    assert done.after == [f'pyterrier-utility study: interrupted; 4 answers are kept in {out}/generations.sqlite, '
                          'and the same command goes on from them'], done.stderr[-6000:]
    assert done.seconds < 5, done.stderr[-6000:]
    assert done.left == []  # the replicas, each holding a batch for a minute, are killed as the command ends
    assert answers_in(out / 'generations.sqlite') == 4
    threads = pu.backends.ThreadBackend
    monkeypatch.setattr(pu.backends, 'ThreadBackend', lambda name, replicas, **options: threads(
        functools.partial(ShareableScripted, batch_size=2), replicas))
    assert cli.main(argv) == 0  # 3 queries, 0-shot and k=1, 2 samples each
    assert capsys.readouterr().out.rstrip().endswith('; 8 answers generated')
