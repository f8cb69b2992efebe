"""The offline reader, loaded from the packaged GGUF: seeds, batching and stopping."""
import pytest

from pyterrier_utility import GenerationCache, backends

PROMPTS = ['Question: what is the lift of a wing?\nAnswer:',
           'Context 1: a sigmet is a weather advisory for aircraft.\nQuestion: what is a sigmet?\nAnswer:',
           'Question: how is heat conducted in composite slabs, and what problems have been solved?\nAnswer:']


def sampler(gemma, **kwargs):
    return backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='gemma-test',
                                    temperature=kwargs.pop('temperature', 1.0), top_k=50,
                                    **{'max_new_tokens': 8, **kwargs})


def test_batched_greedy_equals_one_at_a_time(gemma):
    exact = backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='gemma-test', dtype='float32',
                                     temperature=0, max_new_tokens=8)
    batched = [(o.text, o.token_logprobs) for o in exact.generate(PROMPTS)]
    single = [(o.text, o.token_logprobs) for p in PROMPTS for o in exact.generate([p])]
    assert batched == single
    assert all(batched)


@pytest.mark.slow
@pytest.mark.parametrize('repetition_penalty', [1.0, 1.3])
def test_log_probability_is_the_models_own_for_the_chosen_tokens(gemma, repetition_penalty):
    """Checked against the model's forward pass over prompt + answer tokens, chosen independently by
    transformers' greedy ``generate``; a penalty changes the tokens chosen, not their log-probability."""
    import torch
    exact = backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='gemma-test', dtype='float32',
                                     temperature=0, max_new_tokens=8, repetition_penalty=repetition_penalty)
    answers = exact.with_settings(stop=[]).generate(PROMPTS)
    model, eos = exact.model, exact.eos_token_ids
    for prompt, answer in zip(PROMPTS, answers):
        ids = exact.tokenizer(prompt, return_tensors='pt').input_ids
        with torch.no_grad():
            whole = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=8, do_sample=False,
                                   repetition_penalty=repetition_penalty, top_k=None, top_p=None)
            new = whole[0, ids.shape[1]:]
            logits = model(whole).logits[0, ids.shape[1] - 1:-1].float()
        each = torch.log_softmax(logits, -1).gather(1, new[:, None])[:, 0]
        expected = each.sum().item()
        assert answer.text == exact.tokenizer.decode(new, skip_special_tokens=True).strip()
        assert answer.tokens == len(new) == len(answer.token_logprobs)
        assert sum(answer.token_logprobs) == answer.logprob  # the sum is the one reported, to the bit
        assert list(answer.token_logprobs) == pytest.approx(each.tolist(), abs=1e-3)
        assert answer.truncated == (new[-1].item() not in eos)
        assert answer.logprob == pytest.approx(expected, abs=1e-3)
        assert answer.mean_logprob == pytest.approx(expected / len(new), abs=1e-3)


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
    cut = backend.with_settings(stop=[word]).generate([PROMPTS[1]])[0].text
    assert cut == full.split(word)[0].strip()


def test_generation_key_names_settings(gemma):
    key = sampler(gemma, repetition_penalty=1.2).generation_key
    assert key['decoding']['temperature'] == 1.0 and key['decoding']['repetition_penalty'] == 1.2
    assert key['model'] == 'gemma-test'
    assert GenerationCache(sampler(gemma)).key('p', 1) != GenerationCache(sampler(gemma)).key('p', 2)
    assert GenerationCache(gemma).key('p', 1) == GenerationCache(gemma).key('p', 2)


def test_get_backend_names():
    with pytest.raises(ValueError):
        backends.get_backend('nonsense:model-x')


