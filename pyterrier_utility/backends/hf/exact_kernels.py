"""The compiled kernels of exact forward passes (:mod:`~.exact`): a decoder layer's work before and after
attention and attention's own, written once in TorchScript's subset of Python and compiled by
:func:`kernels` on first use.

TorchScript runs a function's torch operations one after another in its own interpreter, the same
operations in the same order as Python would, so the values are the same bytes; it holds Python's lock
for none of them. Two replica threads (:class:`~pyterrier_utility.backends.ThreadBackend`) then compute
their layers side by side, where Python's lock between the operations of a step would let one thread's
Python run at a time. Graph fusion, which would change the order of float operations, is off on a CPU
(``torch._C._jit_can_fuse_on_cpu()``) and :func:`kernels` refuses to compile with it on.
"""
import threading
import warnings
from types import SimpleNamespace
from typing import List, Optional, Tuple

import torch

from .exact_ops import (
    ACTIVATION_LIMIT,
    KV_LIMIT,
    PART_LIMIT,
    ExactLinear,
    bytes_of,
    gelu_tanh,
    int_mm,
    linear,
    parts,
    quantized,
    rms_norm,
    softmax,
)

#: The most terms of a product of a signed byte and an activation's parts whose ``128 * high + low`` int32
#: holds: each term at most ``128 * (128 * 64 + 64)``.
INT32_TERMS = (2**31 - 1) // (128 * (128 * PART_LIMIT + PART_LIMIT))


def exact_product(product: torch.Tensor, rows: int, terms: int, exact_terms: int = INT32_TERMS) -> torch.Tensor:
    """The integers (in float64, exact) of a product of two bytes (``(2 * n, ...)`` rows, high first) by two
    7-bit parts (``2 * rows`` columns, high first), each a sum of ``terms`` products: ``(n, rows)``. A byte's
    two products are combined in int32 while it holds them (``terms`` up to :data:`INT32_TERMS`), else in
    float64."""
    c = product.view(2, -1, 2, rows)
    if terms <= exact_terms:
        high = torch.add(c[0, :, 1], c[0, :, 0], alpha=128).to(torch.float64)
        return torch.add(torch.add(c[1, :, 1], c[1, :, 0], alpha=128), high, alpha=256)
    high = c[0, :, 0].to(torch.float64).mul_(128).add_(c[0, :, 1])
    return torch.add(c[1, :, 0].to(torch.float64).mul_(128).add_(c[1, :, 1]), high, alpha=256)


def rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """``x`` (tokens, heads, dim) rotated by its tokens' ``cos``/``sin`` (tokens, dim)."""
    half = x.shape[-1] // 2
    turned = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + turned * sin[:, None]


def token_integers(k: torch.Tensor, limit: int = KV_LIMIT) -> Tuple[torch.Tensor, torch.Tensor]:
    """Each row's new token's keys or values ``(rows, kv heads, dim)`` as 16-bit integers per head: ``(int16
    (rows, kv, dim), scales (rows, kv))``."""
    q, scale = quantized(k, limit)
    return q.to(torch.int16), scale[..., 0]


def tokens_bytes(k: torch.Tensor, transposed: bool, limit: int = KV_LIMIT) -> Tuple[torch.Tensor, torch.Tensor]:
    """Keys or values ``(tokens, kv heads, dim)`` as 16-bit integers per token and head, in two bytes:
    ``(int8 (kv, 2, tokens, dim), scales (kv, tokens))``, or ``(kv, 2, dim, tokens)`` ``transposed``."""
    q, scale = quantized(k.transpose(0, 1), limit)
    held = bytes_of(q).transpose(0, 1)
    if transposed:
        held = held.transpose(-1, -2)
    return held.contiguous(), scale[..., 0]


