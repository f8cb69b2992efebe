"""RayBackend on a two-node Ray cluster on 127.0.0.1: one actor per node, the offline reader's answers
equal to the in-process backend's, and a worker raising or killed with SIGKILL ending with every
answer already returned kept and a re-run generating exactly the rest."""
import functools
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

# Read by Ray once, when imported: every node of the test cluster on the loopback.
os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'
ray = pytest.importorskip('ray')

from support.interrupt import answers_in, interrupt_command  # noqa: E402
from support.scripted import EXPECTED, PROMPTS, SEEDS, ScriptedBackend, answered, stored  # noqa: E402

import pyterrier_utility as pu  # noqa: E402
from pyterrier_utility import cli  # noqa: E402
from pyterrier_utility.backends.hf.invariant import one_thread  # noqa: E402  (as each actor runs)
from pyterrier_utility.errors import BackendError, SettingError  # noqa: E402
from pyterrier_utility.prompt_formats import PROMPT_FORMATS  # noqa: E402
from pyterrier_utility.settings import Placement  # noqa: E402
from pyterrier_utility.vocabulary import RAY_CONNECT_TIMEOUT  # noqa: E402

pytestmark = [pytest.mark.ray, pytest.mark.slow]  # a Ray cluster or Ray's import in a process: seconds to a minute each
TESTS = Path(__file__).resolve().parent


@pytest.fixture(scope='module')
def cluster():
    """A head node and one more, one CPU each; the workers import the package and tests/support."""
    from ray.cluster_utils import Cluster
    before = os.environ.get('PYTHONPATH')
    os.environ['PYTHONPATH'] = os.pathsep.join([str(TESTS.parent), str(TESTS)] + ([before] if before else []))
    nodes = Cluster(initialize_head=True, head_node_args={'num_cpus': 1, 'include_dashboard': False})
    nodes.add_node(num_cpus=1)
    ray.init(address=nodes.address)
    yield nodes
    ray.shutdown()
    nodes.shutdown()
    if before is None:
        del os.environ['PYTHONPATH']
    else:
        os.environ['PYTHONPATH'] = before


UNREACHABLE = """
import os, sys
os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'
from pyterrier_utility.backends import RayBackend
from pyterrier_utility.errors import BackendError
try:
    RayBackend('gemma3-270m', address=sys.argv[1])
except BackendError as e:
    print(e)
"""


def test_a_cluster_address_where_nothing_answers_ends_in_one_line_naming_it(capsys):
    with socket.socket() as unused:  # a loopback port nothing listens on: bound, never listening
        unused.bind(('127.0.0.1', 0))
        address = '127.0.0.1:%d' % unused.getsockname()[1]
        # Without a bound Ray retries for minutes; the guard only keeps a failing run from hanging CI.
        done = subprocess.run([sys.executable, '-c', UNREACHABLE, address], capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, PYTHONPATH=str(TESTS.parent)))
    assert done.stdout.splitlines() == [f'RayBackend: no Ray cluster at {address} (connection refused within '
                                        f'{RAY_CONNECT_TIMEOUT} s): start one there (ray start --head) or give the '
                                        'address its head node printed'], done.stderr[-2000:]
    with pytest.raises(SystemExit):
        cli.parser().parse_args(['study', '--help'])
    assert f'nothing there answers within {RAY_CONNECT_TIMEOUT} s' in ' '.join(capsys.readouterr().out.split())


def test_auto_where_the_recorded_cluster_is_dead_ends_in_one_line_naming_its_address():
    with socket.socket() as unused:  # the address of a cluster whose head is gone
        unused.bind(('127.0.0.1', 0))
        address = '127.0.0.1:%d' % unused.getsockname()[1]
        done = subprocess.run([sys.executable, '-c', UNREACHABLE, 'auto'], capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, PYTHONPATH=str(TESTS.parent), RAY_ADDRESS=address))
    assert done.stdout.splitlines() == [f'RayBackend: no Ray cluster at auto ({address}) (connection refused within '
                                        f'{RAY_CONNECT_TIMEOUT} s): start one there (ray start --head) or give the '
                                        'address its head node printed'], done.stderr[-2000:]


