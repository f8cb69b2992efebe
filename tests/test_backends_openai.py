"""OpenAICompatibleBackend: what each request carries, retries, the pool, failures (against the
simulated endpoint of simulated_server.py; the real-server tests are in test_server.py)."""
import ctypes
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from support.simulated_server import SimulatedServer, simulated_answer

import pyterrier_utility as pu
from pyterrier_utility.backends import OpenAICompatibleBackend
from pyterrier_utility.errors import BackendError, SettingError


def backend(urls, **kw):
    return OpenAICompatibleBackend('sim-model', urls, **dict(dict(backoff=0.01, max_retries=2), **kw))


def test_every_setting_and_a_seed_per_sample_is_in_each_request():
    with SimulatedServer() as server:
        b = backend(server.url, temperature=0.3, top_k=50, top_p=0.9, max_new_tokens=300, repetition_penalty=1.1,
                    extra_body={'min_p': 0.05}, api_key='secret')
        out = pu.Reader(b, n_samples=3, seed=10, stop=['STOP', '\nQuestion:'])(
            pd.DataFrame({'qid': ['q1'], 'query': ['what is lift?']}))
    assert sorted(body['seed'] for body in server.bodies) == [10, 11, 12]
    body = server.bodies[0]
    assert {k: body[k] for k in body if k not in ('seed', 'prompt')} == {
        'model': 'sim-model', 'max_tokens': 300, 'n': 1, 'temperature': 0.3, 'top_k': 50, 'top_p': 0.9,
        'repetition_penalty': 1.1, 'min_p': 0.05, 'stop': ['STOP', '\nQuestion:']}
    assert body['prompt'] == pu.Reader(b).prompter.build_prompt('what is lift?')
    assert set(server.paths) == {'/v1/completions'}
    assert all(h['Authorization'] == 'Bearer secret' for h in server.headers)
    assert list(out.sort_values('sample')['qanswer']) == [simulated_answer(body['prompt'], s) for s in (10, 11, 12)]


def test_min_p_and_the_penalty_window_are_sent_under_llama_cpps_names():
    with SimulatedServer() as server:
        b = backend(server.url, min_p=0.05, repetition_penalty=1.1, repeat_last_n=64)
        b.generate(['p'], seeds=[1])
    assert (server.bodies[0]['min_p'], server.bodies[0]['repeat_last_n']) == (0.05, 64)
    assert "vLLM's server ignores it" in b.decoding_notes['repeat_last_n']
    assert 'min_p' not in b.decoding_notes


def test_top_k_zero_is_sent_as_all_tokens_none_is_not_sent_and_chat_sends_a_message(monkeypatch):
    monkeypatch.delenv('OPENAI_API_KEY', raising=False)
    with SimulatedServer() as server:
        backend(server.url, top_k=0).generate(['p'])
        backend(server.url, top_k=None, endpoint='chat').generate(['q'], seeds=[4])
    assert server.bodies[0]['top_k'] == -1
    assert 'top_k' not in server.bodies[1] and server.bodies[1]['messages'] == [{'role': 'user', 'content': 'q'}]
    assert server.paths == ['/v1/completions', '/v1/chat/completions']
    assert 'Authorization' not in server.headers[0]


def test_429_and_5xx_are_retried_then_answered():
    failing = {0: 503, 1: 429}
    with SimulatedServer(fail=lambda body, n: failing.get(n)) as server:
        b = backend(server.url, max_retries=3)
        assert [o.text for o in b.generate(['a'], seeds=[1])] == [simulated_answer('a', 1)]
    assert len(server.bodies) == 3


def test_after_the_last_retry_the_error_names_endpoint_and_status_and_finished_answers_are_kept(tmp_path):
    with SimulatedServer(fail=lambda body, n: 503 if 'bad' in body['prompt'] else None) as server:
        cache = pu.GenerationCache(backend(server.url, concurrency=3, max_retries=2), tmp_path / 'g.sqlite')
        with pytest.raises(BackendError, match=rf'{server.url}/completions: HTTP 503.*after 2 retries') as e:
            cache.generate(['good one', 'bad', 'good two'], seeds=[0, 0, 0])
    assert 'are in the cache' in str(e.value)
    kept = pu.GenerationCache(backend('http://127.0.0.1:9/v1'), tmp_path / 'g.sqlite')
    assert len(kept) == 2  # both good answers, nothing for the failed prompt
    assert [o.text for o in kept.generate(['good one', 'good two'])] == [simulated_answer('good one', 0),
                                                                         simulated_answer('good two', 0)]