class Weights(torch.nn.Module):
    """One decoder layer's integer weights, norm gains and sizes, and its work on either side of attention."""
    qkv: torch.Tensor
    qkv_scale: torch.Tensor
    o: torch.Tensor
    o_scale: torch.Tensor
    gate_up: torch.Tensor
    gate_up_scale: torch.Tensor
    down: torch.Tensor
    down_scale: torch.Tensor
    input_layernorm: torch.Tensor
    post_attention_layernorm: torch.Tensor
    pre_feedforward_layernorm: torch.Tensor
    post_feedforward_layernorm: torch.Tensor
    q_gain: torch.Tensor
    k_gain: torch.Tensor
    qkv_packed: torch.Tensor
    o_packed: torch.Tensor
    gate_up_packed: torch.Tensor
    down_packed: torch.Tensor

    def __init__(self, hf_layer, config, window: int):
        super().__init__()
        attention, mlp = hf_layer.self_attn, hf_layer.mlp
        for name, weight in (('qkv', torch.cat([attention.q_proj.weight, attention.k_proj.weight,
                                                attention.v_proj.weight])),
                             ('o', attention.o_proj.weight),
                             ('gate_up', torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])),
                             ('down', mlp.down_proj.weight)):
            integers = ExactLinear(weight, pack=True)
            # A packed weight is the layer's own: its plain integers are kept only for their shape.
            shape = torch.empty(integers.out_features, 0, dtype=torch.int8)
            self.register_buffer(name, integers.weight if integers.packed is None else shape)
            self.register_buffer(name + '_scale', integers.scale)
            self.register_buffer(name + '_packed', shape if integers.packed is None else integers.packed)
            #: Whether the layers' weights are in oneDNN's layout (:func:`~.exact_ops.packed`).
            self.packed: bool = integers.packed is not None
        for name in ('input_layernorm', 'post_attention_layernorm', 'pre_feedforward_layernorm',
                     'post_feedforward_layernorm'):
            self.register_buffer(name, 1 + getattr(hf_layer, name).weight.detach().float())
        self.register_buffer('q_gain', 1 + attention.q_norm.weight.detach().float())
        self.register_buffer('k_gain', 1 + attention.k_norm.weight.detach().float())
        self.intermediate: int = mlp.gate_proj.weight.shape[0]
        self.heads: int = config.num_attention_heads
        self.kv: int = config.num_key_value_heads
        self.dim: int = config.head_dim
        self.eps: float = config.rms_norm_eps
        #: The sliding window's tokens, -1 for a layer of full attention.
        self.window: int = window

    @torch.jit.export
    def before(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor,
                                                                                        torch.Tensor]:
        """The tokens' queries ``(tokens, heads, dim)``, keys and values ``(tokens, kv heads, dim)``: normed,
        rotated (queries and keys)."""
        h = rms_norm(x, self.input_layernorm, self.eps)
        qkv = linear(h, self.qkv, self.qkv_scale, self.qkv_packed if self.packed else None)
        tokens, hd, kvd = x.shape[0], self.heads * self.dim, self.kv * self.dim
        q = rms_norm(qkv[:, :hd].reshape(tokens, self.heads, self.dim), self.q_gain, self.eps)
        k = rms_norm(qkv[:, hd:hd + kvd].reshape(tokens, self.kv, self.dim), self.k_gain, self.eps)
        v = qkv[:, hd + kvd:].reshape(tokens, self.kv, self.dim)
        return rotated(q, cos, sin), rotated(k, cos, sin), v

    @torch.jit.export
    def after(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """The layer's output from its input ``x`` and attention's ``(tokens, heads, dim)``."""
        tokens = x.shape[0]
        h = rms_norm(linear(attended.reshape(tokens, self.heads * self.dim), self.o, self.o_scale,
                            self.o_packed if self.packed else None),
                     self.post_attention_layernorm, self.eps)
        x = x + h
        h = rms_norm(x, self.pre_feedforward_layernorm, self.eps)
        gate_up = linear(h, self.gate_up, self.gate_up_scale, self.gate_up_packed if self.packed else None)
        h = linear(gelu_tanh(gate_up[:, :self.intermediate]) * gate_up[:, self.intermediate:], self.down,
                   self.down_scale, self.down_packed if self.packed else None)
        return x + rms_norm(h, self.post_feedforward_layernorm, self.eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # TorchScript compiles a module from its forward
        return x


def scores_of(queries: torch.Tensor, q_scale: torch.Tensor, keys: torch.Tensor, key_scales: torch.Tensor,
              scaling: float) -> torch.Tensor:
    """Scaled dot products of query integers (``(rows, dim)``, 14-bit, with ``q_scale`` (rows, 1)) with
    keys (two bytes, int8 ``(2, tokens, dim)``, with ``key_scales`` (tokens,)): ``(rows, tokens)``."""
    rows = queries.shape[0]
    product = int_mm(keys.reshape(-1, keys.shape[-1]), parts(queries).view(2 * rows, -1).t())
    exact = exact_product(product, rows, keys.shape[-1]).t().to(torch.float32)
    return exact.mul_(q_scale).mul_(key_scales).mul_(scaling)


def weighted(weights: torch.Tensor, values: torch.Tensor, value_scales: torch.Tensor,
             limit: int = ACTIVATION_LIMIT) -> torch.Tensor:
    """``weights`` (rows, tokens) times values (two bytes, transposed: int8 ``(2, dim, tokens)``, with
    ``value_scales`` (tokens,)): ``(rows, dim)`` float32."""
    shared, rows = values.shape[-1], weights.shape[0]
    weights, scale = quantized(weights * value_scales, limit)
    split = parts(weights[:, :shared].contiguous()).view(2 * rows, shared)
    total = exact_product(int_mm(values.reshape(-1, shared), split.t()), rows, shared).t()  # (rows, dim)
    return total.to(torch.float32).mul_(scale)


def attend_chunk(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor,
                 kept: Optional[List[torch.Tensor]], start: int, window: int, scaling: float,
                 limit: int = ACTIVATION_LIMIT, block: int = 32) -> Tuple[torch.Tensor, List[torch.Tensor], int]:
    """A prefill chunk's attention: its queries ``(tokens, heads, dim)`` over the prompt's keys so far
    (``kept``: keys, key scales, values, value scales, from position ``start``) and its own, under the causal
    mask and the layer's ``window`` (-1: none); with the keys and values to keep and their start.

    Computed ``block`` tokens at a time (their scores stay in the CPU's cache), each over the keys it can
    see: every value is a row's own (its scale, its sums), so the bytes are those of the whole chunk at once."""
    keys, key_scales = tokens_bytes(k, False)
    values, value_scales = tokens_bytes(v, True)
    if kept is not None:
        keys, key_scales = torch.cat([kept[0], keys], 2), torch.cat([kept[1], key_scales], 1)
        values, value_scales = torch.cat([kept[2], values], 3), torch.cat([kept[3], value_scales], 1)
    key_positions = torch.arange(start, start + keys.shape[2])
    seen = key_positions[None] <= positions[:, None]
    if window >= 0:
        seen &= positions[:, None] - key_positions[None] < window
    tokens, heads, dim, kv = q.shape[0], q.shape[1], q.shape[2], k.shape[1]
    group = heads // kv
    queries, q_scale = quantized(q, limit)  # per token and head
    out = torch.empty(tokens, heads, dim)
    for g in range(kv):
        first, end = g * group, (g + 1) * group
        for t0 in range(0, tokens, block):
            t1 = min(t0 + block, tokens)
            # The keys any of these tokens sees; the others' weights are zeros, which change no sum.
            low = 0 if window < 0 else max(0, int(positions[t0].item()) - window + 1 - start)
            high = int(positions[t1 - 1].item()) + 1 - start
            count = t1 - t0
            scores = scores_of(queries[t0:t1, first:end].reshape(count * group, dim),
                               q_scale[t0:t1, first:end].reshape(-1, 1), keys[g, :, low:high].contiguous(),
                               key_scales[g, low:high], scaling)
            scores = scores.view(count, group, -1).masked_fill_(~seen[t0:t1, None, low:high], float('-inf'))
            out[t0:t1, first:end] = weighted(softmax(scores).view(count * group, -1),
                                             values[g, :, :, low:high].contiguous(),
                                             value_scales[g, low:high]).view(count, group, dim)
    if window >= 0 and keys.shape[2] > window - 1:
        cut = keys.shape[2] - (window - 1)
        keys, values = keys[:, :, cut:].contiguous(), values[..., cut:].contiguous()
        key_scales, value_scales = key_scales[:, cut:].contiguous(), value_scales[:, cut:].contiguous()
        start += cut
    return out, [keys, key_scales, values, value_scales], start


def attend_step(q: torch.Tensor, held: List[torch.Tensor], n: int, window: int, runs: List[Tuple[int, int]],
                prompts: List[List[torch.Tensor]], scaling: float, limit: int = ACTIVATION_LIMIT) -> torch.Tensor:
    """A decode step's attention: each row's query ``(rows, heads, dim)`` over its own ``n`` decoded keys
    (``held``: keys, values as int16 ``(rows, kv, room, dim)``, their scales ``(rows, kv, room)``; its new
    token's included) and its prompt's (``prompts``: keys, key scales, values, value scales of each run of
    rows ``runs``, ``(first row, end row)``). A row's scores are laid out as its own keys', then its
    prompt's, then ``-inf`` up to the widest row's: the softmax, the weights' scaling and their integers are
    computed for all rows at once, each product with a prompt's keys once per prompt."""
    held_keys, held_values, held_key_scales, held_value_scales = held[0], held[1], held[2], held[3]
    rows, heads, dim, kv = q.shape[0], q.shape[1], q.shape[2], held_keys.shape[1]
    group = heads // kv
    own = n if window < 0 else min(n, window)
    visible = -1 if window < 0 else max(0, window - n)
    widest = 0
    for prompt in prompts:
        widest = max(widest, prompt[0].shape[2])
    width = own + widest
    queries, q_scale = quantized(q, limit)
    q_parts = parts(queries)  # (2, rows, heads, dim)
    out = torch.empty(rows, heads, dim)
    for g in range(kv):
        first_head, end_head = g * group, (g + 1) * group
        scores = torch.full((rows, group, width), float('-inf'))
        value_scales = torch.zeros(rows, 1, width)
        # A row's own keys: products over a few integers in float64, exact.
        scores[:, :, :own] = torch.bmm(queries[:, first_head:end_head].to(torch.float64),
                                       held_keys[:, g, n - own:n].to(torch.float64).transpose(1, 2))
        scores[:, :, :own].mul_(held_key_scales[:, g, None, n - own:n])
        value_scales[:, 0, :own] = held_value_scales[:, g, n - own:n]
        for i in range(len(runs)):
            first, end = runs[i]
            keys, key_scales, prompt_value_scales = prompts[i][0], prompts[i][1], prompts[i][3]
            length, span = keys.shape[2], end - first
            b = q_parts[:, first:end, first_head:end_head].reshape(2 * span * group, dim).t()
            product = exact_product(int_mm(keys[g].view(2 * length, dim), b), span * group, dim)
            place = scores[first:end, :, own:own + length]
            place.copy_(product.t().view(span, group, length)).mul_(key_scales[g])
            if visible >= 0 and length > visible:  # past the window: masked
                place[:, :, :length - visible] = float('-inf')
            value_scales[first:end, 0, own:own + length] = prompt_value_scales[g]
        scores.mul_(q_scale[:, first_head:end_head]).mul_(scaling)
        weights, scale = quantized(softmax(scores) * value_scales, limit)  # (rows, group, width)
        total = torch.bmm(weights[:, :, :own].to(torch.float64), held_values[:, g, n - own:n].to(torch.float64))
        w_parts = parts(weights)  # (2, rows, group, width)
        for i in range(len(runs)):
            first, end = runs[i]
            values = prompts[i][2]
            length, span = values.shape[-1], end - first
            b = w_parts[:, first:end, :, own:own + length].reshape(2 * span * group, length).t()
            product = exact_product(int_mm(values[g].view(2 * dim, length), b), span * group, length)
            total[first:end] += product.t().view(span, group, dim)
        out[:, first_head:end_head] = total.to(torch.float32).mul_(scale)
    return out


_COMPILED: Optional[SimpleNamespace] = None
_LOCK = threading.Lock()


def kernels() -> SimpleNamespace:
    """The functions above compiled by TorchScript, once per process: ``attend_chunk``, ``attend_step``,
    ``token_integers``, ``linear`` and ``rms_norm`` (layers are compiled by :func:`compiled_layer`)."""
    global _COMPILED
    with _LOCK:
        if _COMPILED is None:
            _COMPILED = SimpleNamespace(**{f.__name__: _script(f) for f in (
                attend_chunk, attend_step, token_integers, linear, rms_norm)})
        return _COMPILED


def compiled_layer(weights: Weights) -> torch.jit.ScriptModule:
    """A layer's :class:`Weights` compiled by TorchScript."""
    with _LOCK:
        return _script(weights)


def _script(what):
    if torch._C._jit_can_fuse_on_cpu():
        raise RuntimeError('exact forward passes need TorchScript without fusion on the CPU, which reorders float '
                           'operations: torch._C._jit_override_can_fuse_on_cpu(False)')
    # torch deprecates TorchScript for torch.compile, whose generated kernels fuse and reorder float
    # operations: what exact passes must not do.
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message='`torch.jit.script` is deprecated', category=DeprecationWarning)
        return torch.jit.script(what)