#: Nested prompts as a k-sweep makes them: each context a line of more than a chunk's tokens.
CONTEXTS = ['a sigmet is a weather advisory that contains meteorological information concerning the safety '
            'of all aircraft, issued for thunderstorms, icing and turbulence over a region.',
            'the lift of a wing grows with the angle of attack until the flow separates from the upper '
            'surface and the wing stalls, at which point lift falls sharply.',
            'heat conduction in composite slabs is solved by separating variables in each layer and '
            'matching temperature and flux at the interfaces between the layers.']


def nested_prompts(gemma):
    from pyterrier_utility import Reader
    reader = Reader(gemma, prompt_format='plain')  # prompts sized for this format
    return [reader.prompter.build_prompt('what is a sigmet?', CONTEXTS[:k]) for k in (1, 2, 3)]


def test_samples_of_a_prompt_prefill_once_and_equal_separate_prefills(gemma):
    backend = sampler(gemma, prefix_cache_mb=0)
    prompt = PROMPTS[1]
    shared = [o.text for o in backend.generate([prompt] * 3, seeds=[1, 2, 3])]
    n = len(backend.tokenizer(prompt)['input_ids'])
    assert backend.prefilled_tokens == n and backend.prompt_tokens == 3 * n
    separate = [backend.generate([prompt], seeds=[s])[0].text for s in (1, 2, 3)]
    assert backend.prefilled_tokens == 4 * n
    assert shared == separate and len(set(shared)) > 1


@pytest.mark.slow
def test_prefix_reuse_gives_the_answers_of_no_reuse_in_any_order(gemma):
    prompts = nested_prompts(gemma)
    fresh = sampler(gemma, prefix_cache_mb=0)
    expected = [fresh.generate([p], seeds=[5])[0].text for p in prompts]
    assert fresh.prefilled_tokens == fresh.prompt_tokens

    growing = sampler(gemma)
    assert [growing.generate([p], seeds=[5])[0].text for p in prompts] == expected
    assert growing.prefilled_tokens < 0.7 * growing.prompt_tokens  # contexts of a smaller k were reused
    shrinking = sampler(gemma)
    assert [shrinking.generate([p], seeds=[5])[0].text for p in prompts[::-1]][::-1] == expected
    together = sampler(gemma)
    assert [o.text for o in together.generate(prompts[::-1], seeds=[5] * 3)][::-1] == expected


def test_the_offline_gemma_computes_exactly_on_a_cpu_unless_another_dtype_is_given(monkeypatch):
    """``gemma3_270m()`` (the study's default reader) is exact on a CPU; a dtype given, or an accelerator,
    keeps what was asked; SmolLM2, which exact passes do not compute, keeps ``auto``."""
    from pyterrier_utility.backends import _offline
    asked = []
    monkeypatch.setattr(_offline, '_offline', lambda path, reader, model_id, kwargs: asked.append(kwargs))
    monkeypatch.setattr(_offline, 'gemma3_270m_path', lambda: None)
    monkeypatch.setattr(_offline, '_converted', lambda name, fn: None)
    _offline.gemma3_270m()
    _offline.gemma3_270m(dtype='auto', device='cpu')
    _offline.gemma3_270m(dtype='bfloat16')
    _offline.gemma3_270m(device='cuda')
    _offline.smollm2_135m()
    assert [k.get('dtype') for k in asked] == ['exact', 'exact', 'bfloat16', None, None]


def test_dtype_is_chosen_for_the_cpu_and_keys_the_cache(gemma, monkeypatch):
    import torch

    from pyterrier_utility.backends.hf import dtype
    monkeypatch.setattr(dtype, 'cpu_has_fast_bf16', lambda: True)
    assert dtype.resolve_dtype('auto', 'cpu') == torch.bfloat16
    assert dtype.resolve_dtype('auto', 'cuda') is None  # the model's own dtype
    monkeypatch.setattr(dtype, 'cpu_has_fast_bf16', lambda: False)
    assert dtype.resolve_dtype('auto', 'cpu') == torch.float32
    assert dtype.resolve_dtype('bfloat16', 'cpu') == torch.bfloat16
    with pytest.raises(ValueError, match="dtype must be 'auto'"):
        dtype.resolve_dtype('int8', 'cpu')
    other = 'float32' if gemma.dtype == torch.bfloat16 else 'bfloat16'
    converted = sampler(gemma, dtype=other)
    assert converted.model.dtype == dtype.DTYPES[other] and gemma.model.dtype == gemma.dtype  # the caller's model kept
    same = sampler(gemma, dtype=gemma.dtype)
    assert GenerationCache(converted).key('p', 1) != GenerationCache(same).key('p', 1)
    assert same.generation_key['dtype_name'] == str(gemma.dtype).replace('torch.', '')


