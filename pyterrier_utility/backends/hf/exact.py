"""Exact forward passes of a Gemma 3 text model (:func:`exact_model`): the products in integers, the
float parts element by element or in a fixed order (:mod:`~.exact_ops`), so that its logits, hence its
answers and their log-probabilities, are the same bytes on every CPU and in any batch, by construction.

A layer's work and attention's are :mod:`~.exact_kernels`' functions, compiled by TorchScript, which holds
Python's lock for none of their operations; this class holds the caches and walks the layers.

The model keeps its KV caches itself, in the layout the integer products read: each token's keys and
values as 16-bit integers with a scale per token and head, in two bytes. A prompt's cache (:class:`ExactCache`) is
built chunk by chunk and kept by the prefix cache as any other; a decode batch (:class:`ExactBatch`)
holds each prompt's keys once for all the rows (samples) that decode from it, and each row's decoded
keys apart. Attention is computed per prompt: its rows' queries against its keys in one product, and
each row's queries against its own decoded keys.
"""
from types import SimpleNamespace
from typing import List, Optional, Sequence, Tuple

import torch

from .exact_kernels import Weights, compiled_layer, kernels
from .exact_ops import ExactLinear, cos_sin

#: The architectures :func:`exact_model` computes (``config.model_type``).
EXACT_MODEL_TYPES = ('gemma3_text',)


def supports_exact(model) -> bool:
    """Whether :func:`exact_model` computes ``model``'s architecture."""
    return getattr(model.config, 'model_type', None) in EXACT_MODEL_TYPES


class _Kept(SimpleNamespace):
    """One layer's keys and values for one prompt: 16-bit integers as two bytes, ``keys`` int8 ``(kv heads,
    2, tokens, dim)`` and ``values`` transposed, ``(kv heads, 2, dim, tokens)`` (the first operands of
    attention's products), ``key_scales``/``value_scales`` float32 ``(kv heads, tokens)``, ``start`` the
    position of the first (a sliding-window layer keeps its window's last tokens)."""


class ExactCache:
    """The KV cache of one prompt for an exact model, grown chunk by chunk: ``layers`` (one
    :class:`_Kept` each) and ``length``, the tokens seen."""

    def __init__(self, layers: int):
        self.layers: List[_Kept] = [_Kept(keys=None, values=None, key_scales=None, value_scales=None, start=0)
                                    for _ in range(layers)]
        self.length = 0

    def get_seq_length(self) -> int:
        return self.length


class _BatchLayer:
    """One layer of a decode batch: each prompt's keys and values once, the rows' decoded ones apart."""

    def __init__(self, prompts: Sequence[_Kept], owner: List[int], room: int, kv: int, dim: int):
        self.prompts: List[Optional[_Kept]] = list(prompts)
        self.owner = owner
        rows = len(owner)
        self.keys = torch.empty(rows, kv, room, dim, dtype=torch.int16)
        self.values = torch.empty(rows, kv, room, dim, dtype=torch.int16)
        self.key_scales = torch.empty(rows, kv, room)
        self.value_scales = torch.empty(rows, kv, room)
        self.n = 0

    def append(self, keys: Tuple[torch.Tensor, torch.Tensor], values: Tuple[torch.Tensor, torch.Tensor]) -> None:
        """Each row's new token's keys and values (``(int16 (rows, kv, dim), scales (rows, kv))``)."""
        if self.n == self.keys.shape[2]:  # past the room asked for: grow
            for name in ('keys', 'values', 'key_scales', 'value_scales'):
                held = getattr(self, name)
                setattr(self, name, torch.cat([held, torch.empty_like(held)], dim=2))
        self.keys[:, :, self.n], self.key_scales[:, :, self.n] = keys
        self.values[:, :, self.n], self.value_scales[:, :, self.n] = values
        self.n += 1

    def select(self, index: torch.Tensor) -> None:
        for name in ('keys', 'values', 'key_scales', 'value_scales'):
            setattr(self, name, getattr(self, name)[index])
        self.owner = [self.owner[i] for i in index.tolist()]
        kept = set(self.owner)
        self.prompts = [p if i in kept else None for i, p in enumerate(self.prompts)]


