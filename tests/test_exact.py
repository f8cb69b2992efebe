"""Exact forward passes (``dtype='exact'``, ``--dtype exact``): the products are
integers and the float parts element by element or sums of integers, so the answers and their
log-probabilities are the same bytes under every ISA the CPU can be capped to, and in any batch."""
import copy
import hashlib
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pyterrier_utility.backends.hf import exact_ops
from pyterrier_utility.backends.hf.exact import ExactBatch
from pyterrier_utility.backends.hf.invariant import row_logsumexp

PROMPTS = ['Question: what is a sigmet?\nAnswer:',
           'Context 1: the boundary layer of a flat plate in supersonic flow was measured in a wind tunnel at '
           'Mach numbers from 1.5 to 3, with heat transfer to the plate.\nQuestion: what was measured?\nAnswer:']
SEEDS = (11, 12, 13)


def test_an_integer_product_is_exact_for_full_bytes_by_seven_bit_parts():
    """``int_mm`` of 8-bit integers by integers within [-64, 63] equals the int64 product, at the shapes a
    layer, the output layer and attention give it (rows few and many, inner sizes odd and long)."""
    rng = np.random.default_rng(0)
    for m, k, n in [(1, 640, 1), (2 * 1536, 640, 12), (640, 2048, 64), (1400, 256, 24), (512, 701, 6), (7, 33, 5)]:
        a = torch.from_numpy(rng.integers(-128, 128, (m, k)).astype(np.int8))
        b = torch.from_numpy(rng.integers(-64, 64, (n, k)).astype(np.int8))
        assert torch.equal(exact_ops.int_mm(a, b.t()).long(), a.long() @ b.long().t()), (m, k, n)


def test_an_integer_product_in_float32_is_torchs_integer_product_for_any_bytes():
    """``int_mm``'s float32 products (a CPU whose ``torch._int_mm`` is a reference loop) give the int32 of
    ``torch._int_mm`` and of the int64 product, for full bytes on both sides at their largest, over inner sizes
    below, at and past :data:`~pyterrier_utility.backends.hf.exact_ops.FLOAT32_TERMS`."""
    rng = np.random.default_rng(2)
    terms = exact_ops.FLOAT32_TERMS
    for m, k, n in [(1, 640, 1), (300, 640, 12), (64, terms, 5), (9, terms + 1, 3), (20, 3 * terms + 7, 8)]:
        for case in ('random', 'largest', 'mixed'):
            if case == 'random':
                a, b = rng.integers(-128, 128, (m, k)), rng.integers(-128, 128, (n, k))
            else:
                a, b = np.full((m, k), -128 if case == 'largest' else 127), np.full((n, k), -128)
            a, b = torch.from_numpy(a.astype(np.int8)), torch.from_numpy(b.astype(np.int8)).t()
            floats = exact_ops.int_mm(a, b, True)
            assert floats.dtype == torch.int32 and torch.equal(floats.long(), a.long() @ b.long()), (m, k, n, case)
            assert torch.equal(floats, exact_ops.int_mm(a, b, False)), (m, k, n, case)


_PACKED_CHECK = (
    'import numpy as np, torch; from pyterrier_utility.backends.hf import exact_ops as eo; '
    'rng = np.random.default_rng(1); found = []\n'
    'for m, k, n in [(1, 640, 1), (1536, 640, 12), (640, 2048, 64), (96, 2048, 7), (77, 1024, 300)]:\n'
    '    for case in ("high", "low", "random"):\n'
    '        top = 127 if case == "high" else -127\n'
    '        w = rng.integers(-127, 128, (m, k)) if case == "random" else np.full((m, k), top)\n'
    '        x = np.full((n, k), 127) if case != "random" else rng.integers(0, 128, (n, k))\n'
    '        w, x = torch.from_numpy(w.astype(np.int8)), torch.from_numpy(x.astype(np.uint8))\n'
    '        y = eo.packed_product(x, eo.packed(w), m)\n'
    '        found.append(torch.equal(y.double(), (x.double() - 64) @ w.double().t()))\n'
    'print(all(found))')