@pytest.mark.slow
def test_prompts_past_the_sliding_window_decode_together_as_alone(gemma):
    from pyterrier_utility import Reader
    # Gemma 3 keeps 512 tokens in its sliding-window layers: rows of different lengths on both sides
    # of it are padded into one batch, which must leave each row's answer as it is alone.
    reader = Reader(gemma, prompt_format='plain')  # prompts sized for this format
    long_contexts = [f'{c} It was reported in study number {i}.' for i, c in enumerate(CONTEXTS * 12)]
    # in prompt order (lexicographic) a shorter prompt comes first
    prompts = [reader.prompter.build_prompt('what is a sigmet?', long_contexts[start:k]) for start, k in
               ((1, 19), (1, 13), (0, 8), (0, 1))]
    backend = sampler(gemma, temperature=0, prefix_cache_mb=0, max_new_tokens=24)
    lengths = [len(backend.tokenizer(p)['input_ids']) for p in prompts]
    assert lengths[0] > lengths[1] > 512 > lengths[2] > lengths[3]
    alone = [backend.generate([p])[0].text for p in prompts]
    assert [o.text for o in backend.generate(prompts)] == alone
    assert all(alone)


def test_answers_cut_at_max_new_tokens_are_flagged_and_counted(gemma):
    backend = sampler(gemma, temperature=0, max_new_tokens=6)
    full = backend.generate([PROMPTS[1]])[0]
    tokens = gemma.tokenizer(full.text, add_special_tokens=False)['input_ids']
    assert full.truncated and 4 <= len(tokens) <= 7  # six tokens, none of them the end of text
    word = full.text.split()[1]
    stopped = backend.with_settings(stop=[word]).generate([PROMPTS[1], PROMPTS[1]], seeds=[0, 1])
    assert [o.truncated for o in stopped] == [False, False]
    assert backend.truncated == 1


def test_top_k_sampling_draws_from_hugging_faces_top_k_distribution():
    """Drawing among the candidates only is the distribution of a softmax over the whole vocabulary
    with all but the top k masked as Hugging Face's warper masks them (ties at the k-th kept)."""
    import torch
    from transformers import TopKLogitsWarper

    from pyterrier_utility.backends.hf.sampling import TIE_MARGIN, SeededSampling as _SeededSampling
    scores = torch.randn(4, 1000)
    scores[1, :12] = 9.0  # twelve tied best scores: all of them candidates with top-k 5
    scores[2, 100:110] = scores[2].topk(5).values[-1]  # ties at the 5th
    scores[3, 200:200 + 5 + TIE_MARGIN + 20] = 9.0  # more ties than the margin: the whole row is counted
    sampling = _SeededSampling([1, 2, 3, 4], temperature=0.7, top_k=5)
    values, tokens = sampling.candidates(scores)
    expected = torch.softmax(TopKLogitsWarper(5)(None, scores / 0.7), dim=-1)
    ours = torch.zeros_like(expected).scatter_add_(1, tokens, torch.softmax(values, dim=-1))
    torch.testing.assert_close(ours, expected)
    assert (expected[1] > 0).sum() == 12 and (expected[2] > 0).sum() > 5
    assert (expected[3] > 0).sum() == 5 + TIE_MARGIN + 20
    drawn = sampling.next_tokens(scores)
    assert all(expected[i, t] > 0 for i, t in enumerate(drawn.tolist()))
    again = _SeededSampling([1, 2, 3, 4], temperature=0.7, top_k=5).next_tokens(scores)
    assert drawn.tolist() == again.tolist()


