"""LlamaCppServerBackend: what each request carries and how the reader name is built (against the
simulated endpoint of simulated_server.py; the real server's tests are in test_engines_llamacpp.py)."""
import pytest
from support.simulated_server import SimulatedServer

import pyterrier_utility as pu
from pyterrier_utility.backends import LlamaCppServerBackend, OpenAICompatibleBackend
from pyterrier_utility.backends._llamacpp import EVERY_TOKEN, LLAMACPP_ORDER
from pyterrier_utility.errors import SettingError
from pyterrier_utility.study import StudyConfig


def sent(**kw):
    """The body of one request of a backend built with ``kw``, without prompt and model."""
    with SimulatedServer() as server:
        LlamaCppServerBackend('gemma', server.url, **kw).generate(['Question: what is lift?\nAnswer:'], seeds=[7])
    assert server.paths == ['/v1/completions']
    return {k: v for k, v in server.bodies[0].items() if k not in ('prompt', 'model')}


def test_the_decoding_goes_under_llamacpps_names_with_exactly_its_samplers_in_hugging_faces_order():
    assert sent(temperature=0.3, top_k=50, top_p=0.9, repetition_penalty=1.1, max_new_tokens=300, stop=['STOP']) == {
        'temperature': 0.3, 'top_k': 50, 'top_p': 0.9, 'repeat_penalty': 1.1, 'repeat_last_n': EVERY_TOKEN,
        'samplers': ['penalties', 'temperature', 'top_k', 'top_p'], 'cache_prompt': False,
        'max_tokens': 300, 'stop': ['STOP'], 'seed': 7, 'n': 1}


def test_llamacpps_own_order_and_a_penalty_window_on_request_and_in_the_cache_key():
    body = sent(temperature=0.3, min_p=0.05, repetition_penalty=1.1, repeat_last_n=64, sampler_order=LLAMACPP_ORDER)
    assert (body['min_p'], body['repeat_last_n']) == (0.05, 64)
    assert body['samplers'] == ['penalties', 'top_k', 'min_p', 'temperature']
    keys = [LlamaCppServerBackend('gemma', **kw).generation_key for kw in ({'sampler_order': LLAMACPP_ORDER}, {})]
    assert keys[0]['sampler_order'] == list(LLAMACPP_ORDER) != keys[1]['sampler_order']
    with pytest.raises(SettingError, match='sampler_order must order all of'):
        LlamaCppServerBackend('gemma', sampler_order=['temperature'])


def test_unset_fields_are_neither_sent_nor_sampled_so_no_server_default_applies():
    body = sent(temperature=0, top_k=None, repetition_penalty=1.0, max_new_tokens=8, stop=[])
    assert body == {'temperature': 0.0, 'samplers': ['temperature'], 'cache_prompt': False, 'max_tokens': 8,
                    'seed': 7, 'n': 1}


def test_cache_prompt_is_an_argument_logprobs_are_asked_as_the_protocol_says():
    body = sent(cache_prompt=True, logprobs=True, reproducible=True)
    assert body['cache_prompt'] is True and body['logprobs'] == 1 and 'cache_salt' not in body
    for owned in ('cache_prompt', 'samplers', 'n_probs'):
        with pytest.raises(SettingError, match=f"extra_body may not set \\['{owned}'\\]"):
            LlamaCppServerBackend('gemma', extra_body={owned: 1})


def test_the_reader_name_builds_it_over_the_base_urls_and_the_study_accepts_server_options():
    backend = pu.backends.get_backend('llamacpp:gemma', base_urls=['http://127.0.0.1:8081/v1'], temperature=0)
    assert isinstance(backend, LlamaCppServerBackend) and backend.base_urls == ['http://127.0.0.1:8081/v1']
    assert pu.backends.get_backend('llamacpp:gemma').base_urls == ['http://127.0.0.1:8080/v1']
    assert backend.generation_key != OpenAICompatibleBackend('gemma', temperature=0).generation_key
    config = StudyConfig(readers=('llamacpp:gemma',), base_urls=('http://h:1/v1',), concurrency=2)
    options = config.backend_options('llamacpp:gemma')
    assert options['base_urls'] == ['http://h:1/v1'] and options['concurrency'] == 2
    with pytest.raises(SettingError, match=r"huggingface:m' cannot honour base_urls"):
        StudyConfig(readers=('huggingface:m',), base_urls=('http://h:1/v1',))
    with pytest.raises(SettingError, match='base URLs are for openai:MODEL and llamacpp:MODEL readers'):
        pu.backends.get_backend('vllm:m', base_urls=['http://h:1/v1'])


def test_reproducibility_says_when_fresh_answers_are_the_same():
    with SimulatedServer() as server:  # it has no /props: its slots are unknown
        def said(**kw):
            return LlamaCppServerBackend('gemma', [server.url], **kw).reproducibility
        assert said(concurrency=1).startswith('fresh generation reproducible: one request in flight per endpoint')
        assert said(concurrency=4, reproducible=True).startswith('fresh generation reproducible')
        assert said(concurrency=4).startswith('answers reproducible from the generation cache only: up to 4 requests')
        assert 'cache_prompt=True' in said(concurrency=1, cache_prompt=True)
