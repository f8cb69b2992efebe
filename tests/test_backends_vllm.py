"""VLLMBackend: against a simulated ``vllm`` module here (what it hands vLLM), and against real vLLM
with the offline Gemma where vllm and a GPU exist."""
import sys
import types

import pytest

import pyterrier_utility as pu
from pyterrier_utility.errors import BackendError


class SimulatedVLLM(types.ModuleType):
    """Stands in for the ``vllm`` package: records what the backend builds, answers from prompt and seed;
    asked for ``logprobs``, it reports a ``cumulative_logprob`` of -0.5 per word over one token per word
    (each position's ``logprobs`` giving the sampled token -0.5 and another -9), and ``finish_reason``
    'length' for a prompt ending in 'xyz'."""

    def __init__(self, drop_one=False):
        super().__init__('vllm')
        module = self
        self.llm_kwargs = None
        self.calls = []

        class SamplingParams:
            def __init__(self, **fields):
                self.fields = fields

        class LLM:
            def __init__(self, **kwargs):
                module.llm_kwargs = kwargs
                self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=8192))

            def get_tokenizer(self):
                return None

            def generate(self, prompts, params, use_tqdm=False):
                module.calls.append((list(prompts), [p.fields for p in params]))
                outs = []
                for p, sp in zip(prompts, params):
                    text = f' {p[-3:]} seed {sp.fields["seed"]} STOP more'
                    out = types.SimpleNamespace(text=text)
                    if sp.fields.get('logprobs') is not None:
                        words = len(text.split())
                        out = types.SimpleNamespace(text=text, token_ids=list(range(words)),
                                                    cumulative_logprob=-0.5 * words,
                                                    finish_reason='length' if p.endswith('xyz') else 'stop',
                                                    logprobs=[{t: types.SimpleNamespace(logprob=-0.5),
                                                               t + 1: types.SimpleNamespace(logprob=-9.0)}
                                                              for t in range(words)])
                    outs.append(types.SimpleNamespace(outputs=[out]))
                return outs[:-1] if drop_one else outs

        self.SamplingParams = SamplingParams
        self.LLM = LLM


def test_each_prompt_gets_its_own_seeded_sampling_params_in_one_generate_call(monkeypatch):
    fake = SimulatedVLLM()
    monkeypatch.setitem(sys.modules, 'vllm', fake)
    backend = pu.backends.VLLMBackend('some/model', temperature=0.3, top_k=0, top_p=0.95, max_new_tokens=300,
                                      tensor_parallel_size=2, dtype='bfloat16')
    assert fake.llm_kwargs == {'model': 'some/model', 'tensor_parallel_size': 2, 'enable_prefix_caching': True,
                               'dtype': 'bfloat16'}
    assert backend.max_input_length == 8192
    reader = pu.Reader(backend, n_samples=2, seed=5)
    answers = [[a.text for a in row] for row in reader.answer(['abc', 'xyz'])]
    assert answers == [['abc seed 5', 'abc seed 6'], ['xyz seed 5', 'xyz seed 6']]
    assert len(fake.calls) == 1  # all prompts of the call scheduled together
    prompts, params = fake.calls[0]
    assert sorted(zip(prompts, [p['seed'] for p in params])) == [('abc', 5), ('abc', 6), ('xyz', 5), ('xyz', 6)]
    assert params[0] | {'seed': 0} == {'n': 1, 'temperature': 0.3, 'max_tokens': 300, 'seed': 0, 'top_k': -1,
                                       'top_p': 0.95, 'stop': ['STOP'], 'logprobs': 0}
    assert backend.generation_key['llm_kwargs'] == {'dtype': 'bfloat16'}


def test_min_p_goes_to_vllm_and_a_penalty_window_is_said_not_applied(monkeypatch):
    """vLLM's SamplingParams take min_p under its own name; vLLM has no penalty window, so
    repeat_last_n is not sent and the backend says how vLLM penalises instead."""
    fake = SimulatedVLLM()
    monkeypatch.setitem(sys.modules, 'vllm', fake)
    backend = pu.backends.VLLMBackend('m', temperature=0.3, top_k=50, top_p=0.95, min_p=0.05, repetition_penalty=1.1,
                                      repeat_last_n=64)
    backend.generate(['abc'], seeds=[1])
    assert fake.calls[0][1][0] == {'n': 1, 'temperature': 0.3, 'max_tokens': 300, 'seed': 1, 'top_k': 50, 'top_p': 0.95,
                                   'min_p': 0.05, 'repetition_penalty': 1.1, 'stop': ['STOP'], 'logprobs': 0}
    assert list(backend.decoding_notes) == ['repeat_last_n']
    assert 'counts every prompt and output token' in backend.decoding_notes['repeat_last_n']
    assert pu.backends.VLLMBackend('m', repeat_last_n=64).decoding_notes == {}  # no penalty: nothing to say