def test_the_way_tokens_are_drawn_keys_the_cache(gemma):
    assert 'top-k' in sampler(gemma).generation_key['sampler']
    assert sampler(gemma, temperature=0).generation_key['sampler'] == 'greedy'


def test_gumbel_draws_follow_the_softmax():
    """Frequencies of 20 000 draws (steps of one seed) against softmax probabilities, checked by
    scipy's chi-square test."""
    import torch
    from scipy.stats import chisquare

    from pyterrier_utility.backends.hf.sampling import SeededSampling as _SeededSampling
    scores = torch.tensor([[2.0, 1.0, 0.5, 0.0, -1.0, -9.0]])
    sampling = _SeededSampling([11], temperature=0.8, top_k=5)
    counts = torch.zeros(6)
    for _ in range(20000):
        counts[sampling.next_tokens(scores)] += 1
    expected = torch.softmax(scores[0, :5] / 0.8, -1) * 20000
    assert counts[5] == 0  # outside the top 5
    assert chisquare(counts[:5].numpy(), expected.numpy()).pvalue > 0.001


@pytest.mark.parametrize('sliding', [False, True])
def test_buffered_kv_layers_return_what_hugging_faces_layers_return(sliding):
    """Decoding into a preallocated buffer gives the keys and values (and mask sizes) of Hugging
    Face's concatenating layers, step by step, across rows leaving the batch, past the window."""
    import torch
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    from pyterrier_utility.backends.hf.kv import buffered as _buffered
    make = (lambda: DynamicSlidingWindowLayer(sliding_window=6)) if sliding else DynamicLayer
    theirs, prefill = make(), torch.randn(4, 1, 5, 3)
    theirs.update(prefill, -prefill)
    ours = make()
    ours.update(prefill, -prefill)
    ours = _buffered(ours, room=2)  # less room than the steps below: it grows
    assert type(ours).__name__.startswith('_Buffered')
    for step in range(6):
        if step == 2:
            keep = torch.tensor([0, 2, 3])
            theirs.batch_select_indices(keep)
            ours.batch_select_indices(keep)
        new = torch.randn(theirs.keys.shape[0], 1, 1, 3)
        expected, got = theirs.update(new, 2 * new), ours.update(new, 2 * new)
        torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
        torch.testing.assert_close(got[1], expected[1], rtol=0, atol=0)
        assert ours.get_mask_sizes(1) == theirs.get_mask_sizes(1)
        assert ours.get_seq_length() == theirs.get_seq_length()