def test_a_client_error_is_not_retried_and_names_the_non_standard_fields():
    with SimulatedServer(fail=lambda body, n: 400) as server:
        with pytest.raises(BackendError, match=r"HTTP 400.*non-standard fields sent: \['top_k'\]"):
            backend(server.url).generate(['p'])
    assert len(server.bodies) == 1


@pytest.mark.parametrize('text', [None, 3])
def test_a_response_without_a_text_answer_is_an_error(text):
    with SimulatedServer(text=lambda prompt, seed: text) as server:
        with pytest.raises(BackendError, match='answer text is|no answer text'):
            backend(server.url).generate(['p'])


def test_a_response_with_more_choices_than_asked_for_is_refused_naming_the_endpoint_and_nothing_is_stored(tmp_path):
    with SimulatedServer(choices=lambda prompt: 2 if prompt == 'b' else 1) as server:
        cache = pu.GenerationCache(backend(server.url, concurrency=1), tmp_path / 'g.sqlite')
        with pytest.raises(BackendError) as e:
            cache.generate(['a', 'b'])
    assert [body['n'] for body in server.bodies] == [1, 1]
    assert str(e.value) == (f'{server.url}/completions: the response holds 2 choices where 1 was asked for (n: 1); '
                            'nothing of it was stored [1 answers of the failed batch and all earlier batches are in '
                            'the cache; a re-run generates only what is missing]')
    kept = pu.GenerationCache(backend('http://127.0.0.1:9/v1'), tmp_path / 'g.sqlite')
    assert len(kept) == 1 and kept.generate(['a'])[0].text == simulated_answer('a', 0)


VLLM_TOO_LONG = {'error': {'message': "This model's maximum context length is 4096 tokens. However, you requested "
                                      '5000 tokens (4700 in the messages, 300 in the completion). Please reduce the '
                                      'length of the messages or completion.',
                           'type': 'BadRequestError', 'param': None, 'code': 400}}
LLAMACPP_TOO_LONG = {'error': {'code': 400, 'message': 'the request exceeds the available context size, try '
                                                       'increasing it',
                               'type': 'exceed_context_size_error', 'n_prompt_tokens': 5000, 'n_ctx': 4096}}


@pytest.mark.parametrize('refusal', [VLLM_TOO_LONG, LLAMACPP_TOO_LONG], ids=['vllm', 'llama.cpp'])
def test_a_prompt_longer_than_the_servers_context_stops_the_call_in_one_line_naming_it_and_what_to_do(
        tmp_path, refusal):
    prompt = pu.Reader(backend('http://h/v1')).prompter.build_prompt('what is lift?', ['lift ' * 3000])
    with SimulatedServer(fail=lambda body, n: 400 if len(body['prompt']) > 1000 else None,
                         error=lambda status: refusal) as server:
        cache = pu.GenerationCache(backend(server.url, concurrency=1, max_new_tokens=300), tmp_path / 'g.sqlite')
        with pytest.raises(BackendError) as e:
            cache.generate(['short', prompt])
    assert len(server.bodies) == 2  # a client error is not retried
    assert str(e.value) == (
        f"{server.url}/completions: HTTP 400: {refusal['error']['message']}; the prompt of the query 'what is lift?' "
        "(15239 characters) and max_tokens 300 do not fit the server's context: ask for fewer new tokens "
        "(--max-new-tokens), start the server with a longer context (vLLM's --max-model-len, llama.cpp's --ctx-size), "
        "give shorter or fewer documents (-k), or give the backend the model's tokenizer and the server's context "
        "length (tokenizer=, max_input_length=) so that the Reader truncates the documents to fit [1 answers of the "
        "failed batch and all earlier batches are in the cache; a re-run generates only what is missing]")
    assert len(pu.GenerationCache(backend('http://127.0.0.1:9/v1'), tmp_path / 'g.sqlite')) == 1