def test_a_packed_product_is_exact_under_every_onednn_cap_the_cpu_has_and_gives_a_layer_the_same_bytes():
    """oneDNN's quantized product of 7-bit unsigned parts (less their zero point) by 8-bit weights equals the
    int64 product at a layer's shapes, its operands at their largest, under each oneDNN cap the CPU has; a
    layer computed with it gives the bytes of the layer computed by ``int_mm``."""
    weight = exact_ops.ExactLinear(torch.randn(300, 2048) * 0.05, pack=True)
    if weight.packed is None:
        pytest.skip('this torch has no oneDNN quantized product: layers are computed by int_mm alone')
    environment = {k: v for k, v in os.environ.items() if k not in exact_ops.CAP_VARIABLES}
    for cap, (env, flag) in [('none', ({}, 'sse2'))] + [(c, v) for c, v in CAPS.items() if c.startswith('oneDNN')]:
        if flag in _cpu_flags():
            done = subprocess.run([sys.executable, '-c', _PACKED_CHECK], env={**environment, **env},
                                  capture_output=True, text=True, check=True)
            assert done.stdout.strip() == 'True', cap
    x = torch.randn(37, 2048) * 3
    assert torch.equal(exact_ops.linear(x, weight.weight, weight.scale, weight.packed),
                       exact_ops.linear(x, weight.weight, weight.scale))


def test_the_parts_and_bytes_of_integers_give_them_back_within_their_limits():
    q = torch.arange(-exact_ops.ACTIVATION_LIMIT, exact_ops.ACTIVATION_LIMIT + 1, dtype=torch.float32)
    high, low = exact_ops.parts(q).long()
    assert torch.equal(high * 128 + low, q.long()) and high.abs().max() <= 64 and low.abs().max() <= 64
    assert torch.equal(exact_ops.unsigned_parts(q).long() - 64, torch.stack([high, low]))
    q = torch.arange(-exact_ops.KV_LIMIT, exact_ops.KV_LIMIT + 1, dtype=torch.float32)
    high, low = exact_ops.bytes_of(q).long()
    assert torch.equal(high * 256 + low, q.long())


def test_an_exact_sum_is_the_same_bytes_in_any_order_batch_or_padding_and_close_to_fsum():
    """A row's sum alone, permuted, among other rows and with zeros appended: the same bits; within
    2**-36 of its largest term per term of math.fsum's."""
    import math
    generator = torch.Generator().manual_seed(1)
    row = torch.randn(1, 1000, generator=generator).exp()
    alone = exact_ops.exact_sum(row)
    assert torch.equal(exact_ops.exact_sum(row[:, torch.randperm(1000, generator=generator)]), alone)
    batch = torch.cat([torch.randn(5, 1000, generator=generator), row])
    assert torch.equal(exact_ops.exact_sum(batch)[-1:], alone)
    assert torch.equal(exact_ops.exact_sum(torch.nn.functional.pad(row, (0, 24))), alone)
    assert abs(float(alone) - math.fsum(row[0].double().tolist())) <= 1000 * float(row.max()) / exact_ops.SUM_UNITS
    # the log-sum-exp of the decode loop: a row alone or among others, close to torch's
    logits = torch.randn(3, 262144, generator=generator) * 4
    assert torch.equal(row_logsumexp(logits)[1:2], row_logsumexp(logits[1:2]))
    torch.testing.assert_close(row_logsumexp(logits), torch.logsumexp(logits, -1), rtol=0, atol=1e-5)


