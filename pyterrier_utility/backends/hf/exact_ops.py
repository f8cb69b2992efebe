"""The arithmetic of exact forward passes: every product in integers, every float part element by element
or in a fixed order, so that a value is the same bytes on every CPU (whatever its vector width, its
matrix instructions or its number of threads) and whatever else is computed beside it.

- **Products.** A float's product sums its terms in the order of the kernel (its tile, its ISA, its
  threads). Integer sums are exact in any order: a weight is 8-bit integers times a scale per output
  channel (:data:`WEIGHT_LIMIT`), an activation 14-bit integers times a scale per row, as a high and a
  low 7-bit part (:func:`parts`), keys and values 16-bit integers times a scale per token, as two bytes
  (:func:`bytes_of`), and ``torch._int_mm`` (int8 x int8 -> int32) computes the parts' products in one
  call. The second operand's parts are 7 bits, which keeps a CPU without VNNI exact too: its
  ``vpmaddubsw`` sums pairs of u8 x s8 products in 16 bits, which full 8-bit integers there saturate.
  Products over a few values (a row's own decoded keys) are float64 products of integers, exact
  while below 2**53. Where oneDNN's int8 GEMM has no kernels of its own (a CPU with AVX2 alone), :func:`int_mm`
  computes float32 products of the same integers, each partial sum below 2**24 and so exact in any order.
- **Reductions.** A sum over a row is of integers (:func:`exact_sum`: each term a whole number of
  units, a 2**36th of the row's largest), exact in float64 in any order. A maximum is exact in any order.
- **Functions.** Exponentials, logarithms, ``tanh`` and square roots come from ``torch.expm1``,
  ``torch.log1p`` and ``torch.rsqrt`` (:func:`exp`, :func:`log`, :func:`tanh`, :func:`rms_norm`), cosines
  and sines from a polynomial in basic arithmetic (:func:`cos_sin`). ``torch.exp``, ``torch.log``,
  ``torch.tanh``, ``torch.sqrt``, ``torch.cos`` and ``torch.sin`` call Intel MKL's vector functions, whose
  code path (AVX-512, AVX2, SSE4.2, or another for a CPU not Intel's) MKL picks for the CPU it finds and
  whose last bits differ between paths; ``torch.exp2`` and ``torch.sigmoid`` compute a tensor's tail in
  scalar code, which rounds differently from their vector code. The three used here run the same vector
  code in every position under ATen's AVX2 and AVX-512 kernels (the test suite checks it under each
  ``ATEN_CPU_CAPABILITY`` and ``MKL_ENABLE_INSTRUCTIONS`` the CPU has, and at every length and offset).
"""
import math
import os
from typing import List, Optional, Tuple, Union

import torch

#: The ISA caps exact answers are checked under (``tests/test_exact.py``, ``benchmarks/bench_isa_caps.py``): each
#: its environment (oneDNN's cap on the integer products, ATen's on the element-wise kernels) and the CPU flag it
#: needs. They stand in for an AMD EPYC (bfloat16 and VNNI, no AMX), a Xeon without AMX, and laptops with
#: AVX-VNNI or AVX2 alone; MKL's (its vector functions' code path, which MKL picks by the CPU's maker and kind)
#: for the paths MKL takes on other CPUs.
ISA_CAPS = {
    'oneDNN AVX512_CORE_BF16': ({'ONEDNN_MAX_CPU_ISA': 'AVX512_CORE_BF16'}, 'avx512_bf16'),
    'oneDNN AVX512_CORE_VNNI': ({'ONEDNN_MAX_CPU_ISA': 'AVX512_CORE_VNNI'}, 'avx512_vnni'),
    'oneDNN AVX2_VNNI': ({'ONEDNN_MAX_CPU_ISA': 'AVX2_VNNI'}, 'avx_vnni'),
    'oneDNN AVX2': ({'ONEDNN_MAX_CPU_ISA': 'AVX2'}, 'avx2'),
    'ATen avx512': ({'ATEN_CPU_CAPABILITY': 'avx512'}, 'avx512bw'),
    'ATen avx2': ({'ATEN_CPU_CAPABILITY': 'avx2'}, 'avx2'),
    'oneDNN AVX2, ATen avx2': ({'ONEDNN_MAX_CPU_ISA': 'AVX2', 'ATEN_CPU_CAPABILITY': 'avx2'}, 'avx2'),
    'MKL AVX2': ({'MKL_ENABLE_INSTRUCTIONS': 'AVX2'}, 'avx2'),
    'MKL SSE4_2': ({'MKL_ENABLE_INSTRUCTIONS': 'SSE4_2'}, 'sse4_2'),
    'MKL compatible': ({'MKL_CBWR': 'COMPATIBLE'}, 'sse2'),
}
#: A program that reports the ISAs a process computes with, run under ``ONEDNN_VERBOSE=1`` and ``MKL_VERBOSE=1``:
#: a packed product (oneDNN reports its ISA when it first computes; on a CPU with AVX2 alone ``torch._int_mm`` and
#: bfloat16 products do not reach oneDNN), a float64 product (MKL's banner names its code path) and ATen's own
#: capability, printed as ``aten:NAME``.
ISA_PROBE = ('import torch; from pyterrier_utility.backends.hf import exact_ops as eo; '
             'a = torch.ones(8, 64, dtype=torch.int8); eo.int_mm(a, a.t().contiguous(), False); '
             'eo.packable(a) and eo.packed_product(torch.ones(2, 64, dtype=torch.uint8), eo.packed(a), 8); '
             'b = torch.ones(8, 8, dtype=torch.float64); b @ b; '
             'print("aten:" + torch.backends.cpu.get_cpu_capability())')
