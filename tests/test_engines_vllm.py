"""vLLM for real: its CPU build (``make vllm-cpu``) with the offline Gemma, in process and as a pool of
servers, as the README says to run them. Each engine start takes minutes on 2 cores: one pool of
servers is shared by the module's tests."""
import json
import os
import subprocess
import threading
import time

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from support.servers import VLLM_CPU_FLAGS, VLLMServer, vllm_python
from support.vllm_checks import a_stop_inside

import pyterrier_utility as pu
from pyterrier_utility import study as ex
from pyterrier_utility.errors import BackendError

pytestmark = [pytest.mark.engine, pytest.mark.slow]

#: A small study's options, for the command line in vLLM's virtualenv and for servers alike.
SMALL = ['--queries', '2', '-k', '1', '3', '--samples', '2', '--systems', 'Rel', '--labels', '2',
         '--temperature', '0.8', '--max-new-tokens', '12', '--seed', '3']


def vllm_env(tmp_path):
    return dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1', VLLM_CPU_KVCACHE_SPACE='2',
                PYTERRIER_HOME=str(tmp_path / 'pt'), IR_DATASETS_HOME=str(tmp_path / 'irds'))


def run_in_vllm_venv(args, tmp_path, timeout=1200):
    result = subprocess.run([str(vllm_python()), *args], capture_output=True, text=True, env=vllm_env(tmp_path),
                            timeout=timeout, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def test_in_process_backend_on_the_cpu_build(tmp_path):
    checks = os.path.join(os.path.dirname(__file__), 'support', 'vllm_checks.py')
    run_in_vllm_venv([checks, str(tmp_path / 'seen.json')], tmp_path)
    seen = json.loads((tmp_path / 'seen.json').read_text())
    # The backend turned chunked prefill off itself, and says so.
    assert seen['engine_settings'] == {'enable_prefix_caching': True, 'enable_chunked_prefill': False,
                                       'max_model_len': 8192, 'max_num_batched_tokens': 8192}
    assert seen['max_input_length'] == 8192
    assert 'generation cache only' in seen['reproducibility']
    first, again = seen['seeded']
    assert first == again and len(set(first)) > 1
    assert seen['greedy'][0] == seen['greedy'][1] and len(set(seen['greedy'][0])) == 1
    text, truncated, tokens, logprob = seen['short']
    assert truncated is True and tokens == 3 and logprob < 0
    assert seen['unstopped'][0].find(seen['stop']) > 0
    assert seen['stopped'][0] == seen['unstopped'][0].split(seen['stop'])[0].strip() and seen['stopped'][1] is False
    # 14 seeded prompts past a step's budget: answered, none lost to the CPU engine's chunked-prefill crash.
    # Each has tokens and their log-probability; a text may be white space alone (sampled at
    # temperature 1, seen in bfloat16: 16 tokens of it).
    assert len(seen['crowd']) == 14 and all(n and lp < 0 for _, _, n, lp in seen['crowd'])


def test_the_readme_command_in_process_is_reproducible_on_fresh_engines(tmp_path):
    model = str(pu.backends.gemma3_270m_path())
    runs = [tmp_path / name for name in ('a', 'b')]
    # Two processes at once, each with its fresh engine (a start is mostly one core importing).
    command = [str(vllm_python()), '-m', 'pyterrier_utility.cli', 'study', '--reader', f'vllm:{model}',
               '--reproducible', *SMALL]
    logs = [tmp_path / f'{out.name}.log' for out in runs]  # files, not pipes: neither waits on its reader
    started = [subprocess.Popen(command + ['--out', str(out)], stdout=log.open('w'), stderr=subprocess.STDOUT,
                                env=vllm_env(tmp_path / f'home-{out.name}'), cwd=tmp_path)
               for out, log in zip(runs, logs)]
    for process, log in zip(started, logs):
        assert process.wait(timeout=1500) == 0, log.read_text()[-4000:]
    answers = [pd.read_csv(out / 'answers.csv') for out in runs]
    assert len(answers[0]) > 10 and answers[0]['logprob'].notna().all()
    assert_frame_equal(answers[0], answers[1])
    settings = json.loads((runs[0] / 'settings.json').read_text())
    engine = settings['engines'][f'vllm:{model}']
    assert settings['reproducible'] is True and engine['reproducibility'].startswith('fresh generation reproducible')
    assert engine['settings']['max_num_seqs'] == 1 and engine['settings']['enable_chunked_prefill'] is False
    assert engine['settings']['enable_prefix_caching'] is False and engine['settings']['enforce_eager'] is True


def test_a_server_left_with_chunked_prefill_stops_the_study_with_its_first_error_and_the_flag(tmp_path, cranfield):
    # vllm-cpu's defaults otherwise: chunked prefill on, a step's budget of 4096 tokens
    flags = ('--max-model-len', '8192', '--dtype', VLLM_CPU_FLAGS[3], '--enforce-eager')
    server = VLLMServer(pu.backends.gemma3_270m_path(), tmp_path / 'server.log', flags=flags).start()
    try:
        server.wait_ready()
        cache = pu.GenerationCache(backend([server], concurrency=4, logprobs=False), tmp_path / 'g.sqlite')
        # Prompts of about 5000 tokens: past a step's budget, each is prefilled in chunks, whatever
        # arrives with it, so the first seeded one kills the engine before any answer is made.
        long = ' '.join(['the wing of an aircraft produces lift by deflecting the air downward'] * 420)
        prompts = [f'Context {i}: {long}\nQuestion: what is lift?\nAnswer:' for i in range(3)]
        with pytest.raises(BackendError) as e:
            cache.generate(prompts, seeds=list(range(3)))
    finally:
        server.kill()
    message = str(e.value)
    assert server.url in message and 'the first error a server gave' in message and 'HTTP 500' in message
    assert '--no-enable-chunked-prefill' in message
    assert 'CPU Generator does not use offset' in server.log.read_text()
    assert len(cache) == 0  # nothing but answers is ever stored, and there were none


@pytest.fixture(scope='module')
def pool(tmp_path_factory):
    model = pu.backends.gemma3_270m_path()
    logs = tmp_path_factory.mktemp('vllm-servers')
    servers = [VLLMServer(model, logs / f'server{i}.log').start() for i in range(2)]
    try:
        yield [s.wait_ready() for s in servers]
    finally:
        for s in servers:
            s.kill()


def backend(servers, **kw):
    kw = dict(dict(temperature=0.8, top_k=50, max_new_tokens=12, concurrency=4, max_retries=2, backoff=0.2,
                   logprobs=True), **kw)
    return pu.backends.OpenAICompatibleBackend('gemma', [s.url for s in servers], **kw)


def test_a_pool_of_vllm_servers_honours_seeds_limits_stops_and_reports_logprobs(pool):
    prompt = 'Question: what is the lift of a wing?\nAnswer:'
    b = backend(pool, reproducible=True)
    first = [a.text for a in b.generate([prompt] * 4, seeds=[1, 2, 3, 4])]
    assert first == [a.text for a in b.generate([prompt] * 4, seeds=[1, 2, 3, 4])] and len(set(first)) > 1
    greedy = backend(pool, temperature=0)
    assert len({a.text for a in greedy.generate([prompt] * 4, seeds=[1, 2, 3, 4])}) == 1
    short = b.with_settings(max_new_tokens=3).generate([prompt], seeds=[1])[0]
    assert short.truncated is True and short.tokens == 3 and short.logprob < 0
    whole = greedy.with_settings(stop=[]).generate([prompt], seeds=[1])[0]
    stop = a_stop_inside(whole.text)
    cut = greedy.with_settings(stop=[stop]).generate([prompt], seeds=[1])[0]
    assert whole.text.find(stop) > 0
    assert cut.text == whole.text.split(stop)[0].strip() and cut.truncated is False


def small_study(reader, cranfield):
    qrels = cranfield.get_qrels()
    topics = pu.datasets.answerable_topics(cranfield.get_topics(), qrels, 2).head(2)
    systems = {'Rel': pu.OracleSampler(qrels, cranfield.texts, labels=2),
               'NRel': pu.OracleSampler(qrels, cranfield.texts, relevant=False, fill_unjudged=True)}
    return ex.run_study(topics, qrels, systems, reader, cranfield.texts, ks=[1], label_sets=[2],
                        bertscore='minilm', verbose=False)


def test_reproducible_studies_over_a_warm_pool_give_the_same_answers(pool, tmp_path, capsys):
    from pyterrier_utility import cli
    outs = []
    for name in ('a', 'b'):
        outs.append(tmp_path / name)
        code = cli.main(['study', '--reader', 'openai:gemma', '--base-url', *[s.url for s in pool],
                         '--concurrency', '8', '--reproducible', *SMALL, '--out', str(outs[-1])])
        assert code == 0
    printed = capsys.readouterr().err
    assert 'openai:gemma: fresh generation reproducible' in printed
    first, second = (pd.read_csv(out / 'answers.csv') for out in outs)
    assert len(first) > 10
    assert_frame_equal(first, second)
    settings = json.loads((outs[0] / 'settings.json').read_text())
    assert settings['engines']['openai:gemma']['reproducibility'].startswith('fresh generation reproducible')


def test_a_killed_server_stops_the_study_and_the_rerun_generates_only_the_rest(pool, tmp_path, cranfield):
    server = pool[0]
    whole_cache = tmp_path / 'whole.sqlite'
    whole = small_study(pu.Reader(pu.GenerationCache(backend([server], reproducible=True), whole_cache),
                                  n_samples=2), cranfield)
    total = whole.generated
    killed_cache = tmp_path / 'killed.sqlite'
    failure = []

    def run():
        try:
            small_study(pu.Reader(pu.GenerationCache(backend([server], reproducible=True), killed_cache),
                                  n_samples=2), cranfield)
        except BaseException as e:  # the test inspects it
            failure.append(e)

    before = server.answered()
    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 300
    while server.answered() < before + 3 and time.time() < deadline and thread.is_alive():
        time.sleep(0.05)
    assert thread.is_alive(), 'the study finished before the server could be killed'
    server.kill()
    thread.join(timeout=300)
    assert len(failure) == 1 and isinstance(failure[0], BackendError)
    assert server.url in str(failure[0]) and 'after 2 retries' in str(failure[0])

    # The rerun goes to the pool's other server (a restart would cost another engine start).
    other = pool[1]
    reader = pu.Reader(pu.GenerationCache(backend([other], reproducible=True), killed_cache), n_samples=2)
    before = other.answered()
    resumed = small_study(reader, cranfield)
    assert 0 < resumed.generated == other.answered() - before < total
    # Each answer computed alone, on either server: the resumed study is the uninterrupted one.
    assert_frame_equal(resumed.answers, whole.answers)
    assert_frame_equal(resumed.per_query, whole.per_query)