@pytest.mark.parametrize('sliding', [False, True])
def test_shared_kv_layers_give_each_row_the_keys_and_values_of_its_own_cache(sliding):
    """A shared layer holds each prompt's keys once; what a row attends to (its prompt's visible keys, then
    its own decoded ones) is what Hugging Face's layer holds for that row decoded alone, step by step,
    across rows leaving the batch, past the window, past the room; the masks keep the padded batch's sizes."""
    import torch
    from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

    from pyterrier_utility.backends.hf.kv import shared as _shared
    make = (lambda: DynamicSlidingWindowLayer(sliding_window=6)) if sliding else DynamicLayer
    prompts, counts = [torch.randn(1, 2, 7, 3), torch.randn(1, 2, 3, 3)], [2, 1]
    alone = []
    for keys, n in zip(prompts, counts):
        for _ in range(n):
            layer = make()
            layer.update(keys, -keys)
            alone.append(layer)
    prefilled = [make() for _ in prompts]
    for layer, keys in zip(prefilled, prompts):
        layer.update(keys, -keys)
    ours = _shared(prefilled[0], [(p.keys, p.values) for p in prefilled], counts, room=2, longest=7)
    assert type(ours).__name__.startswith('_Shared') and ours.prompts[0][0].untyped_storage() is not None
    rows = [0, 1, 2]
    for step in range(8):
        if step == 3:  # the first prompt's second sample leaves the batch
            ours.batch_select_indices(torch.tensor([0, 2]))
            rows = [0, 2]
        new = torch.randn(len(rows), 2, 1, 3)
        keys, values = ours.update(new, 2 * new)
        assert keys.shared_kv is ours
        expected = [alone[row].update(new[i:i + 1], 2 * new[i:i + 1]) for i, row in enumerate(rows)]
        seen = {}
        for first, end, prompt_keys, prompt_values in ours.prompt_spans():
            for i in range(first, end):
                own_keys, own_values = ours.decoded()
                seen[i] = (torch.cat([prompt_keys[0], own_keys[i]], dim=-2),
                           torch.cat([prompt_values[0], own_values[i]], dim=-2))
        for i, (k, v) in enumerate(expected):
            # Hugging Face's sliding layer returns the window's keys, plus the new token once the window is full
            window = k.shape[-2] if not sliding else min(k.shape[-2], 6)
            assert torch.equal(seen[i][0], k[0, :, -window:]) and torch.equal(seen[i][1], v[0, :, -window:])
        assert ours.get_seq_length() == 7 + step + 1
        padded = make()
        padded.update(torch.zeros(1, 2, 8 + step, 3), torch.zeros(1, 2, 8 + step, 3))
        assert ours.get_mask_sizes(1) == padded.get_mask_sizes(1)
    assert ours.prompts[1] is not None and ours.prompts[0] is not None


def test_shared_attention_gives_a_row_the_same_values_alone_or_beside_its_samples_and_other_prompts():
    """The attention over a shared layer: a row's output alone (one prompt, one sample) is bit for bit its
    output among three samples of its prompt and another prompt's, in float32 and bfloat16, and close to
    attention over its keys in one piece."""
    import torch
    from transformers.cache_utils import DynamicLayer

    from pyterrier_utility.backends.hf import invariant
    from pyterrier_utility.backends.hf.kv import shared as _shared
    generator = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        prompts = [torch.randn(1, 1, length, 256, generator=generator).to(dtype) for length in (700, 1200)]

        def layer_for(chosen, counts):
            first = DynamicLayer()
            first.update(chosen[0], chosen[0])
            return _shared(first, [(p, -p) for p in chosen], counts, 8, max(p.shape[-2] for p in chosen))
        new = torch.randn(6, 1, 1, 256, generator=generator).to(dtype)
        query = torch.randn(6, 4, 1, 256, generator=generator).to(dtype)
        together = layer_for(prompts, [3, 3])
        together.update(new, new)
        out = invariant._attended_shared(2, query, together, 0.06, None)
        for row, prompt in ((0, 0), (4, 1)):
            alone = layer_for(prompts[prompt:prompt + 1], [1])
            alone.update(new[row:row + 1], new[row:row + 1])
            assert torch.equal(invariant._attended_shared(2, query[row:row + 1], alone, 0.06, None)[0], out[row])
            keys = torch.cat([prompts[prompt], new[row:row + 1]], dim=-2)
            values = torch.cat([-prompts[prompt], new[row:row + 1]], dim=-2)
            whole = invariant._attended(2, query[row:row + 1], keys, values, 0.06, None, None)
            torch.testing.assert_close(out[row].float(), whole[0].float(), rtol=0.02, atol=0.02)


