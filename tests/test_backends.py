"""The offline reader, loaded from the packaged GGUF: seeds, batching and stopping."""
import pytest

from pyterrier_utility import GenerationCache, backends

PROMPTS = ['Question: what is the lift of a wing?\nAnswer:',
           'Context 1: a sigmet is a weather advisory for aircraft.\nQuestion: what is a sigmet?\nAnswer:',
           'Question: how is heat conducted in composite slabs, and what problems have been solved?\nAnswer:']


def sampler(gemma, **kwargs):
    return backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='gemma-test',
                                    temperature=kwargs.pop('temperature', 1.0), top_k=50,
                                    max_new_tokens=8, **kwargs)


def test_batched_greedy_equals_one_at_a_time(gemma):
    batched = [o.text for o in gemma.generate(PROMPTS)]
    single = [gemma.generate([p])[0].text for p in PROMPTS]
    assert batched == single
    assert all(batched)


def test_seeds_reproduce_and_differ(gemma):
    backend = sampler(gemma, batch_size=3)
    a = [o.text for o in backend.generate([PROMPTS[0]] * 3, seeds=[1, 2, 3])]
    b = [o.text for o in backend.generate([PROMPTS[0]] * 3, seeds=[1, 2, 3])]
    assert a == b
    assert len(set(a)) > 1


def test_sample_does_not_depend_on_batch_mates(gemma):
    backend = sampler(gemma, batch_size=4)
    alone = backend.generate([PROMPTS[1]], seeds=[7])[0].text
    together = backend.generate([PROMPTS[0], PROMPTS[1], PROMPTS[2]], seeds=[1, 7, 2])[1].text
    assert alone == together


def test_stop_sequences_cut_the_answer(gemma):
    backend = sampler(gemma, temperature=0)
    full = backend.generate([PROMPTS[1]])[0].text
    word = full.split()[1]
    cut = backend.generate([PROMPTS[1]], stop_sequences=[word])[0].text
    assert cut == full.split(word)[0].strip()


def test_generation_key_names_settings(gemma):
    key = sampler(gemma, repetition_penalty=1.2).generation_key
    assert key['temperature'] == 1.0 and key['repetition_penalty'] == 1.2 and key['model'] == 'gemma-test'
    assert GenerationCache(sampler(gemma)).key('p', 1, 8, None) != GenerationCache(sampler(gemma)).key('p', 2, 8, None)
    assert GenerationCache(gemma).key('p', 1, 8, None) == GenerationCache(gemma).key('p', 2, 8, None)


def test_get_backend_names():
    with pytest.raises(ValueError):
        backends.get_backend('nonsense:model-x')