def test_a_study_given_a_prompt_longer_than_the_servers_context_names_its_qid_and_documents(tmp_path, capsys):
    from pyterrier_utility import cli
    folder = tmp_path / 'collection'
    folder.mkdir()
    (folder / 'docs.tsv').write_text('D1\t' + 'lift ' * 40000 + '\nD2\tthe wing stalls\nD3\tdrag rises\n')
    (folder / 'topics.tsv').write_text('1\twhy does the wing stall\n2\twhat is drag\n')
    (folder / 'qrels').write_text('1 0 D1 2\n1 0 D2 2\n2 0 D3 2\n')
    with SimulatedServer(fail=lambda body, n: 400 if len(body['prompt']) > 100000 else None,
                         error=lambda status: VLLM_TOO_LONG) as server:
        with pytest.raises(SystemExit):
            cli.main(['study', '--dataset', str(folder), '--reader', 'openai:sim', '--base-url', server.url,
                      '--systems', 'Rel', '--no-reverse', '-k', '2', '--queries', '0', '--samples', '1', '--labels',
                      '2', '--max-retries', '0', '--out', str(tmp_path / 'out')])
    said = capsys.readouterr().err.splitlines()[-1]
    assert said.startswith(f"pyterrier-utility study: error: system Rel, k 2, qid 1, docnos ['D1', 'D2']: "
                           f"{server.url}/completions: HTTP 400: This model's maximum context length is 4096 tokens.")
    assert "; the prompt of the query 'why does the wing stall' (" in said


def test_requests_go_to_the_endpoint_with_the_fewest_in_flight():
    with SimulatedServer(latency=0.3) as slow, SimulatedServer(latency=0.01) as fast:
        b = backend([slow.url, fast.url], concurrency=2)
        answers = [o.text for o in b.generate([f'p{i}' for i in range(20)])]
    assert answers == [simulated_answer(f'p{i}', 0) for i in range(20)]
    assert len(slow.bodies) + len(fast.bodies) == 20
    assert 1 <= len(slow.bodies) <= 4 < len(fast.bodies)


def test_a_dead_endpoint_in_the_pool_is_retried_elsewhere():
    with SimulatedServer() as alive:
        b = backend(['http://127.0.0.1:9/v1', alive.url], concurrency=2, max_retries=1)
        assert [o.text for o in b.generate(['x', 'y', 'z'])] == [simulated_answer(p, 0) for p in 'xyz']


def test_settings_are_checked_and_the_backend_pickles():
    for bad in (dict(temperature=-1), dict(top_k=-2), dict(top_p=0), dict(max_new_tokens=0), dict(concurrency=0),
                dict(endpoint='edit'), dict(extra_body={'seed': 1}), dict(base_urls='localhost:8000')):
        with pytest.raises(SettingError):
            OpenAICompatibleBackend('m', **dict(dict(base_urls='http://h/v1'), **bad))
    b = backend('http://127.0.0.1:9/v1', temperature=0.7)
    clone = pickle.loads(pickle.dumps(b))
    assert clone.generation_key == b.generation_key and clone.base_urls == b.base_urls
    assert 'base_urls' not in str(b.generation_key)  # the same model on another server shares answers


def test_cache_key_follows_every_answer_changing_setting():
    keys = {pu.GenerationCache(backend('http://h/v1', **kw)).key('p', 1)
            for kw in (dict(), dict(temperature=0.5), dict(top_k=10), dict(top_p=0.5), dict(repetition_penalty=1.1),
                       dict(extra_body={'min_p': 0.1}), dict(endpoint='chat'))}
    assert len(keys) == 7
    assert (pu.GenerationCache(backend('http://a/v1')).key('p', 1)
            == pu.GenerationCache(backend(['http://b/v1', 'http://c/v1'])).key('p', 1))


def test_timeout_is_a_deadline_for_the_whole_response_not_for_each_read():
    # The answer arrives one byte every 0.2 s (~90 bytes: ~18 s in all); a 1.5 s timeout must hold.
    with SimulatedServer(trickle=0.2) as server:
        b = backend(server.url, timeout=1.5, max_retries=0)
        start = time.monotonic()
        with pytest.raises(BackendError, match=rf'{server.url}/completions: no complete answer within the 1.5 s'):
            b.generate(['p'])
        assert time.monotonic() - start < 3