def test_repetition_penalty_gives_hugging_faces_scores():
    """The penalty equals ``RepetitionPenaltyLogitsProcessor`` bit for bit: positive and negative
    scores, tokens repeated in a history, and a history with ids past the vocabulary (which Hugging
    Face ignores)."""
    import torch
    from transformers import RepetitionPenaltyLogitsProcessor

    from pyterrier_utility.backends.hf.sampling import Penalty as _Penalty
    generator = torch.Generator().manual_seed(0)
    for rows, vocabulary, length in ((1, 7, 3), (4, 50, 30), (3, 4096, 500)):
        scores = torch.randn(rows, vocabulary, generator=generator) * 4
        history = torch.randint(0, vocabulary, (rows, length), generator=generator)
        history[:, 1] = history[:, 0]
        for penalty in (1.2, 0.8):
            expected = RepetitionPenaltyLogitsProcessor(penalty)(history, scores)
            got = _Penalty(penalty)(history, scores)
            assert torch.equal(got, expected) and not torch.equal(got, scores)
            # In place (the decode loop's way): the same scores, then the model's own put back exactly
            copy = scores.clone()
            penalised, restore = _Penalty(penalty).in_place(history, copy)
            assert penalised is copy and torch.equal(penalised, expected)
            restore()
            assert torch.equal(copy, scores)
        history[-1, -1] = vocabulary + 3
        assert torch.equal(_Penalty(1.2)(history, scores), RepetitionPenaltyLogitsProcessor(1.2)(history, scores))


def test_merged_buffers_hold_each_cache_repeated_and_left_padded_with_zeros():
    import torch
    from transformers.cache_utils import DynamicLayer

    from pyterrier_utility.backends.hf.kv import buffered as _buffered
    parts, expected = [], []
    for length, rows in ((5, 2), (3, 3), (5, 1)):
        layer = DynamicLayer()
        keys = torch.randn(1, 2, length, 4)
        layer.update(keys, -keys)
        parts.append((layer.keys, layer.values, rows))
        expected.append(torch.nn.functional.pad(keys.repeat_interleave(rows, dim=0), (0, 0, 5 - length, 0)))
    first = DynamicLayer()
    first.update(parts[0][0], parts[0][1])
    merged = _buffered(first, room=4, parts=parts)
    torch.testing.assert_close(merged.keys, torch.cat(expected), rtol=0, atol=0)
    torch.testing.assert_close(merged.values, -torch.cat(expected), rtol=0, atol=0)
    new = torch.randn(6, 2, 1, 4)
    keys, _ = merged.update(new, new)
    torch.testing.assert_close(keys, torch.cat([torch.cat(expected), new], dim=-2), rtol=0, atol=0)


def test_finished_rows_kept_in_the_batch_do_not_change_the_others(gemma, monkeypatch):
    """Whether finished rows leave the batch at once or stay to its end, every answer (text, log
    probability, truncation) is the same: a kept row's tokens are never read."""
    from pyterrier_utility.backends.hf import loop
    prompts, seeds = [PROMPTS[0]] * 3 + [PROMPTS[1]] * 3 + [PROMPTS[2]] * 3, [1, 2, 3] * 3
    outputs = {}
    for policy in (0, float('inf')):  # always drop finished rows; never drop them
        monkeypatch.setattr(loop, 'COMPACT_AFTER', policy)
        backend = sampler(gemma, batch_size=9, max_new_tokens=12)
        # A stop at the first 'e' or '.': rows end at different steps whatever text the CPU's kernels sample.
        outputs[policy] = [(o.text, o.token_logprobs, o.truncated)
                           for o in backend.with_settings(stop=['.', 'e']).generate(prompts, seeds=seeds)]
    dropped, kept = outputs[0], outputs[float('inf')]
    assert dropped == kept  # batch-invariant: the log-probabilities too, bit for bit
    assert len({len(logprobs) for _, logprobs, _ in dropped}) > 2  # rows end at different steps


@pytest.mark.parametrize('top_k, top_p, min_p', [(5, None, 0.3), (50, 0.9, None), (50, 0.95, 0.05), (0, 0.5, 0.1),
                                                  (0, None, 0.05), (5, 0.3, 0.9)])
