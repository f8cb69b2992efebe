"""Shared fixtures. Caches live in a temporary folder and the hub is off: nothing downloads."""
import os
import tempfile

# One folder for the whole run, removed when it ends by the process that made it: under pytest-xdist the
# controller makes it and its workers inherit it (each worker's homes in a folder of its own).
_OWNER = None if os.environ.get('PU_TESTS_DIR') else os.getpid()
if _OWNER:
    os.environ['PU_TESTS_DIR'] = tempfile.mkdtemp(prefix='pu-tests-')
_RUN_DIR = os.environ['PU_TESTS_DIR']
_TMP = os.path.join(_RUN_DIR, os.environ.get('PYTEST_XDIST_WORKER', 'main'))
for var in ('PYTERRIER_HOME', 'IR_DATASETS_HOME', 'HF_HOME', 'MPLCONFIGDIR'):
    os.environ[var] = os.path.join(_TMP, var.lower())
os.environ['HF_HUB_OFFLINE'] = '1'
os.environ['TRANSFORMERS_OFFLINE'] = '1'
# Converting the offline reader takes a minute; a developer may keep the result between runs. The
# workers of one pytest-xdist run (``make test`` runs two) share one cache: the converted models,
# indices and score caches are built by one of them while the others wait, then read by all.
_CACHE = os.path.join(_RUN_DIR, 'cache')
os.environ['PYTERRIER_UTILITY_CACHE'] = os.environ.get('PYTERRIER_UTILITY_TEST_CACHE') or _CACHE
# Each worker's torch (and the studies, servers and replicas it starts) runs its share of the cores: two
# workers of two threads each on two cores wait on each other's OpenMP barriers, 3.5 times as long
# (benchmarks/bench_suite_threads.py).
_WORKERS = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT') or 1)
if _WORKERS > 1 and 'OMP_NUM_THREADS' not in os.environ:
    os.environ['OMP_NUM_THREADS'] = str(max(1, (os.cpu_count() or 1) // _WORKERS))

import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from support.backends import CountingBackend  # noqa: E402


@pytest.fixture(autouse=True)
def reader_in_process(monkeypatch):
    """The study's reader in this process, as under ``make test``'s workers of one thread each: by
    default a CPU reader runs as one replica thread per torch thread, each holding a copy of the
    backend built for them, so a test standing in a backend without ``thread_replica`` for the
    reader (``get_backend`` patched) would be refused when run alone on more threads. Tests of the
    replicas give their number."""
    import pyterrier_utility.backends as backends
    monkeypatch.setattr(backends, 'cpu_replicas', lambda: 1)


@pytest.fixture
def counting_backend():
    return CountingBackend()


@pytest.fixture
def small_folder(tmp_path):
    """A collection folder of two queries (:mod:`support.folders`), its path."""
    from support.folders import write_folder
    return write_folder(tmp_path / 'collection')


@pytest.fixture(scope='session')
def cranfield():
    import pyterrier_utility as pu
    return pu.datasets.cranfield()


@pytest.fixture(scope='session')
def minilm():
    from pyterrier_utility import BertScore
    return BertScore('minilm')


@pytest.fixture(scope='session')
def gemma():
    """The offline Gemma in floats (bfloat16 where the CPU computes it natively, else float32): the model the
    batch-invariant float path computes."""
    from pyterrier_utility import backends
    from pyterrier_utility.backends.hf.dtype import resolve_dtype
    return backends.gemma3_270m(temperature=0, max_new_tokens=8, batch_size=4, dtype=resolve_dtype('auto', 'cpu'))


@pytest.fixture(scope='session')
def gemma_exact(gemma):
    """The offline Gemma computed exactly (``dtype='exact'``), from ``gemma``'s model."""
    from pyterrier_utility import backends
    return backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='gemma-test', dtype='exact',
                                    temperature=1.0, top_k=50, max_new_tokens=12)


@pytest.fixture
def results():
    """A small result frame given out of rank order."""
    return pd.DataFrame([
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd2', 'text': 'second doc', 'score': 5.0, 'rank': 1},
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd1', 'text': 'first doc', 'score': 1.0, 'rank': 0},
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd3', 'text': 'third doc', 'score': 0.5, 'rank': 2},
        {'qid': 'q2', 'query': 'what is drag', 'docno': 'd4', 'text': 'drag doc', 'score': 2.0, 'rank': 0},
    ])


def pytest_unconfigure(config):
    """The run's folder goes when the run ends (its cache of converted models holds about 2 GB)."""
    if _OWNER == os.getpid():
        import shutil
        shutil.rmtree(_RUN_DIR, ignore_errors=True)


def pytest_configure(config):
    """The suite's markers: ``pytest -m 'not engine and not slow'`` is the fast suite a developer runs
    alone; CI runs everything."""
    for marker, meaning in (
            ('engine', 'starts a real inference engine (vLLM CPU, llama.cpp server): minutes to start'),
            ('server', 'starts a real OpenAI-compatible server process'),
            ('browser', 'drives headless Chromium'),
            ('slow', 'runs a study or generates with a real model: more than a few seconds'),
            ('ray', 'starts a two-node Ray cluster on 127.0.0.1: skipped where ray is not installed'),
            ('gpu', 'needs a GPU: skipped without one')):
        config.addinivalue_line('markers', f'{marker}: {meaning}')


#: The modules that take minutes (real engines, servers, installs, studies), longest first: collected
#: first, so that ``make test``'s workers start on them and finish together (each worker takes a
#: whole module at a time, the next in this order).
LONG_MODULES = ('test_engines_vllm', 'test_exact', 'test_install', 'test_invariance', 'test_health',
                'test_attribution', 'test_study', 'test_backends_ray', 'test_prediction', 'test_cache')
#: Collected after the long modules, before the short ones: llama.cpp's server, which ``make test``
#: builds in the background meanwhile. The worker that takes it waits for the build if it must (its core
#: goes to the compiler), and the other worker's short modules keep the second core busy meanwhile,
#: rather than the module running alone at the end.
AFTER_LONG_MODULES = ('test_engines_llamacpp',)


def _module_order(item) -> int:
    name = item.module.__name__.rsplit('.', 1)[-1] if getattr(item, 'module', None) else ''
    if name in AFTER_LONG_MODULES:
        return len(LONG_MODULES) + AFTER_LONG_MODULES.index(name)
    return LONG_MODULES.index(name) if name in LONG_MODULES else len(LONG_MODULES) + len(AFTER_LONG_MODULES)


def pytest_collection_modifyitems(config, items):
    """A test that drives headless Chromium (the ``browser`` fixture) is marked ``browser``; the
    :data:`LONG_MODULES` come first, then the :data:`AFTER_LONG_MODULES`, then the rest, each module's
    tests in their own order."""
    for item in items:
        if 'browser' in getattr(item, 'fixturenames', ()):
            item.add_marker(pytest.mark.browser)
    items.sort(key=_module_order)  # stable: the other modules keep their order


@pytest.fixture(scope='module')
def browser():
    """Headless Chromium, one per test module; in CI (CI=true) its absence fails the test instead of
    skipping it."""
    try:
        from support.browser import Browser, executable
        path = executable()
    except ImportError as e:
        path, why = None, f'{e} (pip install -r requirements-test.txt)'
    else:
        why = 'no Chromium on PATH (apt-get install chromium)'
    if path is None:
        if os.environ.get('CI') == 'true':
            pytest.fail(f'{why}: .ci/run installs it')
        pytest.skip(why)
    with Browser(path) as b:
        yield b