@pytest.mark.parametrize('replicas', ['0', '-1', 'x'])
def test_a_replica_count_that_is_not_a_positive_integer_is_refused_naming_replicas(replicas, capsys):
    with pytest.raises(SystemExit):
        cli.parser().parse_args(['study', '--ray', 'auto', '--replicas', replicas])
    assert f"argument --replicas: must be an integer >= 1, got '{replicas}'" in capsys.readouterr().err


def test_one_actor_on_each_of_two_nodes_on_the_loopback(cluster):
    assert {n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']} == {'127.0.0.1'}
    with pu.backends.RayBackend(ScriptedBackend, replicas=2) as backend:
        assert len({a['node_id'] for a in backend.nodes}) == 2
        assert {a['node_id'] for a in backend.nodes} == {n['NodeID'] for n in ray.nodes() if n['Alive']}
        assert all(a['ip'] == '127.0.0.1' and a['device'].startswith('CPU ') for a in backend.nodes)
        assert backend.generation_key == ScriptedBackend().generation_key
        assert backend.placement['replicas'] == 2 and backend.placement['actors'] == backend.nodes
        assert answered(pu.GenerationCache(backend)) == (EXPECTED, 20)
        greedy = backend.with_settings(temperature=0)
        assert greedy.generation_key == ScriptedBackend(temperature=0).generation_key
        assert greedy.generate(PROMPTS[:3], seeds=[5, 6, 7]) == ScriptedBackend().generate(PROMPTS[:3], seeds=[5, 6, 7])


def test_more_replicas_than_the_cluster_holds_is_refused_naming_its_resources(cluster):
    with pytest.raises(SettingError, match='3 replicas of 1 CPUs and 0 GPUs each need 3 CPUs; the cluster has 2 CPUs'):
        pu.backends.RayBackend(ScriptedBackend, replicas=3)


def test_a_backend_that_cannot_be_built_is_named_with_its_node(cluster):
    with pytest.raises(BackendError, match=r'on node \w+ \(127\.0\.0\.1\): the backend could not be built: '
                                           r'SettingError: .*base_urls must be'):
        pu.backends.RayBackend('openai:m', replicas=1, base_urls=['ftp://127.0.0.1'])


def test_a_worker_raising_on_one_prompt_stops_the_run_naming_its_query_and_node(cluster, tmp_path):
    path = tmp_path / 'answers.sqlite'
    # Two prompts per batch: 'question 7' shares its batch with 'question 6', and is still the one named.
    raising = functools.partial(ScriptedBackend, fail_on='question 7', batch_size=4)
    with pu.backends.RayBackend(raising, replicas=2) as backend:
        cache = pu.GenerationCache(backend, path)
        with pytest.raises(BackendError) as raised:
            cache.answer(PROMPTS, SEEDS)
    message = str(raised.value)
    assert '\n' not in message
    assert "answering the prompt of the query 'question 7': ValueError: scripted failure" in message
    assert any(f"node {a['node_id'][:12]} (127.0.0.1)" in message for a in backend.nodes)
    kept = cache.generated
    assert 0 < kept < 20 and stored(path) == kept
    assert f'[{kept} answers of the batches completed are in the cache' in message
    with pu.backends.RayBackend(ScriptedBackend, replicas=2) as backend:
        assert answered(pu.GenerationCache(backend, path)) == (EXPECTED, 20 - kept)


def killing(tmp_path):
    """The scripted backend whose actor SIGKILLs itself on the batch of 'question 8', once (a file says
    it has): each actor answers two batches (four answers) before it is sent that one."""
    return functools.partial(ScriptedBackend, kill_on='question 8', marker=str(tmp_path / 'killed'))


def test_a_worker_killed_mid_run_without_restarts_stops_it_and_a_rerun_generates_the_rest(cluster, tmp_path):
    path = tmp_path / 'answers.sqlite'
    with pu.backends.RayBackend(killing(tmp_path), replicas=2, max_restarts=0) as backend:
        cache = pu.GenerationCache(backend, path)
        with pytest.raises(BackendError, match=r"the actor on node \w+ \(127\.0\.0\.1\) died .*'question 8'.*"
                                               r'restarted 0 times before'):
            cache.answer(PROMPTS, SEEDS)
    assert (tmp_path / 'killed').exists()
    kept = cache.generated
    assert 4 <= kept < 20 and stored(path) == kept
    with pu.backends.RayBackend(ScriptedBackend, replicas=2) as backend:
        assert answered(pu.GenerationCache(backend, path)) == (EXPECTED, 20 - kept)


def test_a_worker_killed_mid_run_is_restarted_and_answers_the_batches_it_held(cluster, tmp_path):
    path = tmp_path / 'answers.sqlite'
    with pu.backends.RayBackend(killing(tmp_path), replicas=2, max_restarts=1) as backend:
        assert answered(pu.GenerationCache(backend, path)) == (EXPECTED, 20)
        assert (tmp_path / 'killed').exists()
        assert stored(path) == 20
        assert answered(pu.GenerationCache(backend, path)) == (EXPECTED, 0)


@pytest.fixture(scope='module')
def offline_prompts(cranfield):
    """Four Cranfield queries, each with one and two contexts (the second prompt extends the first)."""
    topics = cranfield.get_topics().head(4)
    docnos = list(cranfield.get_qrels()['docno'].unique()[:8])
    texts = [cranfield.texts[d][:300] for d in docnos]
    return [PROMPT_FORMATS['plain'].build(q, texts[2 * i:2 * i + k]) for i, q in enumerate(topics['query'])
            for k in (1, 2)]


@pytest.mark.slow
def test_the_offline_reader_on_ray_gives_the_in_process_answers_bit_for_bit(cluster, offline_prompts, tmp_path):
    """Seeded sampling, two answers per prompt, batches of four answers: four batches over two actors,
    each with one torch thread; in process, one batch, on one thread too (where the reader's tiles hold
    at one number of threads only, its batching names it; test_invariance checks the threads). The
    reader is batch-invariant, so the batches do not change a bit."""
    settings = dict(max_new_tokens=8, batch_size=4, temperature=0.7)
    with one_thread():
        local = pu.backends.gemma3_270m(**dict(settings, batch_size=32))
        here = pu.GenerationCache(local, tmp_path / 'here.sqlite')
        expected = here.answer(offline_prompts, SEEDS)
    with pu.backends.RayBackend('gemma3-270m', replicas=2, **settings) as backend:
        assert backend.generation_key == local.generation_key
        assert backend.tokenizer is not None and backend.max_input_length == local.max_input_length
        there = pu.GenerationCache(backend, tmp_path / 'there.sqlite')
        got = there.answer(offline_prompts, SEEDS)
        assert [[(a.text, a.logprob, a.tokens, a.truncated) for a in row] for row in got] == \
               [[(a.text, a.logprob, a.tokens, a.truncated) for a in row] for row in expected]
        # One cache file serves both: what one wrote, the other finds.
        assert pu.GenerationCache(backend, tmp_path / 'here.sqlite').answer(offline_prompts, SEEDS) == expected
    with one_thread():
        reread = pu.GenerationCache(local, tmp_path / 'there.sqlite')
        assert reread.answer(offline_prompts, SEEDS) == expected and reread.generated == 0


def test_the_study_command_takes_ray_and_replicas_and_records_them(cluster, tmp_path):
    with pytest.raises(SystemExit):
        cli.main(['study', '--replica-gpus', '1', '--out', str(tmp_path)])
    args = cli.parser().parse_args(['study', '--ray', 'auto', '--replicas', '2'])
    assert cli.placement(args) == Placement(ray='auto', replicas=2)
    assert 'ray' not in cli.explicit_settings(args) and 'replicas' not in cli.explicit_settings(args)
    with pytest.raises(SystemExit):
        cli.parser().parse_args(['study', '--ray', 'somewhere'])
    with pytest.raises(SystemExit):
        cli.parser().parse_args(['experiment', '--ray', 'auto'])


@pytest.mark.slow
def test_a_study_on_ray_gives_the_tables_of_the_study_in_process(cluster, tmp_path):
    """The offline reader's study through ``--ray``, then in process (this process's batches, not the
    actors' batches; on one thread, as each actor runs, for CPUs where the reader's tiles hold at one
    number of threads only): the same answers, per-query scores and Table 1, byte for byte;
    settings.json says where."""
    options = ['study', '--systems', 'Rel', '--no-reverse', '-k', '1', '--queries', '2', '--samples', '2',
               '--max-new-tokens', '8', '--labels', '2']
    assert cli.main([*options, '--out', str(tmp_path / 'ray'), '--ray', 'auto', '--replicas', '2']) == 0
    with one_thread():
        assert cli.main([*options, '--out', str(tmp_path / 'here')]) == 0
    for name in ('answers.csv', 'per_query.csv', 'table1.csv'):
        assert (tmp_path / 'ray' / name).read_bytes() == (tmp_path / 'here' / name).read_bytes(), name
    engine = json.loads((tmp_path / 'ray' / 'settings.json').read_text())['engines']['gemma3-270m']
    assert engine['placement']['runner'] == 'ray' and engine['placement']['replicas'] == 2
    assert len({a['node_id'] for a in engine['placement']['actors']}) == 2
    assert all(a['device'].startswith('CPU ') for a in engine['placement']['actors'])
    assert 'on Ray' in engine['reproducibility'] and 'generation cache are reproducible, always' in \
        engine['reproducibility']
    assert 'placement' not in json.loads((tmp_path / 'here' / 'settings.json').read_text())['engines']['gemma3-270m']


#: The child's reader on the test cluster: the scripted backend on an actor answering its first batch at once
#: and holding every later one for a minute.
HELD_ON_RAY = '''
from support.scripted import ScriptedBackend
held = functools.partial(ScriptedBackend, batch_size=2, hold=60, quick=1)
Pool = pu.backends.RayBackend
pu.backends.RayBackend = lambda name, replicas, address, **options: Pool(held, replicas, address=address)
'''


def test_ctrl_c_stops_a_study_on_ray_in_one_line(cluster, tmp_path):
    """Ctrl-C as a terminal gives it while the study's actor holds a batch for a minute: the study exits 130
    within 5 s, saying in one line that the 2 answers of the first batch are kept, and the actor ends with
    it. (One actor: a second would add only its start, about 15 s of imports.)"""
    out = tmp_path / 'study'
    argv = ['study', '--systems', 'Rel', '--no-reverse', '-k', '1', '--queries', '3', '--samples', '2', '--labels',
            '2', '--ray', cluster.address, '--replicas', '1', '--out', str(out)]
    done = interrupt_command(argv, HELD_ON_RAY, lambda: answers_in(out / 'generations.sqlite') >= 2)
    assert done.returncode == 130, done.stderr[-6000:]
    assert done.after == [f'pyterrier-utility study: interrupted; 2 answers are kept in {out}/generations.sqlite, '
                          'and the same command goes on from them'], done.stderr[-6000:]
    assert done.seconds < 5, done.stderr[-6000:]
    assert answers_in(out / 'generations.sqlite') == 2
    deadline = time.monotonic() + 30  # the actor, holding its batch for a minute, ends with the command
    while ray.available_resources().get('CPU', 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get('CPU', 0) == 2