def test_top_p_and_min_p_keep_the_tokens_hugging_faces_warpers_keep(top_k, top_p, min_p):
    """The candidates and their probabilities equal Hugging Face's warpers in its order (temperature,
    top-k, top-p, min-p) over the whole vocabulary, ties at the k-th score included. (Tokens tied at
    the nucleus' edge are kept or dropped by sort order, here and in Hugging Face alike.)"""
    import torch
    from transformers import MinPLogitsWarper, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    from pyterrier_utility.backends.hf.sampling import SeededSampling as _SeededSampling
    scores = torch.randn(4, 2000, generator=torch.Generator().manual_seed(5)) * 3
    scores[1, 100:110] = scores[1].topk(5).values[-1]  # ties at the 5th
    scores[2, :3] = torch.tensor([12.0, 11.5, 11.0])  # a peaked row: few survive
    sampling = _SeededSampling([1, 2, 3, 4], temperature=0.7, top_k=top_k, top_p=top_p, min_p=min_p)
    values, tokens = sampling.candidates(scores)
    warped = TemperatureLogitsWarper(0.7)(None, scores)
    for warper in ([TopKLogitsWarper(top_k)] if top_k else []) + ([TopPLogitsWarper(top_p)] if top_p else []) \
            + ([MinPLogitsWarper(min_p)] if min_p else []):
        warped = warper(None, warped)
    expected = torch.softmax(warped, dim=-1)
    ours = torch.zeros_like(expected).scatter_add_(1, tokens, torch.softmax(values, dim=-1))
    assert torch.equal(ours > 0, expected > 0)
    torch.testing.assert_close(ours, expected)
    assert ((expected > 0).sum(-1) < 2000).all()
    drawn = sampling.next_tokens(scores)
    assert all(expected[i, t] > 0 for i, t in enumerate(drawn.tolist()))


def test_min_p_of_one_and_a_tiny_top_p_leave_the_greedy_answer(gemma):
    """min-p 1 keeps only the most likely token, as does a nucleus of 1%: every seed then gives the
    greedy answer, which plain sampling at temperature 1 does not. In float32: bfloat16's logits tie
    at the top on some CPUs' kernels, and min-p 1 rightly keeps every token tied with the most likely."""
    greedy = [o.text for o in sampler(gemma, temperature=0, dtype='float32').generate(PROMPTS)]
    seeds = [3, 4, 5]
    plain = [o.text for o in sampler(gemma, dtype='float32').generate(PROMPTS, seeds=seeds)]
    assert plain != greedy
    for narrow in (dict(min_p=1.0), dict(top_p=0.01)):
        assert [o.text for o in sampler(gemma, dtype='float32', **narrow).generate(PROMPTS, seeds=seeds)] == greedy


def test_repetition_penalty_window_counts_the_last_n_tokens():
    """Over ``last_n`` tokens the penalty is Hugging Face's over the history's last ``last_n``
    columns; a row left-padded with its first token is penalised as the same row unpadded."""
    import torch
    from transformers import RepetitionPenaltyLogitsProcessor

    from pyterrier_utility.backends.hf.sampling import Penalty as _Penalty
    generator = torch.Generator().manual_seed(1)
    scores = torch.randn(3, 50, generator=generator) * 4
    history = torch.randint(0, 50, (3, 30), generator=generator)
    for last_n in (1, 4, 64):
        got = _Penalty(1.3, last_n)(history, scores)
        assert torch.equal(got, RepetitionPenaltyLogitsProcessor(1.3)(history[:, -last_n:], scores))
    assert not torch.equal(_Penalty(1.3, 4)(history, scores), _Penalty(1.3)(history, scores))
    row = torch.tensor([[7, 8, 9]])
    padded = torch.tensor([[7, 7, 7, 7, 8, 9]])
    for last_n in (2, 3, 5, 64):
        assert torch.equal(_Penalty(1.3, last_n)(padded, scores[:1]), _Penalty(1.3, last_n)(row, scores[:1]))