#: The environment variables of :data:`ISA_CAPS`: a run under one cap inherits none of the others.
CAP_VARIABLES = tuple(sorted({name for env, _ in ISA_CAPS.values() for name in env}))
#: The largest integer of the second operand of an integer product, whose parts are 7 bits (with -64).
PART_LIMIT = 64
#: The largest weight integer (8 bits): the first operand of a layer's product.
WEIGHT_LIMIT = 127
#: The largest activation integer: 14 bits, as a high and a low 7-bit part (``hi * 128 + lo``), the second
#: operand of a product.
ACTIVATION_LIMIT = 63 * 128 + 63
#: The largest key and value integer: 16 bits, as a high and a low signed byte (``hi * 256 + lo``), the
#: first operand of attention's products.
KV_LIMIT = 127 * 256 + 127
#: The rows of a weight quantized at a time (:class:`ExactLinear`): a float32 copy of the whole tied output
#: layer would be 0.67 GB beside its bfloat16 original, about a third of the offline reader's peak.
QUANTIZED_ROWS = 4096
#: The most terms of a product of 8-bit integers and an activation's parts whose ``128 * high + low`` int32
#: holds: each term at most ``127 * (128 * 64 + 64)``.
_INT32_TERMS = (2**31 - 1) // (WEIGHT_LIMIT * (128 * PART_LIMIT + PART_LIMIT))


