"""A seeded Hugging Face causal LM in this process, prefilling each prompt once.

Adds what the study needs to a plain forward pass: per-prompt seeds (each answer sampled with its
own seed's generator), explicit sampling parameters, bfloat16 on CPUs
with bf16 matrix instructions, one prefill shared by all samples of a prompt, and reuse of the KV
cache of prefixes across prompts (the nested prompts of a k-sweep).
"""
import copy
import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch
from pyterrier_rag.backend import BackendOutput
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer

from .._util import check, check_int
from ..settings import ENGINE_DECODING, Decoding
from ._base import Answer, DecodingBackendBase, cut_at_stop, split_decoding, work_batches
from ._prefix import PrefixCache, line_chunks

#: dtypes a backend can be asked for by name.
DTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}


def cpu_has_fast_bf16() -> bool:
    """True when this CPU has bfloat16 matrix instructions (AMX-BF16 or AVX512-BF16), which torch
    uses for bf16 matmuls (several times fp32's speed); read from ``/proc/cpuinfo`` (Linux)."""
    try:
        flags = Path('/proc/cpuinfo').read_text()
    except OSError:
        return False
    return re.search(r'\b(amx_bf16|avx512_bf16)\b', flags) is not None


def resolve_dtype(dtype: Union[str, torch.dtype, None],
                  device: Union[str, torch.device, None]) -> Optional[torch.dtype]:
    """The dtype a model runs in: ``'auto'`` is bfloat16 on a CPU with fast bf16 and float32 on
    other CPUs; on an accelerator, the model's own dtype (``None`` here: left as loaded)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, 'auto'):
        if device is not None and torch.device(device).type != 'cpu':
            return None
        return torch.bfloat16 if cpu_has_fast_bf16() else torch.float32
    check(dtype in DTYPES, 'CausalLMBackend', f"dtype must be 'auto', one of {list(DTYPES)} or a torch.dtype, "
                                              f'got {dtype!r}')
    return DTYPES[dtype]


def _signed(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


_GOLDEN, _MIX1, _MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """A logical right shift of int64 values (torch's ``>>`` keeps the sign)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def uniforms(seeds: torch.Tensor, step: int, tokens: torch.Tensor) -> torch.Tensor:
    """A uniform number in (0, 1) for each (seed, step, token): SplitMix64 of the three, so the
    number a token gets is its own, whatever other tokens or rows are drawn with it."""
    x = seeds[:, None] * _MIX1 + torch.tensor(step, dtype=torch.long) * _MIX2 + tokens * _GOLDEN
    for shift, mul in ((30, _MIX1), (27, _MIX2)):
        x = (x ^ _shr(x, shift)) * mul
    x = x ^ _shr(x, 31)
    return (_shr(x, 11).double() + 0.5) / 2.0**53


#: Tokens past the k-th that top-k sampling looks at for ties with it, before counting the whole row.
TIE_MARGIN = 64


class _SeededSampling:
    """Samples each row from its own seed, so that the randomness of an answer belongs to its seed,
    not to the rows it is generated with.

    A token is drawn by the Gumbel-max race: the candidate with the highest score / temperature
    plus Gumbel noise, that noise a function of (seed, step, token id) (:func:`uniforms`). This is
    an exact draw from the softmax over the candidates; with top-k, the candidates are the tokens
    whose score reaches the k-th highest (ties included, as Hugging Face's top-k warper keeps them).
    As each token's noise is its own, a rounding change between batches or dtypes changes a draw
    only where it changes the winner of the race, and only 50 candidates get noise, not 262k tokens.
    """
    #: How tokens are drawn: part of the generation cache key, since another way of drawing
    #: gives other answers for the same seeds.
    METHOD = 'Gumbel-max over the top-k candidates (ties kept), noise SplitMix64(seed, step, token)'

    def __init__(self, seeds: Sequence[int], temperature: float, top_k: int):
        self.seeds = torch.tensor([int(s) for s in seeds], dtype=torch.long)
        self.temperature = temperature
        self.top_k = top_k
        self.step = 0

    def candidates(self, scores: torch.Tensor):
        """``(values, tokens)``: each row's candidate scores divided by the temperature (``-inf``
        where a row has fewer candidates than the widest row) and their token ids."""
        scores = scores.float()
        if not self.top_k or self.top_k >= scores.shape[-1]:
            tokens = torch.arange(scores.shape[-1], device=scores.device).expand_as(scores)
            return scores / self.temperature, tokens
        # The k highest and a margin, to see the ties at the k-th score (bfloat16 logits tie often):
        # all of them are candidates. Only when the margin is all ties is the whole row counted.
        wide = min(self.top_k + TIE_MARGIN, scores.shape[-1])
        values, tokens = torch.topk(scores, wide, dim=-1)
        kth = values[:, self.top_k - 1:self.top_k]
        if wide < scores.shape[-1] and bool((values[:, -1:] >= kth).any()):
            widest = int((scores >= kth).sum(-1).max())
            values, tokens = torch.topk(scores, widest, dim=-1)
        values = values.masked_fill(values < kth, float('-inf'))
        return values / self.temperature, tokens

    def next_tokens(self, scores: torch.Tensor, rows: Optional[Sequence[int]] = None) -> torch.Tensor:
        """One token per row of ``scores`` at the next step; ``rows`` says whose seed each row
        uses (default: all, in order)."""
        seeds = self.seeds if rows is None else self.seeds[list(rows)]
        values, tokens = self.candidates(scores)
        values, tokens = values.cpu().double(), tokens.cpu()
        gumbel = -torch.log(-torch.log(uniforms(seeds, self.step, tokens)))
        self.step += 1
        return tokens.gather(1, (values + gumbel).argmax(-1, keepdim=True))[:, 0]


class _Penalty:
    """Hugging Face's repetition penalty (``RepetitionPenaltyLogitsProcessor``), the same values:
    a token in a row's history has its score divided by the penalty when positive, multiplied when
    negative. Hugging Face pads every row of the scores by one column first (for ids past the
    vocabulary), an unaligned copy of the whole (rows, vocabulary) tensor: 6.9 ms of a decode step
    in the loop, 2.9 ms here, where the scores are scattered into once; only a history with ids
    past the vocabulary goes to Hugging Face's processor."""

    def __init__(self, penalty: float):
        from transformers import RepetitionPenaltyLogitsProcessor
        self.penalty = penalty
        self.hf = RepetitionPenaltyLogitsProcessor(penalty)

    def __call__(self, history: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if int(history.max()) >= scores.shape[-1]:
            return self.hf(history, scores)
        score = scores.gather(1, history)
        score = torch.where(score < 0, score * self.penalty, score / self.penalty)
        return scores.scatter(1, history, score)


class _Buffered:
    """A KV cache layer that decodes into a preallocated buffer: each step writes its token in place
    where Hugging Face's dynamic layers concatenate (a copy of the whole cache per step and layer).
    The keys and values it returns are the same tensors' values, as views of the buffer."""

    def start_buffer(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        self.start_merged([(keys, values, keys.shape[0])], room)

    def start_merged(self, parts: Sequence[tuple], room: int) -> None:
        """The buffer of several caches' ``(keys, values, rows)``, one under the other, each repeated
        to its ``rows`` and left-padded with zeros to the longest, with ``room`` tokens to decode into:
        one copy of each cache."""
        keys = parts[0][0]
        size = max(k.shape[-2] for k, _, _ in parts)
        shape = [sum(n for _, _, n in parts), *keys.shape[1:]]
        shape[-2] = size + room
        self._k, self._v = keys.new_empty(shape), keys.new_empty(shape)
        row = 0
        for k, v, n in parts:
            pad = size - k.shape[-2]
            if pad:
                self._k[row:row + n, ..., :pad, :] = 0
                self._v[row:row + n, ..., :pad, :] = 0
            self._k[row:row + n, ..., pad:size, :] = k
            self._v[row:row + n, ..., pad:size, :] = v
            row += n
        self._n = size
        self.keys, self.values = self._k[..., :size, :], self._v[..., :size, :]

    def _append(self, key_states: torch.Tensor, value_states: torch.Tensor):
        n, t = self._n, key_states.shape[-2]
        if n + t > self._k.shape[-2]:  # past the room asked for: grow
            self.start_buffer(self._k[..., :n, :], self._v[..., :n, :], max(t, n))
        self._k[..., n:n + t, :] = key_states
        self._v[..., n:n + t, :] = value_states
        self._n = n + t
        return self._k[..., :n + t, :], self._v[..., :n + t, :]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        kept = self.keys.shape[-2]  # a sliding-window layer keeps only its last tokens
        self._k, self._v = self._k[indices], self._v[indices]
        self.keys, self.values = self._k[..., self._n - kept:self._n, :], self._v[..., self._n - kept:self._n, :]


class _BufferedLayer(_Buffered, DynamicLayer):
    def update(self, key_states, value_states, *args, **kwargs):
        self.keys, self.values = self._append(key_states, value_states)
        return self.keys, self.values


class _BufferedSlidingLayer(_Buffered, DynamicSlidingWindowLayer):
    def update(self, key_states, value_states, *args, **kwargs):
        # As the sliding-window layer: attention sees the kept window plus the new tokens, and
        # the last ``sliding_window - 1`` tokens are kept.
        kept = self.keys.shape[-2]
        self.cumulative_length += key_states.shape[-2]
        keys, values = self._append(key_states, value_states)
        seen = kept + key_states.shape[-2]
        keys, values = keys[..., -seen:, :], values[..., -seen:, :]
        self.keys, self.values = keys[..., -self.sliding_window + 1:, :], values[..., -self.sliding_window + 1:, :]
        return keys, values


def _buffer_kind(layer):
    """The buffered class for a dynamic layer, or ``None`` for another kind of layer."""
    if type(layer) is DynamicLayer:
        return _BufferedLayer
    if type(layer) is DynamicSlidingWindowLayer and not layer.record_past:
        return _BufferedSlidingLayer
    return None


def _buffered(layer, room: int, parts: Optional[Sequence[tuple]] = None):
    """A dynamic layer as a buffered one with ``room`` tokens to decode into, holding ``parts``
    (``(keys, values, rows)`` of several caches, see :meth:`_Buffered.start_merged`) or the layer's
    own keys and values; another kind of layer is returned as it is, to decode as its class does."""
    kind = _buffer_kind(layer)
    if kind is None:
        return layer
    buffered = kind.__new__(kind)
    buffered.__dict__.update(layer.__dict__)
    buffered.start_merged(parts or [(layer.keys, layer.values, layer.keys.shape[0])], room)
    return buffered


#: Finished rows leave a decode batch when (finished rows) x (steps left) exceeds this many times the
#: live rows: copying a live row's KV cache costs about as much as a few steps of a row's attention.
COMPACT_AFTER = 4

#: The most rows a linear layer computes as ``w @ x.T`` (see :func:`_weight_major`).
WEIGHT_MAJOR_ROWS = 32


class _WeightMajorLinear(torch.nn.Linear):
    """A bias-free linear layer computing ``w @ x.T`` for up to ``WEIGHT_MAJOR_ROWS`` rows.

    The product comes out transposed: the decoder's layers make it contiguous (the next operations
    view it); the output layer (``transposed_output``) returns it as a view, left for
    :func:`_float_rows` to transpose while it converts to float32, one pass over the logits instead
    of two."""
    transposed_output = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if rows > WEIGHT_MAJOR_ROWS:
            return torch.nn.functional.linear(x, self.weight)
        out = (self.weight @ x.reshape(rows, x.shape[-1]).T).T
        if not self.transposed_output:
            out = out.contiguous()
        return out.reshape(*x.shape[:-1], self.weight.shape[0])


def _float_rows(logits: torch.Tensor) -> torch.Tensor:
    """The last position's logits of each row, in float32 and contiguous, whatever their layout."""
    return logits[:, -1].to(torch.float32, memory_format=torch.contiguous_format)


def _weight_major(model):
    """``model`` with its bias-free bfloat16 linear layers computing ``w @ x.T`` for up to
    ``WEIGHT_MAJOR_ROWS`` rows: the same values as ``linear`` (bit for bit there, tested), 30-40%
    faster on CPUs for the few rows of a decode step, where ``linear`` reads the weights at half the
    machine's bandwidth. A structural copy: the caller's model is left as it is; the weights are shared."""
    tensors = [*model.parameters(), *model.buffers()]
    model = copy.deepcopy(model, {id(t): t for t in tensors})
    for module in model.modules():
        if (type(module) is torch.nn.Linear and module.bias is None
                and module.weight.dtype == torch.bfloat16 and module.weight.device.type == 'cpu'):
            module.__class__ = _WeightMajorLinear
    head = model.get_output_embeddings() if hasattr(model, 'get_output_embeddings') else None
    if isinstance(head, _WeightMajorLinear):
        head.transposed_output = True
    return model


class CausalLMBackend(DecodingBackendBase):
    """Generates answers with a Hugging Face causal LM: one prefill per prompt, per-prompt seeds.

    Each distinct prompt is prefilled once, in chunks that end at line boundaries; its samples
    decode together from that prefill, each with its own seed. The KV cache after each chunk is
    kept (``prefix_cache_mb``, least recently used evicted), so prompts that start with the same
    lines (the instructions; the contexts of a smaller k) skip them. Chunks depend only on the
    prompt, so an answer is the same whether its prefix was cached or not.

    Consecutive prompts (in :meth:`prompt_order`) decode together, up to ``batch_size`` answers,
    their caches padded on the left. A row's answer does not depend on its batch mates beyond the
    rounding of batched matrix products (in bfloat16 or float32 that can, rarely, change a token);
    batches are formed the same way on every run, so a killed run resumes to the same answers.

    Args:
        model: a loaded ``AutoModelForCausalLM``; when it is not in ``dtype``, a converted copy is
            used (the caller's model is left as it is).
        tokenizer: its tokenizer (a fast one gives line chunks; a slow one prefills whole prompts).
        model_id: a name for the model, part of every generation cache key.
        decoding: the :class:`~pyterrier_utility.settings.Decoding` (default: the authors' 0.3,
            top-k 50, 300 new tokens, stop at "STOP"); single fields may be given as keywords
            (``temperature=0``). Every field but ``top_p`` is honoured; ``top_k`` 0 or ``None``
            samples among all tokens, and the repetition penalty is Hugging Face's.
        batch_size: the most answers decoded together (and asked for at a time by the reader and
            the generation cache); the samples of a prompt are never split.
        chat_template: wrap each prompt as a user turn of the tokenizer's chat template.
        max_input_length: the most prompt tokens (defaults to the model's context size).
        dtype: ``'auto'`` (bfloat16 on CPUs with bf16 matrix instructions, float32 on other CPUs,
            the model's own dtype on an accelerator), ``'float32'``, ``'bfloat16'``, ``'float16'``
            or a ``torch.dtype``. Part of the generation cache key.
        prefix_cache_mb: memory for the KV caches of prefixes (``0``: no reuse).
        min_chunk_tokens: the fewest tokens of a prefill chunk (a chunk ends at the first line
            boundary after them). Part of the generation cache key.

    Example::

        backend = CausalLMBackend.from_pretrained('google/gemma-3-1b-it', chat_template=True)
        reader = pyterrier_utility.Reader(backend)
    """
    DECODING_FIELDS = ENGINE_DECODING['huggingface']
    ENGINE_FIELDS = ('chat_template', 'max_input_length', 'dtype_name', 'prefill_chunks', 'sampler')
    #: Answers cut at ``max_new_tokens`` so far (each output's ``truncated`` says which).
    truncated = 0

    def __init__(self, model, tokenizer, *, model_id: str, decoding: Optional[Decoding] = None,
                 batch_size: int = 32, chat_template: bool = False, max_input_length: Optional[int] = None,
                 dtype: Union[str, torch.dtype] = 'auto', prefix_cache_mb: int = 1024,
                 min_chunk_tokens: int = 32, verbose: bool = False, **decoding_fields):
        name = f'CausalLMBackend({model_id!r})'
        decoding = split_decoding(name, decoding, Decoding(), decoding_fields)
        check(not decoding_fields, name, f'unknown arguments {sorted(decoding_fields)}')
        check_int(name, 'batch_size', batch_size, 1)
        check_int(name, 'prefix_cache_mb', prefix_cache_mb, 0)
        check_int(name, 'min_chunk_tokens', min_chunk_tokens, 1)
        model_limit = getattr(model.config, 'max_position_embeddings', None) or 2048
        super().__init__(model_id, max_new_tokens=decoding.max_new_tokens, verbose=verbose,
                         max_input_length=max_input_length or model_limit)
        self._set_decoding(decoding)
        self.dtype = resolve_dtype(dtype, model.device) or model.dtype
        if model.dtype != self.dtype:
            model = copy.deepcopy(model).to(self.dtype)
        if self.dtype == torch.bfloat16 and model.device.type == 'cpu':
            model = _weight_major(model)
        self.model = model.eval()
        # A copy: the padding token is set for this backend, not for the caller's tokenizer.
        self.tokenizer = copy.copy(tokenizer)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        eos = model.generation_config.eos_token_id
        self.eos_token_ids = set([eos] if isinstance(eos, int) else eos or [self.tokenizer.eos_token_id])
        self.batch_size = batch_size
        self.chat_template = chat_template
        self.min_chunk_tokens = min_chunk_tokens
        self.prefixes = PrefixCache(prefix_cache_mb * 2**20)
        self.generated_tokens = 0
        self.prompt_tokens = 0
        self.prefilled_tokens = 0

    @classmethod
    def from_pretrained(cls, path: str, *, trust_remote_code: bool = False, device: Optional[str] = None,
                        dtype: Union[str, torch.dtype] = 'auto', **kwargs) -> 'CausalLMBackend':
        """Loads any Hugging Face causal LM by id or path (remote code only when opted in), in the
        dtype it will run in; ``model_id`` defaults to ``path``."""
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=trust_remote_code,
                                                     dtype=resolve_dtype(dtype, device) or 'auto')
        if device:
            model = model.to(device)  # type: ignore[arg-type]  # transformers types its wrapped `to` wrongly
        kwargs.setdefault('model_id', path)
        return cls(model, tokenizer, dtype=model.dtype, **kwargs)

    @property
    def dtype_name(self) -> str:
        return str(self.dtype).replace('torch.', '')

    @property
    def prefill_chunks(self) -> str:
        """How prompts are cut for prefilling (answers may differ by rounding with other cuts)."""
        return f'lines, >= {self.min_chunk_tokens} tokens'

    @property
    def sampler(self) -> str:
        """How tokens are drawn from the scores (answers differ with another method)."""
        return 'greedy' if self.decoding.greedy else _SeededSampling.METHOD

    @staticmethod
    def prompt_order(prompt: str) -> str:
        """The order prompts are best answered in: alphabetical, so that prompts sharing a prefix
        come one after the other while its KV cache is at hand."""
        return prompt

    def _format(self, prompt: str) -> str:
        if not self.chat_template:
            return prompt
        return self.tokenizer.apply_chat_template([{'role': 'user', 'content': prompt}],
                                                  add_generation_prompt=True, tokenize=False)

    @torch.no_grad()
    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1) -> List[BackendOutput]:
        seeds, max_new_tokens, stop = self._call(inps, seeds, return_logprobs, num_responses, max_new_tokens,
                                                 stop_sequences)
        greedy = self.decoding.greedy
        rows: Dict[str, List[int]] = {}
        for i, prompt in enumerate(inps):
            rows.setdefault(prompt, []).append(i)
        # Decoded together: consecutive prompts (in prompt order) up to batch_size answers.
        prompts = list(rows)
        groups = [[prompts[i] for i in group] for group in
                  work_batches(self, prompts, [1 if greedy else len(rows[p]) for p in prompts])]
        texts: Dict[int, Answer] = {}
        for group in groups:
            answers = self._answer([(p, [seeds[i] for i in rows[p]]) for p in group], max_new_tokens, stop)
            for prompt, per_seed in zip(group, answers):
                for i, answer in zip(rows[prompt], per_seed):
                    texts[i] = answer
        self.truncated += sum(bool(a.truncated) for a in texts.values())
        return [texts[i] for i in range(len(inps))]

    def _tokenize(self, prompt: str):
        """The prompt's token ids (cut from the left to ``max_input_length``) and its chunk ends."""
        text = self._format(prompt)
        fast = getattr(self.tokenizer, 'is_fast', False)
        enc = self.tokenizer(text, add_special_tokens=not self.chat_template, return_offsets_mapping=fast)
        ids = torch.tensor(enc['input_ids'][-self.max_input_length:], dtype=torch.long)
        check(len(ids) > 0, repr(self), f'the prompt {prompt!r} has no tokens')
        if not fast:
            return ids, [len(ids)]
        return ids, line_chunks(text, enc['offset_mapping'][-self.max_input_length:], self.min_chunk_tokens)

    def _prefill(self, ids: torch.Tensor, ends: List[int]):
        """The KV cache of the whole prompt and the logits after its last token."""
        start, cache = self.prefixes.longest(ids, ends)
        self.prefilled_tokens += len(ids) - start
        device = self.model.device
        for end in ends:
            if end <= start:
                continue
            chunk = ids[None, start:end].to(device)
            if end < len(ids):
                # The decoder alone: a chunk before the last needs no logits.
                out = self.model.get_decoder()(input_ids=chunk, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                self.prefixes.put(ids, end, cache)
            else:
                out = self.model(input_ids=chunk, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache = out.past_key_values
            start = end
        return cache, _float_rows(out.logits)

    def _merge(self, prefills, room: int):
        """One batch from the prefills of several prompts, each repeated for its rows: caches padded
        on the left (into buffers with ``room`` tokens to decode into, where the layers allow), with
        the attention mask, positions and repetition-penalty history that go with them (a prompt
        alone gets no padding)."""
        longest = max(len(ids) for ids, _, _, _ in prefills)
        caches = [cache for _, cache, _, _ in prefills]
        counts = [n for _, _, _, n in prefills]
        merged = caches[0]
        layers = []
        for parts in zip(*(c.layers for c in caches)):
            layer = parts[0]
            if _buffer_kind(layer) is not None:
                layer = _buffered(layer, room, [(p.keys, p.values, n) for p, n in zip(parts, counts)])
            else:
                for name in ('keys', 'values'):
                    tensors = [getattr(part, name).repeat_interleave(n, dim=0) for part, n in zip(parts, counts)]
                    size = max(t.shape[-2] for t in tensors)
                    setattr(layer, name, torch.cat([torch.nn.functional.pad(t, (0, 0, size - t.shape[-2], 0))
                                                    for t in tensors]))
            if hasattr(layer, 'cumulative_length'):
                layer.cumulative_length = longest
            layers.append(layer)
        merged.layers = layers
        device = self.model.device
        mask, history, positions = [], [], []
        for ids, _, _, n in prefills:
            pad = longest - len(ids)
            mask += [torch.cat([torch.zeros(pad, dtype=torch.long), torch.ones(len(ids), dtype=torch.long)])] * n
            # Padded with the prompt's own first token, which the penalty already counts.
            history += [torch.cat([ids[:1].repeat(pad), ids])] * n
            positions += [len(ids)] * n
        scores = torch.cat([logits.repeat(n, 1) for _, _, logits, n in prefills])
        return (merged, torch.stack(mask).to(device), torch.stack(history).to(device),
                torch.tensor(positions, device=device), scores)

    def _answer(self, items: List[tuple], max_new_tokens: int,
                stop_sequences: Optional[Sequence[str]]) -> List[List[Answer]]:
        """The answers to ``(prompt, seeds)`` items, one per seed: each prompt prefilled once, all
        rows decoded together (finished rows leave the batch); an answer is ``truncated`` when its
        row was still going (no end of text, no stop sequence) after ``max_new_tokens``, and its
        ``logprob`` sums the log-softmax of the raw logits of each chosen token, end of text included."""
        prefills, row_seeds = [], []
        for prompt, seeds in items:
            ids, ends = self._tokenize(prompt)
            self.prompt_tokens += len(ids) * len(seeds)
            cache, logits = self._prefill(ids, ends)
            n = 1 if self.decoding.greedy else len(seeds)
            prefills.append((ids, cache, logits, n))
            row_seeds += seeds[:n]
        cache, mask, history, positions, scores = self._merge(prefills, max_new_tokens)
        d = self.decoding
        sampler = None if d.greedy else _SeededSampling(row_seeds, d.temperature, d.top_k or 0)
        penalty = _Penalty(d.repetition_penalty) if d.repetition_penalty not in (None, 1.0) else None
        tokens: List[List[int]] = [[] for _ in row_seeds]
        cut = [False] * len(row_seeds)
        logprob, counted = [0.0] * len(row_seeds), [0] * len(row_seeds)
        active = list(range(len(row_seeds)))  # the row of each position of the batch
        live = [True] * len(active)  # finished rows stay in the batch until dropping them pays
        for step in range(max_new_tokens):
            # The model's own logits: the penalty, temperature and top-k give new tensors.
            raw = scores
            if penalty is not None:
                scores = penalty(history, scores)
            chosen = scores.argmax(-1).cpu() if sampler is None else sampler.next_tokens(scores, active)
            keep = []
            # log-softmax at the chosen tokens only: a whole (rows, vocabulary) one allocates.
            chosen_logprob = (raw.gather(1, chosen.to(raw.device)[:, None])[:, 0]
                              - torch.logsumexp(raw, dim=-1)).tolist()
            for j, (row, token) in enumerate(zip(active, chosen.tolist())):
                if not live[j]:
                    continue
                logprob[row] += chosen_logprob[j]
                counted[row] += 1
                if token in self.eos_token_ids:
                    continue
                tokens[row].append(token)
                tail = self.tokenizer.decode(tokens[row][-64:]) if stop_sequences else ''
                if not any(s in tail for s in stop_sequences or ()):
                    keep.append(j)
            if not keep or step == max_new_tokens - 1:
                for j in keep:
                    cut[active[j]] = True
                break
            live = [False] * len(active)
            for j in keep:
                live[j] = True
            # Dropping finished rows copies the live rows' KV cache; keeping them costs their
            # attention at every step left: drop them when that would cost more.
            if (len(active) - len(keep)) * (max_new_tokens - 1 - step) > COMPACT_AFTER * len(keep):
                index = torch.tensor(keep, device=mask.device)
                cache.batch_select_indices(index)
                mask, history, positions = mask[index], history[index], positions[index]
                active, chosen, live = [active[j] for j in keep], chosen[keep], [True] * len(keep)
            chosen = chosen.to(mask.device)[:, None]
            history = torch.cat([history, chosen], dim=1)
            mask = torch.cat([mask, torch.ones_like(chosen)], dim=1)
            out = self.model(input_ids=chosen, attention_mask=mask, position_ids=positions[:, None],
                             past_key_values=cache, use_cache=True)
            positions = positions + 1
            cache, scores = out.past_key_values, _float_rows(out.logits)
        self.generated_tokens += sum(map(len, tokens))
        texts = [Answer(text=cut_at_stop(self.tokenizer.decode(t, skip_special_tokens=True), stop_sequences),
                        truncated=c, logprob=lp, tokens=n) for t, c, lp, n in zip(tokens, cut, logprob, counted)]
        answers, row = [], 0
        for (_, seeds), (_, _, _, n) in zip(items, prefills):
            answers.append(texts[row:row + n] * (len(seeds) if n == 1 else 1))
            row += n
        return answers

    def __repr__(self):
        return (f'CausalLMBackend({self.model_id!r}, temperature={self.decoding.temperature}, '
                f'top_k={self.decoding.top_k})')