def test_retry_deadline_bounds_the_whole_retry_sequence():
    with SimulatedServer(fail=lambda body, n: 503) as server:
        b = backend(server.url, backoff=0.4, max_retries=10, retry_deadline=1.0)
        start = time.monotonic()
        with pytest.raises(BackendError, match=r'HTTP 503.*retry deadline of 1 s'):
            b.generate(['p'])
        assert time.monotonic() - start < 1.5
    assert 2 <= len(server.bodies) <= 3  # attempts at 0, 0.4 s (then 0.8 s more would pass the deadline)


def test_retry_after_of_a_rate_limit_is_honoured():
    failing = {0: 429}
    with SimulatedServer(fail=lambda body, n: failing.get(n), retry_after='1') as server:
        b = backend(server.url, backoff=0.01, max_retries=2)
        start = time.monotonic()
        assert [o.text for o in b.generate(['a'])] == [simulated_answer('a', 0)]
        assert 1.0 <= time.monotonic() - start < 2.5
    assert len(server.bodies) == 2


def test_a_wait_a_rate_limit_asks_for_is_said_once_however_many_requests_hit_it(capsys):
    # Three requests in flight are refused together, wait, are refused together again, then answered.
    with SimulatedServer(fail=lambda body, n: 429 if n < 6 else None, retry_after='1') as server:
        b = backend(server.url, concurrency=3, max_retries=3)
        assert [o.text for o in b.generate(['a', 'b', 'c'])] == [simulated_answer(p, 0) for p in 'abc']
    assert len(server.bodies) == 9
    said = f'{server.url}: HTTP 429 (rate limited); waiting 1 s as Retry-After asks'
    assert capsys.readouterr().err.splitlines() == [said, said]


def test_an_endpoint_that_keeps_timing_out_leaves_the_pool_for_a_while(caplog):
    with SimulatedServer(hold=lambda body, n: 5) as hung, SimulatedServer() as alive:
        b = backend([hung.url, alive.url], concurrency=1, timeout=0.3, max_retries=1)
        b.breaker_failures, b.breaker_cooldown = 2, 30.0
        with caplog.at_level('WARNING', logger='pyterrier_utility.backends._openai'):
            answers = [o.text for o in b.generate([f'p{i}' for i in range(8)])]
    assert answers == [simulated_answer(f'p{i}', 0) for i in range(8)]
    assert len(hung.bodies) == 2  # two timeouts, then all its share goes to the live endpoint
    assert len(alive.bodies) == 8
    assert [r.getMessage() for r in caplog.records] == [
        f'{hung.url}: no answer 2 times in a row (the last: timed out); out of the pool for 30 s, its requests go '
        'to the other 1 endpoint(s)']


def test_an_answer_that_cannot_be_encoded_is_an_error_naming_the_endpoint_and_nothing_is_stored(tmp_path):
    with SimulatedServer(text=lambda prompt, seed: 'bad \ud800' if prompt == 'b' else 'fine ' + prompt) as server:
        cache = pu.GenerationCache(backend(server.url, concurrency=1), tmp_path / 'g.sqlite')
        with pytest.raises(BackendError, match=rf'{server.url}/completions: the answer cannot be encoded as UTF-8'):
            cache.generate(['a', 'b'])
        assert [o.text for o in cache.generate(['a', 'c'])] == ['fine a', 'fine c']
    assert len(server.bodies) == 3  # 'a' was kept from the failed call
    assert len(pu.GenerationCache(backend(server.url), tmp_path / 'g.sqlite')) == 2


def test_answers_cut_by_max_tokens_are_counted_and_flagged():
    with SimulatedServer(finish_reason=lambda prompt: 'length' if 'long' in prompt else 'stop') as server:
        b = backend(server.url)
        outs = b.generate(['long one', 'short', 'long two'])
        assert [o.truncated for o in outs] == [True, False, True]
        assert b.truncated == 2
        b.generate(['long three'])
        assert b.truncated == 3