def test_answers_carry_vllms_cumulative_logprob_and_finish_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, 'vllm', SimulatedVLLM())
    outs = pu.backends.VLLMBackend('m').generate(['abc', 'xyz'], seeds=[1, 2])
    # Each position's dict holds the sampled token (and others): the sampled one's is its log-probability.
    assert outs == [pu.backends.Answer(text='abc seed 1', truncated=False, logprob=-2.5, tokens=5,
                                       token_logprobs=(-0.5,) * 5),
                    pu.backends.Answer(text='xyz seed 2', truncated=True, logprob=-2.5, tokens=5,
                                       token_logprobs=(-0.5,) * 5)]
    assert outs[0].mean_logprob == -0.5


def test_an_output_count_mismatch_is_an_error(monkeypatch):
    monkeypatch.setitem(sys.modules, 'vllm', SimulatedVLLM(drop_one=True))
    with pytest.raises(BackendError, match='1 outputs for 2 prompts'):
        pu.backends.VLLMBackend('m').generate(['a', 'b'])


def _gpu_vllm():
    try:
        import torch
        import vllm  # noqa: F401
        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(not _gpu_vllm(), reason='needs vllm and a GPU')
def test_real_vllm_samples_are_seeded_and_greedy_is_stable():
    backend = pu.backends.VLLMBackend(str(pu.backends.gemma3_270m_path()), temperature=1.0, top_k=50,
                                      max_new_tokens=16, gpu_memory_utilization=0.3)
    prompt = 'Question: what is the lift of a wing?\nAnswer:'
    first = [o.text for o in backend.generate([prompt] * 3, seeds=[1, 2, 3])]
    again = [o.text for o in backend.generate([prompt] * 3, seeds=[1, 2, 3])]
    assert first == again and len(set(first)) > 1


def test_on_a_cpu_the_backend_turns_chunked_prefill_off_and_reproducible_computes_each_answer_alone():
    from pyterrier_utility.backends._vllm import engine_settings
    assert engine_settings('o', cpu=False, reproducible=False, prefix_caching=True, llm_kwargs={}) == {
        'enable_prefix_caching': True}
    assert engine_settings('o', cpu=True, reproducible=False, prefix_caching=True, llm_kwargs={}) == {
        'enable_prefix_caching': True, 'enable_chunked_prefill': False, 'max_model_len': 8192,
        'max_num_batched_tokens': 8192, 'enforce_eager': True}
    assert engine_settings('o', cpu=True, reproducible=True, prefix_caching=True,
                           llm_kwargs={'max_model_len': 2048, 'max_num_batched_tokens': 4096,
                                       'enforce_eager': False}) == {
        'enable_prefix_caching': False, 'enable_chunked_prefill': False, 'max_model_len': 2048,
        'max_num_batched_tokens': 4096, 'max_num_seqs': 1}
    # Where vLLM's batch-invariant mode runs (a GPU), reproducible keeps batching, without prefix caching.
    assert engine_settings('o', cpu=False, reproducible=True, prefix_caching=True, llm_kwargs={},
                           batch_invariant=True) == {'enable_prefix_caching': False}
    assert engine_settings('o', cpu=False, reproducible=True, prefix_caching=True, llm_kwargs={}) == {
        'enable_prefix_caching': False, 'max_num_seqs': 1}
    with pytest.raises(pu.errors.SettingError, match='CPU Generator does not use offset'):
        engine_settings('o', cpu=True, reproducible=False, prefix_caching=True,
                        llm_kwargs={'enable_chunked_prefill': True})


def test_reproducible_is_handed_to_vllm_and_stated(monkeypatch):
    fake = SimulatedVLLM()
    monkeypatch.setitem(sys.modules, 'vllm', fake)
    backend = pu.backends.VLLMBackend('m', reproducible=True)
    assert fake.llm_kwargs == {'model': 'm', 'tensor_parallel_size': 1, 'enable_prefix_caching': False,
                               'max_num_seqs': 1}
    assert backend.reproducibility.startswith('fresh generation reproducible')
    assert 'generation cache only' in pu.backends.VLLMBackend('m').reproducibility
