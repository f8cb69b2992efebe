"""Exact forward passes of a Gemma 3 text model (:func:`exact_model`): the products in integers, the
float parts element by element or in a fixed order (:mod:`~.exact_ops`), so that its logits, hence its
answers and their log-probabilities, are the same bytes on every CPU and in any batch, by construction.

The model keeps its KV caches itself, in the layout the integer products read: each token's keys and
values as 7-bit integers with a scale per token and head. A prompt's cache (:class:`ExactCache`) is
built chunk by chunk and kept by the prefix cache as any other; a decode batch (:class:`ExactBatch`)
holds each prompt's keys once for all the rows (samples) that decode from it, and each row's decoded
keys apart. Attention is computed per prompt: its rows' queries against its keys in one product, and
each row's queries against its own decoded keys.
"""
from types import SimpleNamespace
from typing import List, Optional, Sequence, Tuple

import torch

from .exact_ops import (
    ACTIVATION_LIMIT,
    KV_LIMIT,
    ExactLinear,
    bytes_of,
    gelu_tanh,
    int_mm,
    parts,
    quantized,
    rms_norm,
    softmax,
)

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


def _token(k: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each row's new token's keys or values ``(rows, kv heads, dim)`` as 16-bit integers per head: ``(int16
    (rows, kv, dim), scales (rows, kv))``."""
    q, scale = quantized(k, KV_LIMIT)
    return q.to(torch.int16), scale[..., 0]


def _tokens(k: torch.Tensor, transposed: bool) -> Tuple[torch.Tensor, torch.Tensor]:
    """Keys or values ``(tokens, kv heads, dim)`` as 16-bit integers per token and head, in two bytes:
    ``(int8 (kv, 2, tokens, dim), scales (kv, tokens))``, or ``(kv, 2, dim, tokens)`` ``transposed``."""
    q, scale = quantized(k.transpose(0, 1), KV_LIMIT)
    held = bytes_of(q).transpose(0, 1)
    return (held.transpose(-1, -2) if transposed else held).contiguous(), scale[..., 0]


def _exact(product: torch.Tensor, rows: int) -> torch.Tensor:
    """The integers (int64) of a product of two bytes (``(2 * n, ...)`` rows, high first) by two 7-bit parts
    (``2 * rows`` columns, high first): ``(n, rows)``, exact."""
    c = product.view(2, -1, 2, rows).to(torch.int64)
    high, low = c[0], c[1]
    return (high[:, 0] * 128 + high[:, 1]) * 256 + low[:, 0] * 128 + low[:, 1]


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
    """Rotary embeddings' cos and sin per position (float64 angles, rounded once to float32), grown as
    positions are asked for."""

    def __init__(self, theta: float, dim: int):
        self.inverse = torch.tensor([theta ** (-(2 * i) / dim) for i in range(dim // 2)], dtype=torch.float64)
        self.cos = self.sin = torch.empty(0, dim)

    def tables(self, positions: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        needed = int(positions.max()) + 1
        if needed > len(self.cos):
            size = max(needed, 2 * len(self.cos), 1024)
            angles = torch.arange(size, dtype=torch.float64)[:, None] * self.inverse[None]
            angles = torch.cat([angles, angles], dim=-1)
            self.cos, self.sin = torch.cos(angles).to(torch.float32), torch.sin(angles).to(torch.float32)
        return self.cos[positions], self.sin[positions]


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` (tokens, heads, dim) rotated by its tokens' ``cos``/``sin`` (tokens, dim)."""
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + turned * sin[:, None]


class _Layer:
    """One decoder layer's weights and settings."""

    def __init__(self, hf_layer, config, layer_type: str):
        attention, mlp = hf_layer.self_attn, hf_layer.mlp
        self.qkv = ExactLinear(torch.cat([attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight]))
        self.o = ExactLinear(attention.o_proj.weight)
        self.gate_up = ExactLinear(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]))
        self.down = ExactLinear(mlp.down_proj.weight)
        self.intermediate = mlp.gate_proj.weight.shape[0]
        gain = {name: 1 + getattr(hf_layer, name).weight.detach().float()
                for name in ('input_layernorm', 'post_attention_layernorm', 'pre_feedforward_layernorm',
                             'post_feedforward_layernorm')}
        self.gains = gain
        self.q_gain = 1 + attention.q_norm.weight.detach().float()
        self.k_gain = 1 + attention.k_norm.weight.detach().float()
        self.window = config.sliding_window if layer_type == 'sliding_attention' else None
        self.layer_type = layer_type


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
        self.norm_gain = 1 + hf_model.model.norm.weight.detach().float()
        self.layers = [_Layer(layer, config, kind) for layer, kind in zip(hf_model.model.layers, config.layer_types)]
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
        for index, layer in enumerate(self.layers):
            x = self._layer(index, layer, x, positions, cache)
        if isinstance(cache, ExactCache):
            cache.length += len(ids)
        x = rms_norm(x, self.norm_gain, self.eps)
        return SimpleNamespace(last_hidden_state=x.view(*input_ids.shape, -1), past_key_values=cache)

    def _positions(self, batch: ExactBatch) -> torch.Tensor:
        layer = batch.layers[0]
        return batch.lengths[layer.owner] + layer.n

    def _layer(self, index: int, layer: _Layer, x: torch.Tensor, positions: torch.Tensor, cache) -> torch.Tensor:
        h = rms_norm(x, layer.gains['input_layernorm'], self.eps)
        qkv = layer.qkv(h)
        tokens, hd, kvd = len(x), self.heads * self.dim, self.kv * self.dim
        q = rms_norm(qkv[:, :hd].reshape(tokens, self.heads, self.dim), layer.q_gain, self.eps)
        k = rms_norm(qkv[:, hd:hd + kvd].reshape(tokens, self.kv, self.dim), layer.k_gain, self.eps)
        v = qkv[:, hd + kvd:].reshape(tokens, self.kv, self.dim)
        cos, sin = self.rotary[layer.layer_type].tables(positions)
        q, k = _rotated(q, cos, sin), _rotated(k, cos, sin)
        if isinstance(cache, ExactBatch):
            attended = self._attend_step(layer, cache, index, q, k, v)
        else:
            attended = self._attend_chunk(layer, cache.layers[index], q, k, v, positions)
        h = rms_norm(layer.o(attended.reshape(tokens, hd)), layer.gains['post_attention_layernorm'], self.eps)
        x = x + h
        h = rms_norm(x, layer.gains['pre_feedforward_layernorm'], self.eps)
        gate_up = layer.gate_up(h)
        h = layer.down(gelu_tanh(gate_up[:, :layer.intermediate]) * gate_up[:, layer.intermediate:])
        return x + rms_norm(h, layer.gains['post_feedforward_layernorm'], self.eps)

    def _scores(self, queries: torch.Tensor, q_scale: torch.Tensor, keys: torch.Tensor,
                key_scales: torch.Tensor) -> torch.Tensor:
        """Scaled dot products of query integers (``(rows, dim)``, 14-bit, with ``q_scale`` (rows, 1)) with
        keys (two bytes, int8 ``(2, tokens, dim)``, with ``key_scales`` (tokens,)): ``(rows, tokens)``."""
        rows = len(queries)
        product = int_mm(keys.reshape(-1, keys.shape[-1]), parts(queries).view(2 * rows, -1).t())
        exact = _exact(product, rows).t().to(torch.float32)
        return exact.mul_(q_scale).mul_(key_scales).mul_(self.scaling)

    def _weighted(self, weights: torch.Tensor, values: torch.Tensor, value_scales: torch.Tensor,
                  own: Optional[Tuple[torch.Tensor, torch.Tensor]] = None) -> torch.Tensor:
        """``weights`` (rows, tokens) times values (two bytes, transposed: int8 ``(2, dim, tokens)``, with
        ``value_scales`` (tokens,)), and, with ``own``, each row's last weights times its own decoded values
        (``(int16 (rows, own, dim), scales (rows, own))``): ``(rows, dim)`` float32."""
        shared, rows = values.shape[-1], len(weights)
        if own is not None:
            value_scales = torch.cat([value_scales.expand(rows, -1), own[1]], dim=-1)
        weights, scale = quantized(weights * value_scales, ACTIVATION_LIMIT)
        split = parts(weights[:, :shared].contiguous()).view(2 * rows, shared)
        total = _exact(int_mm(values.reshape(-1, shared), split.t()), rows).t()  # (rows, dim)
        if own is not None:
            # A row's own values: products over a few integers in float64, exact.
            total = total + torch.bmm(weights[:, None, shared:].to(torch.float64), own[0].to(torch.float64))[:, 0]
        return total.to(torch.float32).mul_(scale)

    def _attend_chunk(self, layer: _Layer, kept: _Kept, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      positions: torch.Tensor) -> torch.Tensor:
        """A prefill chunk's attention: its queries ``(tokens, heads, dim)`` over the prompt's keys so far
        and its own, under the causal mask (and the layer's window); keeps the keys and values."""
        keys, key_scales = _tokens(k, False)
        values, value_scales = _tokens(v, True)
        if kept.keys is not None:
            keys, key_scales = torch.cat([kept.keys, keys], 2), torch.cat([kept.key_scales, key_scales], 1)
            values, value_scales = torch.cat([kept.values, values], 3), torch.cat([kept.value_scales, value_scales], 1)
        key_positions = torch.arange(kept.start, kept.start + keys.shape[2])
        seen = key_positions[None] <= positions[:, None]
        if layer.window is not None:
            seen &= positions[:, None] - key_positions[None] < layer.window
        tokens, group = len(q), self.heads // self.kv
        queries, q_scale = quantized(q, ACTIVATION_LIMIT)  # per token and head
        out = torch.empty(tokens, self.heads, self.dim)
        for g in range(self.kv):
            heads = slice(g * group, (g + 1) * group)
            scores = self._scores(queries[:, heads].reshape(tokens * group, self.dim),
                                  q_scale[:, heads].reshape(-1, 1), keys[g], key_scales[g])
            scores = scores.view(tokens, group, -1).masked_fill_(~seen[:, None], float('-inf'))
            out[:, heads] = self._weighted(softmax(scores).view(tokens * group, -1), values[g],
                                           value_scales[g]).view(tokens, group, self.dim)
        if layer.window is not None and keys.shape[2] > layer.window - 1:
            cut = keys.shape[2] - (layer.window - 1)
            keys, values = keys[:, :, cut:].contiguous(), values[..., cut:].contiguous()
            key_scales, value_scales = key_scales[:, cut:].contiguous(), value_scales[:, cut:].contiguous()
            kept.start += cut
        kept.keys, kept.key_scales, kept.values, kept.value_scales = keys, key_scales, values, value_scales
        return out

    def _attend_step(self, layer: _Layer, batch: ExactBatch, index: int, q: torch.Tensor, k: torch.Tensor,
                     v: torch.Tensor) -> torch.Tensor:
        """A decode step's attention: each row's query ``(rows, heads, dim)`` over its own decoded keys (its
        new token's included) and its prompt's. A row's scores are laid out as its own keys', then its
        prompt's, then ``-inf`` up to the widest row's: the softmax, the weights' scaling and their
        integers are computed for all rows at once, each product with a prompt's keys once per prompt."""
        held = batch.layers[index]
        held.append(_token(k), _token(v))
        rows, group, n = len(q), self.heads // self.kv, held.n
        own = n if layer.window is None else min(n, layer.window)
        visible = None if layer.window is None else max(0, layer.window - n)
        mine = slice(n - own, n)
        runs = batch.runs()
        kept = [held.prompts[prompt] for _, _, prompt in runs]
        width = own + max(p.keys.shape[2] for p in kept)  # type: ignore[union-attr]
        queries, q_scale = quantized(q, ACTIVATION_LIMIT)
        q_parts = parts(queries)  # (2, rows, heads, dim)
        out = torch.empty(rows, self.heads, self.dim)
        for g in range(self.kv):
            heads = slice(g * group, (g + 1) * group)
            scores = torch.full((rows, group, width), float('-inf'))
            value_scales = torch.zeros(rows, 1, width)
            # A row's own keys: products over a few integers in float64, exact.
            scores[..., :own] = torch.bmm(queries[:, heads].to(torch.float64),
                                          held.keys[:, g, mine].to(torch.float64).transpose(1, 2))
            scores[..., :own].mul_(held.key_scales[:, g, None, mine])
            value_scales[:, 0, :own] = held.value_scales[:, g, mine]
            for (first, end, _), prompt in zip(runs, kept):
                length, span = prompt.keys.shape[2], end - first  # type: ignore[union-attr]
                b = q_parts[:, first:end, heads].reshape(2 * span * group, self.dim).t()
                product = _exact(int_mm(prompt.keys[g].view(2 * length, self.dim), b), span * group)  # type: ignore
                place = scores[first:end, :, own:own + length]
                place.copy_(product.t().view(span, group, length)).mul_(prompt.key_scales[g])  # type: ignore
                if visible is not None and length > visible:  # past the window: masked
                    place[..., :length - visible] = float('-inf')
                value_scales[first:end, 0, own:own + length] = prompt.value_scales[g]  # type: ignore[union-attr]
            scores.mul_(q_scale[:, heads]).mul_(self.scaling)
            weights, scale = quantized(softmax(scores) * value_scales, ACTIVATION_LIMIT)  # (rows, group, width)
            total = torch.bmm(weights[..., :own].to(torch.float64), held.values[:, g, mine].to(torch.float64))
            w_parts = parts(weights)  # (2, rows, group, width)
            for (first, end, _), prompt in zip(runs, kept):
                length, span = prompt.keys.shape[2], end - first  # type: ignore[union-attr]
                b = w_parts[:, first:end, :, own:own + length].reshape(2 * span * group, length).t()
                product = _exact(int_mm(prompt.values[g].view(2 * self.dim, length), b), span * group)  # type: ignore
                total[first:end] += product.t().view(span, group, self.dim)
            out[:, heads] = total.to(torch.float32).mul_(scale)
        return out


def exact_model(model) -> ExactGemma3:
    """``model`` (a Hugging Face Gemma 3 causal LM, any float dtype) computed exactly: see the module."""
    if not supports_exact(model):
        raise ValueError(f'exact forward passes are written for {list(EXACT_MODEL_TYPES)}, '
                         f'not {getattr(model.config, "model_type", None)!r}')
    return ExactGemma3(model)