@pytest.mark.parametrize('endpoint,asked', [('completions', 1), ('chat', True)])
def test_log_probabilities_are_asked_for_only_with_logprobs_and_summed_as_reported(endpoint, asked):
    with SimulatedServer(logprobs=True) as server:
        plain = backend(server.url, endpoint=endpoint).generate(['p'], seeds=[1])[0]
        outs = backend(server.url, endpoint=endpoint, logprobs=True).generate(['p', 'q'], seeds=[1, 2])
    assert 'logprobs' not in server.bodies[0] and [b['logprobs'] for b in server.bodies[1:]] == [asked, asked]
    assert (plain.logprob, plain.tokens) == (None, None)
    # The simulated answer has 3 words, of log-probabilities -1/8, -2/8, -3/8.
    assert [(o.text, o.logprob, o.tokens, o.mean_logprob) for o in outs] == [
        (simulated_answer('p', 1), -0.75, 3, -0.25), (simulated_answer('q', 2), -0.75, 3, -0.25)]
    assert [o.token_logprobs for o in outs] == [(-0.125, -0.25, -0.375)] * 2 and plain.token_logprobs is None


def test_a_server_that_ignores_the_request_for_log_probabilities_gives_none(tmp_path):
    with SimulatedServer() as server:
        cache = pu.GenerationCache(backend(server.url, logprobs=True), tmp_path / 'g.sqlite')
        out = cache.generate(['p'])[0]
    assert server.bodies[0]['logprobs'] == 1
    assert (out.text, out.logprob, out.tokens, out.truncated) == (simulated_answer('p', 0), None, None, False)
    again = pu.GenerationCache(backend('http://127.0.0.1:9/v1'), tmp_path / 'g.sqlite').generate(['p'])[0]
    assert (again.logprob, again.tokens, again.truncated) == (None, None, False)


def test_a_server_that_rejects_the_request_for_log_probabilities_is_told_to_go_without():
    with SimulatedServer(fail=lambda body, n: 400 if 'logprobs' in body else None) as server:
        with pytest.raises(BackendError, match=r'HTTP 400.*logprobs was asked for: a server that rejects it needs '
                                               r'logprobs=False'):
            backend(server.url, logprobs=True).generate(['p'])
        assert backend(server.url).generate(['p'])[0].text == simulated_answer('p', 0)


INTERRUPTED = '''
import atexit, faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for every thread's stack if it lingers
# Ctrl-C as in a terminal: a suite started in the background of a non-interactive shell (make test &)
# inherits SIGINT ignored, and so would this child, which then answered only when its requests ended.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {tests!r})
import pyterrier_utility as pu
from pyterrier_utility.backends import OpenAICompatibleBackend
b = OpenAICompatibleBackend('sim-model', {url!r}, concurrency=3, timeout=600, max_retries=5)
# Called once every thread that could hold the process has ended; what follows is the interpreter's
# own teardown of torch, pandas and PyTerrier.
atexit.register(lambda: print('exiting at', time.time(), file=sys.stderr, flush=True))
pu.GenerationCache(b, {path!r}).generate(['quick', 'hang 1', 'hang 2', 'hang 3'])
'''
#: Seconds the child may take for what this test does not time: importing torch and PyTerrier before
#: its first request, and tearing them down after the call has stopped (measured on a 2-core machine
#: at load averages of 5 to 9: 16-57 s to start, 2-7 s of teardown). Only a hang guard.
UNTIMED = 300
#: Seconds after the Ctrl-C past which the child is asked for its threads' stacks (its teardown after
#: the interrupt took 2-7 s at load averages of 5 to 9).
LINGER = 20


def interrupt_a_request_thread(pid: int) -> None:
    """SIGINT to a thread of ``pid`` other than its main one, as the kernel may deliver Ctrl-C."""
    tgkill = ctypes.CDLL(None, use_errno=True).tgkill
    # The newest first (a request's); a thread that ended meanwhile refuses it, the next one takes it.
    tids = sorted((int(t) for t in os.listdir(f'/proc/{pid}/task') if int(t) != pid), reverse=True)
    assert any(tgkill(pid, tid, signal.SIGINT) == 0 for tid in tids)