class ExactBatch:
    """A decode batch of an exact model: rows decoding from prompts' :class:`ExactCache`\\ s, each prompt's
    keys held once; rows of one prompt are consecutive."""

    def __init__(self, caches: Sequence[ExactCache], counts: Sequence[int], room: int, kv: int, dim: int):
        owner = [i for i, n in enumerate(counts) for _ in range(n)]
        self.layers = [_BatchLayer([c.layers[i] for c in caches], owner, room, kv, dim)
                       for i in range(len(caches[0].layers))]
        self._runs = _runs(owner)
        #: Each prompt's tokens: a row's next position is its prompt's length and its tokens decoded so far.
        self.lengths = torch.tensor([c.length for c in caches])

    def runs(self) -> List[Tuple[int, int, int]]:
        """``(first row, end row, prompt)``: each run of rows decoding from one prompt."""
        return self._runs

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        for layer in self.layers:
            layer.select(indices)
        self._runs = _runs(self.layers[0].owner)


def _runs(owner: List[int]) -> List[Tuple[int, int, int]]:
    runs, first = [], 0
    for row in range(1, len(owner) + 1):
        if row == len(owner) or owner[row] != owner[first]:
            runs.append((first, row, owner[first]))
            first = row
    return runs


class _Rotary:
    """Rotary embeddings' cos and sin per position (float64 angles, their cosines and sines by
    :func:`~.exact_ops.cos_sin`, rounded once to float32), grown as positions are asked for."""

    def __init__(self, theta: float, dim: int):
        self.inverse = torch.tensor([theta ** (-(2 * i) / dim) for i in range(dim // 2)], dtype=torch.float64)
        self.cos = self.sin = torch.empty(0, dim)

    def tables(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        needed = int(positions.max()) + 1
        if needed > len(self.cos):
            size = max(needed, 2 * len(self.cos), 1024)
            angles = torch.arange(size, dtype=torch.float64)[:, None] * self.inverse[None]
            angles = torch.cat([angles, angles], dim=-1)
            cos, sin = cos_sin(angles)
            self.cos, self.sin = cos.to(torch.float32), sin.to(torch.float32)
        return self.cos[positions], self.sin[positions]


class ExactGemma3:
    """A Gemma 3 text model computed exactly (see the module): called as a Hugging Face causal LM is by
    :class:`~pyterrier_utility.backends.hf.CausalLMBackend` (``model(input_ids=..., past_key_values=...,
    position_ids=..., logits_to_keep=...)``, ``get_decoder()``, ``get_output_embeddings()``), its caches
    :class:`ExactCache` (a prompt) and :class:`ExactBatch` (a decode batch).

    The input embedding is the output layer's integer table, row by row (the weights are tied)."""
    device = torch.device('cpu')
    dtype = torch.int8

    def __init__(self, hf_model):
        config = hf_model.config.get_text_config()
        self.config = hf_model.config
        self.generation_config = hf_model.generation_config
        self.heads, self.kv = config.num_attention_heads, config.num_key_value_heads
        self.dim = config.head_dim
        self.eps = config.rms_norm_eps
        self.scaling = config.query_pre_attn_scalar ** -0.5
        self.embed_scale = torch.tensor(config.hidden_size ** 0.5, dtype=torch.float32)
        self.head = ExactLinear(hf_model.get_output_embeddings().weight)
        self.kernels = kernels()
        self.head.compile(self.kernels.linear)
        self.norm_gain = 1 + hf_model.model.norm.weight.detach().float()
        self.layer_types = list(config.layer_types)
        windows = [config.sliding_window if kind == 'sliding_attention' else -1 for kind in self.layer_types]
        self.layers = [compiled_layer(Weights(layer, config, window))
                       for layer, window in zip(hf_model.model.layers, windows)]
        rope = config.rope_parameters
        self.rotary = {kind: _Rotary(rope[kind]['rope_theta'], self.dim) for kind in set(config.layer_types)}

    def eval(self) -> 'ExactGemma3':
        return self

    def get_output_embeddings(self):
        return self.head

    def get_decoder(self):
        return lambda input_ids, past_key_values=None, **_: self._decoder(input_ids, past_key_values)

    def __call__(self, input_ids: torch.Tensor, past_key_values=None, position_ids=None, logits_to_keep: int = 0,
                 **_):
        out = self._decoder(input_ids, past_key_values)
        hidden = out.last_hidden_state
        if logits_to_keep:
            hidden = hidden[:, -logits_to_keep:]
        return SimpleNamespace(logits=self.head(hidden), past_key_values=out.past_key_values)

    def _decoder(self, input_ids: torch.Tensor, cache):
        """The final norm's hidden states ``(rows, tokens, hidden)``: one prompt's chunk (``cache`` an
        :class:`ExactCache` or ``None``; one row) or one decode step (an :class:`ExactBatch`; a token per row)."""
        if isinstance(cache, ExactBatch):
            positions = self._positions(cache)
        else:
            if cache is None:
                cache = ExactCache(len(self.layers))
            if input_ids.shape[0] != 1:
                raise ValueError('an exact model prefills one prompt at a time')
            positions = torch.arange(cache.length, cache.length + input_ids.shape[1])
        ids = input_ids.reshape(-1)
        x = self.head.rows(ids) * self.embed_scale
        tables = {kind: rotary.tables(positions) for kind, rotary in self.rotary.items()}
        for index, (layer, kind) in enumerate(zip(self.layers, self.layer_types)):
            q, k, v = layer.before(x, *tables[kind])
            if isinstance(cache, ExactBatch):
                attended = self._attend_step(layer.window, cache, index, q, k, v)
            else:
                attended = self._attend_chunk(layer.window, cache.layers[index], q, k, v, positions)
            x = layer.after(x, attended)
        if isinstance(cache, ExactCache):
            cache.length += len(ids)
        x = self.kernels.rms_norm(x, self.norm_gain, self.eps)
        return SimpleNamespace(last_hidden_state=x.view(*input_ids.shape, -1), past_key_values=cache)

    def _positions(self, batch: ExactBatch) -> torch.Tensor:
        layer = batch.layers[0]
        return batch.lengths[layer.owner] + layer.n

    def _attend_chunk(self, window: int, kept: _Kept, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      positions: torch.Tensor) -> torch.Tensor:
        """A prefill chunk's attention (:func:`~.exact_kernels.attend_chunk`); keeps the keys and values."""
        held = None if kept.keys is None else [kept.keys, kept.key_scales, kept.values, kept.value_scales]
        out, held, kept.start = self.kernels.attend_chunk(q, k, v, positions, held, kept.start, window, self.scaling)
        kept.keys, kept.key_scales, kept.values, kept.value_scales = held
        return out

    def _attend_step(self, window: int, batch: ExactBatch, index: int, q: torch.Tensor, k: torch.Tensor,
                     v: torch.Tensor) -> torch.Tensor:
        """A decode step's attention (:func:`~.exact_kernels.attend_step`), the rows' new keys and values
        appended first."""
        held = batch.layers[index]
        held.append(self.kernels.token_integers(k), self.kernels.token_integers(v))
        runs = batch.runs()
        prompts = [held.prompts[prompt] for _, _, prompt in runs]
        return self.kernels.attend_step(
            q, [held.keys, held.values, held.key_scales, held.value_scales], held.n, window,
            [(first, end) for first, end, _ in runs],
            [[p.keys, p.key_scales, p.values, p.value_scales] for p in prompts], self.scaling)  # type: ignore


def exact_model(model) -> ExactGemma3:
    """``model`` (a Hugging Face Gemma 3 causal LM, any float dtype) computed exactly: see the module."""
    if not supports_exact(model):
        raise ValueError(f'exact forward passes are written for {list(EXACT_MODEL_TYPES)}, '
                         f'not {getattr(model.config, "model_type", None)!r}')
    return ExactGemma3(model)