def quantized(x: torch.Tensor, limit: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(q, scale)`` with ``x ~ q * scale``: ``q`` integers (as floats) within ``[-limit, limit]``, one
    scale per row (last dimension), the row's largest magnitude over ``limit`` (1 for a row of zeros)."""
    amax = x.abs().amax(-1, keepdim=True)
    scale = torch.where(amax > 0, amax / limit, torch.ones_like(amax))
    return (x / scale).round_().clamp_(-limit, limit), scale


def exp(x: torch.Tensor) -> torch.Tensor:
    """``e ** x`` for ``x <= 0`` (``-inf`` included, which gives 0) as ``expm1(x) + 1``, in ``x``'s dtype:
    its error at most ``2**-24`` in float32 and ``2**-53`` in float64, below the units a softmax's weights
    and sums are counted in."""
    return torch.expm1(x.contiguous()).add_(1)


#: ln 2 and sqrt(1/2), in float64.
_LN2, _SQRT_HALF = 0.6931471805599453, 0.7071067811865476


def log(x: torch.Tensor) -> torch.Tensor:
    """The natural logarithm of positive ``x`` (float64): ``x = m * 2**e`` (``torch.frexp``, exact), ``m``
    doubled below sqrt(1/2) so that it is in [sqrt(1/2), sqrt(2)), and ``log(x) = log1p(m - 1) + e * ln 2``
    with ``m - 1`` exact (and ``e`` 0 near 1, where the logarithm is small)."""
    mantissa, exponent = torch.frexp(x.contiguous())
    low = mantissa < _SQRT_HALF
    mantissa = torch.where(low, mantissa * 2, mantissa)
    exponent = torch.where(low, exponent - 1, exponent)
    return torch.log1p(mantissa - 1) + exponent.to(x.dtype) * _LN2


def tanh(x: torch.Tensor) -> torch.Tensor:
    """``tanh(x)`` element by element as ``-m / (2 + m)`` with ``m = expm1(-2|x|)`` (in (-1, 0], so
    neither overflow nor cancellation), the sign of ``x`` put back."""
    m = torch.expm1(x.abs().mul(-2).contiguous())
    return torch.copysign(-m / (m + 2), x)


#: pi / 2 in three parts (fdlibm's ``pio2_1``, ``pio2_2``, ``pio2_3``), the first two of 33 bits, so that
#: their products with a quadrant count below 2**20 are exact.
_PIO2 = (1.57079632673412561417e+00, 6.07710050630396597660e-11, 2.02226624871116645580e-21)
#: Taylor coefficients of sin (r**3 / 3!, ..., r**17 / 17!) and cos (r**2 / 2!, ..., r**18 / 18!), signed.
_SIN = [(-1) ** i / math.factorial(2 * i + 1) for i in range(1, 9)]
_COS = [(-1) ** i / math.factorial(2 * i) for i in range(1, 10)]


def _horner(r2: torch.Tensor, coefficients) -> torch.Tensor:
    """``c1 * r2 + c2 * r2**2 + ...``, by Horner's rule."""
    total = torch.full_like(r2, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        total = total * r2 + c
    return total * r2


def cos_sin(angles: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """The cosines and sines of float64 ``angles`` (below 2**20 * pi / 2 in magnitude) in basic arithmetic:
    the angle less its nearest multiple of pi / 2 (a three-part pi / 2, so the remainder is exact to about
    2**-70), then Taylor polynomials on [-pi / 4, pi / 4], whose next terms are below 2**-60. Every
    operation is an IEEE addition, multiplication or rounding, the same bytes on every CPU."""
    quadrant = torch.round(angles * (2 / math.pi))
    r = angles - quadrant * _PIO2[0]
    r = r - quadrant * _PIO2[1]
    r = r - quadrant * _PIO2[2]
    r2 = r * r
    sin = r + r * _horner(r2, _SIN)
    cos = 1 + _horner(r2, _COS)
    turn = torch.remainder(quadrant, 4)
    sin_out = torch.where(turn == 0, sin, torch.where(turn == 1, cos, torch.where(turn == 2, -sin, -cos)))
    cos_out = torch.where(turn == 0, cos, torch.where(turn == 1, -sin, torch.where(turn == 2, -cos, sin)))
    return cos_out, sin_out


def _split(q: torch.Tensor, zero_point: int, dtype: torch.dtype) -> torch.Tensor:
    """``q``'s high and low 7-bit parts plus ``zero_point``, stacked on a new first dimension, as ``dtype``:
    ``hi`` the floor of ``(q + 64) / 128``, ``lo = q - 128 * hi``, every step exact in float32."""
    high = torch.floor((q + 64) * (1 / 128))
    low = torch.sub(q, high, alpha=128)
    if zero_point != 0:
        high.add_(zero_point)
        low.add_(zero_point)
    out = torch.empty([2] + list(q.shape), dtype=dtype)
    out[1].copy_(low)
    out[0].copy_(high)
    return out


def parts(q: torch.Tensor) -> torch.Tensor:
    """Activation integers (as floats, within :data:`ACTIVATION_LIMIT`) as their high and low 7-bit parts,
    stacked on a new first dimension: ``q == 128 * hi + lo``, each within ``[-64, 63]``."""
    return _split(q, 0, torch.int8)


def unsigned_parts(q: torch.Tensor, zero_point: int = PART_LIMIT) -> torch.Tensor:
    """:func:`parts` plus 64, as unsigned bytes within ``[0, 127]``: the operand of :func:`packed_product`, whose
    zero point is 64."""
    return _split(q, zero_point, torch.uint8)


def bytes_of(q: torch.Tensor) -> torch.Tensor:
    """Key or value integers (as floats, within :data:`KV_LIMIT`) as their high and low signed bytes,
    stacked on a new first dimension: ``q == 256 * hi + lo``."""
    whole = q.to(torch.int32)
    high = (whole + 128) >> 8
    return torch.stack([high, whole - high * 256]).to(torch.int8)


def packable(weight: torch.Tensor) -> bool:
    """Whether :func:`packed` can hold ``weight`` (int8 ``(out, in)``): torch's oneDNN operations are there, and
    each part's sum (``in`` products of 8-bit and 7-bit integers) is a float32 integer, exact."""
    return (torch.backends.mkldnn.is_available() and hasattr(torch.ops, 'onednn')
            and hasattr(torch.ops.onednn, 'qlinear_prepack') and weight.shape[1] * WEIGHT_LIMIT * PART_LIMIT < 2**24)


def packed(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` (int8 ``(out, in)``) in oneDNN's own layout for :func:`packed_product`."""
    return torch.ops.onednn.qlinear_prepack(weight, None)


def packed_product(split: torch.Tensor, weight: torch.Tensor, channels: int,
                   zero_point: int = PART_LIMIT) -> torch.Tensor:
    """``split @ weight.T`` for unsigned parts ``split`` (:func:`unsigned_parts`, ``(rows, in)``) less their zero
    point 64 and a :func:`packed` weight: ``(rows, channels)`` float32, each an integer below 2**24, exact.
    oneDNN's quantized linear layer (AMX, AVX-512 VNNI or AVX2: its 16-bit pair sums hold 7-bit by 8-bit
    products) sums the integers in int32 and scales them by 1."""
    none: List[Optional[Union[int, float, complex]]] = []
    return torch.ops.onednn.qlinear_pointwise(split, 1.0, zero_point, weight, torch.ones(channels),
                                              torch.zeros(channels, dtype=torch.int64), None, 1.0, 0,
                                              torch.float32, 'none', none, '')


#: oneDNN's ISAs from AVX-512 up (``ONEDNN_MAX_CPU_ISA``'s names): its int8 GEMM, which ``torch._int_mm`` calls, has
#: kernels of its own there. On a CPU with AVX2 alone it falls to a reference loop: on a 2-core AMD EPYC with AVX2
#: alone, 2.4 billion operations a second, 35 times slower than a float32 product of the same integers. A cap
#: below them takes the float32 products too, so that it stands in for such a CPU.
_INT8_GEMM_ISAS = ('AVX512_CORE', 'AVX512_CORE_VNNI', 'AVX512_CORE_BF16', 'AVX10_1_512', 'AVX512_CORE_FP16',
                   'AVX10_1_512_AMX', 'AVX10_1_512_AMX_FP16', 'AVX10_2_512', 'AVX10_2_512_AMX_2', 'AVX512_CORE_AMX',
                   'AVX512_CORE_AMX_FP16', 'ALL', 'DEFAULT')


def _int8_gemm() -> bool:
    """Whether oneDNN's int8 GEMM has its own kernels here: the CPU has AVX-512 and ``ONEDNN_MAX_CPU_ISA``, if
    set, does not cap oneDNN below it."""
    cap = os.environ.get('ONEDNN_MAX_CPU_ISA', '').strip().upper()
    return torch.cpu._is_avx512_supported() and (not cap or cap in _INT8_GEMM_ISAS)


#: Whether :func:`int_mm` computes in float32 (where ``torch._int_mm`` would take its reference loop): the same
#: integers, exactly.
FLOAT_PRODUCTS = not _int8_gemm()
#: The terms of a float32 product of int8 matrices whose every partial sum is an integer float32 holds: each
#: term at most 128 * 128, so any sum of this many at most 2**24, in any order.
FLOAT32_TERMS = 2**24 // (128 * 128)
#: The rows of the first operand :func:`int_mm` turns into floats at a time: 1 MiB of float32 at
#: :data:`FLOAT32_TERMS`, which stays in the CPU's cache (a whole block of the tied output layer in float32 would
#: be written to memory and read back).
FLOAT32_ROWS = 256


def int_mm(a: torch.Tensor, b: torch.Tensor, floats: bool = FLOAT_PRODUCTS, terms: int = FLOAT32_TERMS,
           rows: int = FLOAT32_ROWS) -> torch.Tensor:
    """``a @ b`` for int8 matrices, in int32, exact on every kernel: ``b``'s entries within
    :data:`PART_LIMIT` (a CPU without VNNI sums pairs of products of ``a + 128`` and ``b`` in 16 bits).

    By ``torch._int_mm``, or ``floats`` (:data:`FLOAT_PRODUCTS`) as float32 products of the same integers,
    :data:`FLOAT32_TERMS` terms and :data:`FLOAT32_ROWS` rows of ``a`` at a time: each partial sum an integer
    below 2**24, so exact whatever the kernel's order, its vector width or precision (TF32 and bfloat16 hold
    every int8 too), and the chunks' sums added in int32. Either gives the same integers."""
    if not floats:
        return torch._int_mm(a, b)
    inner, count = a.shape[1], a.shape[0]
    out = torch.empty(count, b.shape[1], dtype=torch.int32)
    for first in range(0, inner, terms):
        right = b[first:first + terms].to(torch.float32)
        for top in range(0, count, rows):
            part = torch.mm(a[top:top + rows, first:first + terms].to(torch.float32), right)
            if first == 0:
                out[top:top + rows] = part
            else:
                out[top:top + rows] += part.to(torch.int32)
    return out


def combined(high: torch.Tensor, low: torch.Tensor, terms: int, exact_terms: int = _INT32_TERMS) -> torch.Tensor:
    """``128 * high + low`` (products with the two parts of :func:`parts`, each a sum of ``terms``
    products with 8-bit integers), exact: in int32 while it holds them, else in float64; a product with a
    float rounds it once."""
    if terms <= exact_terms:
        return torch.add(low, high, alpha=128)
    return high.to(torch.float64).mul_(128).add_(low)


#: The terms of :func:`exact_sum` are integers up to this many units: a row of up to 2**16 of them sums
#: below 2**53, exactly in float64 in any order.
SUM_UNITS = 2**36


def exact_sum(terms: torch.Tensor, units: int = SUM_UNITS) -> torch.Tensor:
    """The sum of each row (last dimension, kept as 1) in float64: each term rounded to a multiple of the
    row's largest over :data:`SUM_UNITS` (a relative precision of 2**-36), the multiples summed exactly,
    so in any order, on any kernel and thread count, whatever else is in the batch and for zeros
    appended to the row."""
    terms = terms.to(torch.float64)
    unit = terms.abs().amax(-1, keepdim=True) / units
    unit = torch.where(unit > 0, unit, torch.ones_like(unit))
    return (terms / unit).round_().sum(-1, keepdim=True) * unit


def softmax(scores: torch.Tensor) -> torch.Tensor:
    """The softmax of each row (last dimension; ``-inf`` for a masked entry), its normaliser an
    :func:`exact_sum`."""
    terms = exp(scores - scores.amax(-1, keepdim=True))
    return terms / exact_sum(terms).to(torch.float32)


def rms_norm(x: torch.Tensor, gain: torch.Tensor, eps: float) -> torch.Tensor:
    """``x / sqrt(mean(x**2) + eps) * gain`` over the last dimension, the sum an :func:`exact_sum`."""
    mean = (exact_sum(x * x) / x.shape[-1]).to(torch.float32)
    return (x * torch.rsqrt(mean + eps)).mul_(gain)


#: sqrt(2 / pi), GELU's tanh approximation's constant.
_GELU_C = 0.7978845608028654


def gelu_tanh(x: torch.Tensor, c: float = _GELU_C) -> torch.Tensor:
    """GELU's tanh approximation (``gelu_pytorch_tanh``), ``x * (tanh(inner) + 1) / 2``, element by element
    as ``x / (2 + expm1(-2 * inner))`` (the same function: no cancellation, and 0 where ``expm1`` overflows)."""
    inner = (x * x).mul_(x).mul_(0.044715).add_(x).mul_(c)  # (x + x * x * x * 0.044715) * c, in place
    return x / inner.mul_(-2).contiguous().expm1_().add_(2)


#: Output channels per integer product: a wider layer (the tied output layer, 262 144 channels) is computed in
#: blocks of this many, each block's integers turned into floats while they are in the CPU's cache and written
#: into the rows' outputs, which on a 2-core AMD EPYC takes half the time of one product over all the channels.
BLOCK = 4096


def linear(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, packed_weight: Optional[torch.Tensor] = None,
           limit: int = ACTIVATION_LIMIT, block: int = BLOCK) -> torch.Tensor:
    """``x @ weight.T`` for a bias-free layer in integers: ``weight`` int8 ``(out, in)`` with ``scale`` per
    output channel, ``x`` quantized to 14-bit integers with a scale per row, both parts' products in one
    :func:`packed_product` with ``packed_weight`` (its :func:`packed` layout) where given, else in one
    ``torch._int_mm`` (per block of :data:`BLOCK` channels). Either gives the same integers, hence the same
    bytes."""
    inner = x.shape[-1]
    rows = x.reshape(-1, inner)
    q, row_scale = quantized(rows.to(torch.float32), limit)
    count, channels = rows.shape[0], weight.shape[0]
    if packed_weight is not None:
        product = packed_product(unsigned_parts(q).view(2 * count, inner), packed_weight, channels)
        # 128 * high is exact and the sum rounds once: the value of combined()'s integer made a float.
        out = torch.add(product[count:], product[:count], alpha=128).mul_(scale).mul_(row_scale)
        return out.reshape(list(x.shape[:-1]) + [channels])
    split = parts(q).view(2 * count, inner).t()
    if channels <= block:
        product = int_mm(weight, split)  # (out, 2 * rows)
        part = torch.mul(combined(product[:, :count], product[:, count:], inner), scale[:, None])
        # Written out row by row: the layers' element-wise work on a transposed view is up to 2.4 times slower.
        out = torch.empty(count, channels).copy_(part.mul_(row_scale.t()).t())
    else:
        out = torch.empty(count, channels)
        # A few rows' products fill a block of 1 MiB with more channels: fewer operations, the same values.
        block = max(block, (1 << 18) // (2 * count))
        for first in range(0, channels, block):
            product = int_mm(weight[first:first + block], split)
            part = torch.mul(combined(product[:, :count], product[:, count:], inner), scale[first:first + block, None])
            out[:, first:first + block] = part.mul_(row_scale.t()).t()
    return out.reshape(list(x.shape[:-1]) + [channels])


class ExactLinear:
    """A bias-free linear layer in integers (:func:`linear`): 8-bit weights with a scale per output channel.

    Args:
        weight: ``(out, in)``, as ``torch.nn.Linear`` holds it (float of any precision).
        pack: also keep the weight in oneDNN's layout (:func:`packed`), where it can be. The tied output layer
            is not packed: its plain integers are the input embedding's too, so a packed copy would add its
            168 MB, and over its 262 144 channels ``int_mm`` in blocks is as fast for a decode step's rows.
    """

    def __init__(self, weight: torch.Tensor, pack: bool = False):
        weight = weight.detach()
        self.weight = torch.empty(weight.shape, dtype=torch.int8)
        self.scale = torch.empty(weight.shape[0], dtype=torch.float32)
        for first in range(0, weight.shape[0], QUANTIZED_ROWS):
            rows = slice(first, first + QUANTIZED_ROWS)
            q, scale = quantized(weight[rows].to(torch.float32), WEIGHT_LIMIT)
            self.weight[rows] = q.to(torch.int8)
            self.scale[rows] = scale[:, 0]
        #: The weight in oneDNN's layout (:func:`packed`) where it can be, else ``None``.
        self.packed = packed(self.weight) if pack and packable(self.weight) else None
        self._linear = linear

    @property
    def out_features(self) -> int:
        return self.weight.shape[0]

    def compile(self, compiled_linear) -> None:
        """Compute with ``compiled_linear`` (:func:`linear` compiled by TorchScript)."""
        self._linear = compiled_linear

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self._linear(x, self.weight, self.scale, self.packed)

    def rows(self, index: torch.Tensor) -> torch.Tensor:
        """The weight's rows ``index`` in float32 (an embedding table's lookup)."""
        return self.weight[index].to(torch.float32) * self.scale[index, None]