@pytest.mark.parametrize('to', ['process', 'thread'])
def test_one_ctrl_c_stops_a_call_with_requests_hanging_and_keeps_what_was_answered(tmp_path, to):
    with SimulatedServer(hold=lambda body, n: 0 if body['prompt'] == 'quick' else 60) as server:
        script = INTERRUPTED.format(tests=str(Path(__file__).parent), url=server.url, path=str(tmp_path / 'g.sqlite'))
        proc = subprocess.Popen([sys.executable, '-c', script], stderr=subprocess.PIPE, text=True)
        try:
            guard = time.monotonic() + UNTIMED
            # The worker that answered 'quick' sends 'hang 3' after handing the answer over: with four
            # requests received, the quick answer is in and three requests hang.
            while len(server.bodies) < 4 and proc.poll() is None and time.monotonic() < guard:
                time.sleep(0.05)
            assert len(server.bodies) == 4
            interrupted = time.time()
            proc.send_signal(signal.SIGINT) if to == 'process' else interrupt_a_request_thread(proc.pid)
            try:
                _, stderr = proc.communicate(timeout=LINGER)
            except subprocess.TimeoutExpired:  # still running: where each thread waits goes into the failure
                proc.send_signal(signal.SIGUSR1)
                _, stderr = proc.communicate(timeout=UNTIMED)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    exiting = [float(line.split()[-1]) for line in stderr.splitlines() if line.startswith('exiting at ')]
    assert len(exiting) == 1 and exiting[0] - interrupted < 5, stderr[-6000:]  # measured under load: 0.02-0.07 s
    assert 'KeyboardInterrupt' in stderr and proc.returncode == -signal.SIGINT
    kept = pu.GenerationCache(backend('http://127.0.0.1:9/v1', temperature=0.3), tmp_path / 'g.sqlite')
    assert len(kept) == 1


def test_reproducible_sends_one_request_per_endpoint_each_with_its_own_cache_salt():
    with SimulatedServer() as one, SimulatedServer() as two:
        b = backend([one.url, two.url], reproducible=True, concurrency=16)
        assert b.concurrency == 2 and b.reproducibility.startswith('fresh generation reproducible')
        b.generate(['a', 'a', 'b'], seeds=[1, 1, 2])
    salts = [body['cache_salt'] for body in one.bodies + two.bodies]
    assert len(salts) == 3 == len(set(salts))
    with SimulatedServer() as server:
        backend(server.url).generate(['a'])
    assert 'cache_salt' not in server.bodies[0]


def test_when_a_request_ends_otherwise_the_error_also_gives_the_first_error_a_server_answered():
    # A vLLM server whose engine died answers HTTP 500 and then no more: the last error alone would
    # hide why.
    with SimulatedServer(fail=lambda body, n: 500 if n == 0 else None,
                         hold=lambda body, n: 30 if n else 0) as server:
        with pytest.raises(BackendError) as e:
            backend(server.url, max_retries=1, timeout=0.5).generate(['a'])
    message = str(e.value)
    assert 'no complete answer within the 0.5 s timeout (after 1 retries)' in message
    assert f'the first error a server gave: {server.url}/completions: HTTP 500: ' in message
    assert 'simulated failure 500' in message and 'chunked' not in message  # not vLLM's engine: no hint


def test_vllms_dead_engine_is_recognised_and_the_flag_that_avoids_it_named():
    from pyterrier_utility.backends._openai import VLLM_ENGINE_DEAD
    b = backend('http://127.0.0.1:9/v1')
    b._server_errors.append(f'http://127.0.0.1:9/v1/completions: HTTP 500: {VLLM_ENGINE_DEAD}. See stack trace')
    message = b._first_server_error('http://127.0.0.1:9/v1/completions: ConnectionRefusedError (after 5 retries)')
    assert message.startswith('; the first error a server gave: http://127.0.0.1:9/v1/completions: HTTP 500')
    assert '--no-enable-chunked-prefill --max-num-batched-tokens N' in message


def test_each_answer_is_stored_as_it_arrives_not_when_the_call_completes(tmp_path):
    with SimulatedServer(hold=lambda body, n: 60 if body['prompt'] == 'held' else 0) as server:
        cache = pu.GenerationCache(backend(server.url, max_retries=0), tmp_path / 'g.sqlite')
        failed = []
        call = threading.Thread(target=lambda: failed.append(pytest.raises(BackendError, cache.generate,
                                                                           ['a', 'held', 'b', 'c'])))
        call.start()
        guard = time.monotonic() + UNTIMED
        while len(pu.GenerationCache(backend(server.url), tmp_path / 'g.sqlite')) < 3 and time.monotonic() < guard:
            time.sleep(0.05)
        assert call.is_alive()  # one request of the call hangs: the call has not completed
        assert len(pu.GenerationCache(backend(server.url), tmp_path / 'g.sqlite')) == 3
    call.join()
    assert failed and cache.generated == 3