def _functions(x32: torch.Tensor, x64: torch.Tensor) -> dict:
    """The exact path's float functions on ``x32`` (float32) and ``x64`` (float64)."""
    angles = x64.abs() * 1000
    return {'exp': exact_ops.exp(-x32.abs()), 'exp64': exact_ops.exp(-x64.abs()), 'log': exact_ops.log(x64.abs()),
            'tanh': exact_ops.tanh(x32), 'gelu': exact_ops.gelu_tanh(x32), 'cos': exact_ops.cos_sin(angles)[0],
            'sin': exact_ops.cos_sin(angles)[1],
            'rms_norm': exact_ops.rms_norm(x32[:x32.shape[0] // 8 * 8].view(-1, 8), torch.ones(8), 1e-6)}


def test_the_float_functions_are_the_same_bytes_at_every_length_offset_and_thread_count_and_close_to_torchs():
    """Each function of the exact path on a slice of a tensor (every offset and many lengths: a vector's
    tail is where ATen's kernels switch to scalar code) and on one thread or two equals the whole tensor's
    values there, and is close to torch's own function in float64."""
    rng = np.random.default_rng(3)
    x32 = torch.from_numpy((rng.standard_normal(70_001) * 6).astype(np.float32))
    x64 = torch.from_numpy(rng.standard_normal(70_001) * 6)
    before = torch.get_num_threads()
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            whole = _functions(x32, x64)
            for start, length in itertools.product(range(17), [1, 2, 7, 15, 16, 17, 31, 33, 64, 1000]):
                part = _functions(x32[start:start + length].clone(), x64[start:start + length].clone())
                for name, values in part.items():
                    rows = slice(start // 8, None) if name == 'rms_norm' else slice(start, start + length)
                    if name != 'rms_norm':
                        assert torch.equal(values, whole[name][rows]), (name, threads, start, length)
    finally:
        torch.set_num_threads(before)
    d32, d64 = x32.double(), x64
    close = {'exp': torch.exp(-d32.abs()), 'exp64': torch.exp(-d64.abs()), 'log': torch.log(d64.abs()),
             'tanh': torch.tanh(d32),
             'gelu': d32 / (1 + torch.exp(-2 * (d32 + 0.044715 * d32 ** 3) * exact_ops._GELU_C)),
             'cos': torch.cos(d64.abs() * 1000), 'sin': torch.sin(d64.abs() * 1000)}
    tolerance = {'exp': (0, 2**-24), 'exp64': (0, 2**-50), 'log': (2**-48, 0), 'tanh': (2**-22, 2**-24),
                 'gelu': (2**-16, 2**-30), 'cos': (0, 2**-50), 'sin': (0, 2**-50)}
    for name, reference in close.items():
        rtol, atol = tolerance[name]
        torch.testing.assert_close(whole[name].double(), reference, rtol=rtol, atol=atol, msg=name)
    rows = x32[:70_000].view(-1, 8).double()
    torch.testing.assert_close(whole['rms_norm'].double(), rows / rows.pow(2).mean(-1, keepdim=True).add(1e-6).sqrt(),
                               rtol=2**-21, atol=0)


_FUNCTIONS_DIGEST = ('import hashlib, numpy as np, torch, sys; sys.path.insert(0, {tests!r}); import test_exact; '
                     'rng = np.random.default_rng(4); '
                     'x = torch.from_numpy((rng.standard_normal(10_007) * 6).astype(np.float32)); '
                     'y = torch.from_numpy(rng.standard_normal(10_007) * 6); '
                     'd = hashlib.sha256(); '
                     '[d.update(v.numpy().tobytes()) for v in test_exact._functions(x, y).values()]; '
                     'print(d.hexdigest())')


def test_the_float_functions_are_the_same_bytes_under_every_isa_cap_the_cpu_has():
    """The exact path's float functions under each cap of :data:`CAPS` the CPU has (MKL's code paths among
    them, where ``torch.exp`` and its neighbours change their last bits) against none."""
    def digest(env: dict) -> str:
        environment = {k: v for k, v in os.environ.items() if k not in exact_ops.CAP_VARIABLES}
        command = _FUNCTIONS_DIGEST.format(tests=str(Path(__file__).parent))
        return subprocess.run([sys.executable, '-c', command], env={**environment, **env}, capture_output=True,
                              text=True, check=True).stdout.strip()
    uncapped = digest({})
    ran = [cap for cap, (env, flag) in CAPS.items() if flag in _cpu_flags() and digest(env) == uncapped]
    assert ran == [cap for cap, (_, flag) in CAPS.items() if flag in _cpu_flags()]


#: Float products: what the exact path must not compute on float operands (float64 ones only of integers).
PRODUCTS = {'mm', 'bmm', 'addmm', 'baddbmm', 'matmul', 'linear', 'dot', 'einsum', 'mv', 'addmv',
            '_scaled_dot_product_flash_attention_for_cpu', 'scaled_dot_product_attention', 'convolution'}
#: Quantized products (oneDNN's): integer operands, exact while every scale is 1 (the integers themselves).
QUANTIZED = {'qlinear_pointwise'}
#: Float reductions whose order varies with the kernel: the exact path sums only integers.
REDUCTIONS = {'sum', 'mean', 'cumsum', 'prod', '_softmax', '_log_softmax', 'logsumexp', 'var', 'std',
              'norm', 'linalg_vector_norm'}


#: Float functions whose last bits depend on the CPU: those ATen hands to MKL's vector functions (whose code
#: path MKL picks by the CPU) and those it computes in scalar code in a tensor's tail (``exp2``, ``sigmoid``).
CPU_FUNCTIONS = {'exp', 'log', 'log2', 'log10', 'tanh', 'sqrt', 'cos', 'sin', 'tan', 'acos', 'asin', 'atan', 'erf',
                 'erfc', 'erfinv', 'exp2', 'sigmoid', 'gelu', 'silu', 'softplus', 'pow'}


def _exact_float32_product(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a @ b`` is a float32 product of integers whose every partial sum is below 2**24 in magnitude
    (:func:`~pyterrier_utility.backends.hf.exact_ops.int_mm`'s float products), exact in any order."""
    if a.dtype != torch.float32 or b.dtype != torch.float32 or a.numel() == 0 or b.numel() == 0:
        return False
    whole = all(bool(torch.isfinite(t).all()) and bool((t == t.round()).all()) for t in (a, b))
    return whole and float(a.abs().max()) * float(b.abs().max()) * a.shape[-1] <= 2**24


class _FloatArithmetic(TorchDispatchMode):
    """Records each float product and float reduction whose operands are not integers below 2**53 (whose
    sums are then exact in any order), and each call of a float function of :data:`CPU_FUNCTIONS`."""

    def __init__(self):
        super().__init__()
        self.found = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name.rstrip('_') in CPU_FUNCTIONS and any(isinstance(a, torch.Tensor) and a.is_floating_point()
                                                     for a in args):
            self.found.append((name, 'a function computed by the CPU\'s own code', ()))
        if name in QUANTIZED:
            x, x_scale, w_scale = args[0], args[1], args[4]
            if x.is_floating_point() or x_scale != 1 or not bool((w_scale == 1).all()):
                self.found.append((name, x.dtype, (x_scale, float(w_scale.abs().max()))))
        if name == 'mm' and _exact_float32_product(args[0], args[1]):
            return func(*args, **(kwargs or {}))
        if name in PRODUCTS | REDUCTIONS:
            for tensor in (a for a in args if isinstance(a, torch.Tensor)):
                if not tensor.is_floating_point():
                    continue
                whole = tensor.dtype == torch.float64 and bool(torch.isfinite(tensor).all()) and bool(
                    (tensor == tensor.round()).all()) and float(tensor.abs().max(), ) < 2**40
                if not whole:
                    self.found.append((name, tensor.dtype, tuple(tensor.shape)))
        return func(*args, **(kwargs or {}))


@pytest.mark.slow
def test_no_product_or_sum_of_the_exact_path_is_computed_on_floats(gemma_exact):
    """Prefill in chunks, a cached prefix, decode steps of several prompts' rows and the sampler: every
    product's operands are integers (int8, or float64 holding integers, whose products and sums are exact),
    every sum is of integers, and no float function is one whose bytes depend on the CPU."""
    gemma_exact.prefixes.clear()
    with _FloatArithmetic() as watch:
        answers = gemma_exact.generate([p for p in PROMPTS for _ in SEEDS], seeds=list(SEEDS) * len(PROMPTS))
    assert all(a.tokens > 1 for a in answers)
    assert watch.found == []
    # The watch itself: a float product, a float32 product of integers past 2**24, a float sum, MKL's exponential
    # and a scaled quantized product are seen; a float32 product of int8s is not.
    with _FloatArithmetic() as watch:
        torch.full((2, 3), 0.5) @ torch.ones(3, 2)
        torch.full((2, 1025), 128.0) @ torch.full((1025, 2), 128.0)
        exact_ops.int_mm(torch.full((2, 1024), -128, dtype=torch.int8), torch.full((1024, 2), -128, dtype=torch.int8),
                         True)
        torch.ones(4).sum()
        torch.ones(4).exp_()
        if exact_ops.packable(torch.ones(2, 3, dtype=torch.int8)):
            weight = exact_ops.packed(torch.ones(2, 3, dtype=torch.int8))
            torch.ops.onednn.qlinear_pointwise(torch.ones(2, 3, dtype=torch.uint8), 0.5, 64, weight, torch.ones(2),
                                               torch.zeros(2, dtype=torch.int64), None, 1.0, 0, torch.float32,
                                               'none', [], '')
    assert {shape for name, _, shape in watch.found if name == 'mm'} == {(2, 3), (3, 2), (2, 1025), (1025, 2)}
    assert {name for name, _, _ in watch.found} == {'mm', 'sum', 'exp_'} | (
        {'qlinear_pointwise'} if exact_ops.packable(torch.ones(2, 3, dtype=torch.int8)) else set())


def _answers(outputs):
    return [(o.text, o.token_logprobs, o.truncated) for o in outputs]


@pytest.mark.slow
def test_an_exact_answer_is_the_same_alone_in_any_batch_sample_count_order_cache_or_threads(gemma_exact):
    """Each (prompt, seed) alone; every prompt and seed in one batch; 1 sample against 3; reversed in
    batches of 2 with no prefix cache; on another number of threads: the same bytes every time."""
    backend = gemma_exact
    alone = {}
    for prompt, seed in itertools.product(PROMPTS, SEEDS):
        backend.prefixes.clear()
        alone[prompt, seed] = _answers(backend.generate([prompt], seeds=[seed]))[0]
    pairs = [(p, s) for s in SEEDS for p in PROMPTS]
    assert _answers(backend.generate([p for p, _ in pairs], seeds=[s for _, s in pairs])) == [alone[x] for x in pairs]
    small = copy.copy(backend)
    small.batch_size, small.prefixes = 2, type(backend.prefixes)(0)
    assert _answers(small.generate([p for p, _ in pairs[::-1]], seeds=[s for _, s in pairs[::-1]])) == \
        [alone[x] for x in pairs[::-1]]
    assert len({text for text, _, _ in alone.values()}) > len(PROMPTS)  # the samples differ: a change is seen
    before = torch.get_num_threads()
    torch.set_num_threads(1 if before > 1 else 2)
    try:
        assert _answers(backend.generate([PROMPTS[1]] * 3, seeds=list(SEEDS))) == [alone[PROMPTS[1], s] for s in SEEDS]
    finally:
        torch.set_num_threads(before)
    assert backend.batching.startswith('batch-invariant by construction') and 'every CPU' in backend.reproducibility


@pytest.mark.slow
def test_exact_logits_are_close_to_the_float_models_and_chunks_change_no_bit(gemma, gemma_exact):
    """The exact model's next-token log-probabilities are those of the float model it was made from, to
    integer rounding; a prompt prefilled whole or in two chunks gives the same bytes."""
    ids = torch.tensor([gemma.tokenizer(PROMPTS[1]).input_ids])
    with torch.no_grad():
        reference = torch.log_softmax(gemma.model(ids).logits[0].float(), -1)
        whole = gemma_exact.model(ids).logits[0]
        cache = gemma_exact.model.get_decoder()(ids[:, :20]).past_key_values
        chunked = gemma_exact.model(ids[:, 20:], past_key_values=cache).logits[0]
    assert torch.equal(chunked, whole[20:])
    exact = torch.log_softmax(whole, -1)
    kl = (reference.exp() * (reference - exact)).sum(-1).mean()
    assert float(kl) < 0.05
    assert float((reference.argmax(-1) == exact.argmax(-1)).float().mean()) > 0.9


def test_a_decode_batch_keeps_each_prompts_keys_once():
    from pyterrier_utility.backends.hf.exact import ExactCache
    caches = [ExactCache(2), ExactCache(2)]
    for cache, length in zip(caches, (3, 5)):
        cache.length = length
    batch = ExactBatch(caches, [3, 1], room=4, kv=1, dim=8)
    assert batch.runs() == [(0, 3, 0), (3, 4, 1)] and batch.lengths.tolist() == [3, 5]
    batch.batch_select_indices(torch.tensor([1, 3]))
    assert batch.runs() == [(0, 1, 0), (1, 2, 1)] and batch.layers[0].keys.shape[0] == 2


def _cpu_flags() -> set:
    try:
        return set(re.findall(r'\w+', Path('/proc/cpuinfo').read_text().split('flags', 1)[1].split('\n', 1)[0]))
    except (OSError, IndexError):
        return set()


CAPS = exact_ops.ISA_CAPS



#: The sha256 of the small study's answers.csv and token_logprobs.csv (:func:`_run_under`), recorded on a
#: 2-core Intel Xeon with AMX (the same under every cap of :data:`CAPS` there). The claim is the same bytes on
#: every CPU, so every other machine's study is checked against these.
RECORDED = '346b345f998c048bf77230ed3d4521e9393471b024c2d61c5a75240fa3947fce'


def _run_under(env: dict, out: Path) -> tuple:
    """The ISA oneDNN and ATen report under ``env`` (and no other cap), and the digest of a small study's
    answers and token log-probabilities run under it."""
    environment = {**os.environ, **env}
    for name in exact_ops.CAP_VARIABLES:
        if name not in env:
            environment.pop(name, None)
    probe = subprocess.run([sys.executable, '-c', exact_ops.ISA_PROBE], env={**environment, 'ONEDNN_VERBOSE': '1',
                                                                    'MKL_VERBOSE': '1'},
                           capture_output=True, text=True, check=True).stdout
    mkl = re.search(r'64 architecture (.*?)(?:, Lnx|, Win|$)', probe, re.M)
    isa = (re.search(r'isa:([^\n]*)', probe).group(1), re.search(r'aten:(\w+)', probe).group(1),  # type: ignore
           mkl.group(1) if mkl else '')
    study = ['study', '--dtype', 'exact', '--queries', '1', '-k', '1', '--systems', 'Rel', '--no-reverse',
             '--samples', '2', '--max-new-tokens', '16', '--out', str(out)]
    command = f'from pyterrier_utility import cli; raise SystemExit(cli.main({study!r}))'
    done = subprocess.run([sys.executable, '-c', command], env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    digest = hashlib.sha256()
    for name in ('answers.csv', 'token_logprobs.csv'):
        digest.update((out / name).read_bytes())
    return isa, digest.hexdigest(), (out / 'answers.csv').read_text()


@pytest.fixture(scope='module')
def uncapped(tmp_path_factory):
    return _run_under({}, tmp_path_factory.mktemp('uncapped'))


@pytest.mark.slow
def test_a_study_gives_the_bytes_recorded_on_another_cpu(uncapped):
    """The small study's answers and log-probabilities here are byte for byte those recorded on an Intel
    Xeon with AMX: an AMD EPYC, or any other CPU, gives the same."""
    assert uncapped[1] == RECORDED, (uncapped[0], uncapped[2])


#: What MKL's banner names for the code path each MKL cap sets.
_MKL_PATHS = {'MKL AVX2': '(Intel(R) AVX2)', 'MKL SSE4_2': '(Intel(R) SSE4.2)',
              'MKL compatible': 'Intel(R) Architecture processors'}


def _own(cap: str, isa: tuple) -> bool:
    """Whether ``cap`` is what this CPU runs with no cap (its run would be the uncapped run again)."""
    onednn_avx2, aten_avx2 = isa[0] == 'Intel AVX2', isa[1] == 'AVX2'  # a CPU with AVX2 alone
    return (cap == 'ATen avx512' and isa[1] == 'AVX512'
            or cap == 'ATen avx2' and aten_avx2 or cap == 'oneDNN AVX2' and onednn_avx2
            or cap == 'oneDNN AVX2, ATen avx2' and onednn_avx2 and aten_avx2
            or cap == 'oneDNN AVX512_CORE_BF16' and 'amx_int8' not in _cpu_flags()
            or cap in _MKL_PATHS and _MKL_PATHS[cap] in isa[2])


@pytest.mark.slow
@pytest.mark.parametrize('cap', list(CAPS))
def test_a_study_gives_the_same_bytes_under_every_isa_cap_the_cpu_has(cap, uncapped, tmp_path):
    """A small study (its answers.csv and token_logprobs.csv) under each cap the CPU supports, against the
    study with none: the cap is in effect (oneDNN, ATen or MKL reports another ISA) and the bytes are the same. A
    cap the CPU lacks, or that is the CPU's own best (the uncapped study), is skipped saying so."""
    env, flag = CAPS[cap]
    if flag not in _cpu_flags():
        pytest.skip(f'this CPU lacks {flag}: the {cap} cap cannot be run here')
    if cap in _MKL_PATHS and not uncapped[0][2]:
        pytest.skip(f'this torch calls no MKL (it names no code path): the {cap} cap changes nothing here')
    if cap in _MKL_PATHS and _MKL_PATHS['MKL compatible'] in uncapped[0][2]:
        pytest.skip(f'MKL takes its generic code path on this CPU with no cap ({uncapped[0][2]}), as it does on '
                    f'CPUs not made by Intel: the {cap} cap cannot lower it')
    if _own(cap, uncapped[0]):
        pytest.skip(f'{cap} is what this CPU runs uncapped ({uncapped[0]}): the uncapped study is its study')
    isa, digest, answers = _run_under(env, tmp_path)
    assert isa != uncapped[0], isa
    assert digest == uncapped[1], (cap, answers, uncapped[2])