@pytest.mark.slow
def test_a_windowed_penalty_decodes_as_a_plain_loop_penalising_the_last_n_tokens(gemma):
    """Greedy answers with the penalty over the last 3 tokens of prompt and answer equal a plain loop
    (the model's forward over the whole sequence, Hugging Face's penalty over its last 3 tokens), in
    a batch of prompts of different lengths; a window changes some answer."""
    import torch
    from transformers import RepetitionPenaltyLogitsProcessor
    window = backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='gemma-test', dtype='float32',
                                      temperature=0, max_new_tokens=8, repetition_penalty=1.5, repeat_last_n=3)
    answers = [o.text for o in window.with_settings(stop=[]).generate(PROMPTS)]
    penalty = RepetitionPenaltyLogitsProcessor(1.5)
    expected = []
    for prompt in PROMPTS:
        ids = window.tokenizer(prompt, return_tensors='pt').input_ids
        with torch.no_grad():
            for _ in range(8):
                scores = penalty(ids[:, -3:], window.model(ids).logits[:, -1].float())
                token = scores.argmax(-1, keepdim=True)
                if token.item() in window.eos_token_ids:
                    break
                ids = torch.cat([ids, token], dim=1)
        expected.append(window.tokenizer.decode(ids[0, len(window.tokenizer(prompt).input_ids):],
                                                skip_special_tokens=True).strip())
    assert answers == expected
    whole = window.with_settings(repeat_last_n=None)
    assert [o.text for o in whole.with_settings(stop=[]).generate(PROMPTS)] != answers


def test_the_kernel_cache_bounds_are_set_unless_given_and_left_out_of_other_engines_environments(monkeypatch):
    import os

    from pyterrier_utility import _onednn
    onednn, ideep = _onednn.VARIABLES
    monkeypatch.delenv(onednn, raising=False)
    monkeypatch.delenv(ideep, raising=False)
    monkeypatch.setattr(_onednn, '_set_here', set())
    _onednn.bound_primitive_cache()
    assert os.environ[onednn] == os.environ[ideep] == str(_onednn.PRIMITIVE_CACHE_CAPACITY)
    given = _onednn.engine_environment(dict(os.environ))
    assert onednn not in given and ideep not in given and given['PATH'] == os.environ['PATH']
    monkeypatch.setenv(ideep, '512')  # the user's own: kept, here and for other engines
    monkeypatch.setattr(_onednn, '_set_here', set())
    monkeypatch.delenv(onednn)
    _onednn.bound_primitive_cache()
    assert os.environ[ideep] == '512' and os.environ[onednn] == str(_onednn.PRIMITIVE_CACHE_CAPACITY)
    given = _onednn.engine_environment(dict(os.environ))
    assert given[ideep] == '512' and onednn not in given


@pytest.mark.slow
def test_the_converted_gemma_begins_every_text_with_bos_whatever_transformers_converts_it(gemma):
    """The GGUF says Gemma's tokenizer adds ``<bos>``; the converted folder's tokenizer does, and a tokenizer
    converted without it (as transformers 5.19 converts it) is given it, the same ids alone and in pairs."""
    from tokenizers import processors
    from transformers import AutoTokenizer

    from pyterrier_utility.backends import _offline
    tokenizer = AutoTokenizer.from_pretrained(str(_offline.gemma3_270m_path()))
    single, pair = tokenizer('a b').input_ids, tokenizer('a', 'b').input_ids
    assert single[0] == tokenizer.bos_token_id == 2 and pair.count(2) == 2
    assert gemma.tokenizer('Question: what?').input_ids[0] == 2
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(single='$A', pair='$A $B:1')
    assert tokenizer('a b').input_ids == single[1:]
    _offline.bos_as_in_gguf(tokenizer, _offline.gemma3_270m_gguf())
    assert (tokenizer('a b').input_ids, tokenizer('a', 'b').input_ids) == (single, pair)
