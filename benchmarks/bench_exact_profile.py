"""Where the exact reader's time goes: prefill and decode, each split into its kernels, on one torch thread
(a replica's), by ``torch.profiler``.

The exact reader's work runs in TorchScript (:mod:`pyterrier_utility.backends.hf.exact_kernels`), which a
sampling profiler of Python does not see into (``bench_profile.py``); ``torch.profiler`` records each compiled
function as an operation of its own: a layer's work before attention (``before``: its norm, the query, key
and value layer, their norms and rotary embeddings), attention (``attend_chunk`` in a prefill, ``attend_step``
in a decode step), a layer's work after it (``after``: the output layer of attention, the feed-forward
layers, their norms), the tied output layer (``linear``) and the final norm (``rms_norm``); the integer
products (``aten::_int_mm``, ``onednn::qlinear_pointwise``, and ``aten::mm`` where ``int_mm`` computes float32
products of integers) inside all of them are counted apart too.

The prompts are the study's (Cranfield's first ``--queries`` answerable queries, BM25's top k for each
``-k``, and the 0-shot prompt), answered with the offline decoding (one sample each). First, untimed, two of them warm
the kernels. Then the next ``--prompts`` are timed without the profiler: prefill (their chunks, the prefix
cache as the study keeps it) and decode (one batch of all of them), with their tokens. Then ``--profiled`` of
them again, their prefix cache cleared, each phase under the profiler on its own: the share of each kernel.

Usage: python benchmarks/bench_exact_profile.py [--queries 3] [-k 1 3 5] [--prompts 10] [--profiled 3]
"""
import argparse
import os
import sys
import time
from pathlib import Path
from typing import Dict, List

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_main_job import cpu_name  # noqa: E402

#: The compiled functions reported, for each phase, in the order printed.
KERNELS = {'prefill': ('before', 'attend_chunk', 'after', 'linear', 'rms_norm'),
           'decode': ('before', 'attend_step', 'after', 'linear', 'rms_norm')}
#: The integer products: ``torch._int_mm``, oneDNN's quantized linear layer (the layers' packed weights) and
#: ``aten::mm``, which the exact path calls only for float32 products of integers (``exact_ops.int_mm`` on a CPU
#: with no int8 GEMM kernels).
PRODUCTS = ('aten::_int_mm', 'onednn::qlinear_pointwise', 'aten::mm')
NAMES = {'before': 'layers before attention', 'attend_chunk': 'attention', 'attend_step': 'attention',
         'after': 'layers after attention', 'linear': 'tied output layer', 'rms_norm': 'final norm'}


def study_prompts(queries: int, ks: List[int]) -> List[str]:
    """The study's 0-shot prompts and BM25's k-shot prompts for the first ``queries`` answerable queries."""
    import pyterrier_utility as pu
    from pyterrier_utility.study import default_systems
    d = pu.datasets.cranfield()
    qrels = d.get_qrels()
    topics = pu.datasets.answerable_topics(d.get_topics(), qrels, 2).head(queries)
    prompter = pu.Reader(pu.backends.gemma3_270m()).prompter
    prompts = [prompter.build_prompt(q) for q in topics['query']]
    ranking = default_systems(d, qrels, depth=100)['BM25'](topics).sort_values(['qid', 'rank'])
    for k in ks:
        prompts += list(prompter.prompts(ranking[ranking['rank'] < k]).values())
    return list(dict.fromkeys(prompts))


def prefills(backend, prompts: List[str]) -> list:
    """Each prompt's prefill, as :meth:`CausalLMBackend._answer` makes them (one row each: greedy)."""
    done = []
    for prompt in prompts:
        ids, ends = backend._tokenize(prompt)
        cache, logits = backend._prefill(ids, ends)
        done.append((ids, cache, logits, 1))
    return done


def decoded(backend, done: list, seeds: List[int]) -> int:
    """The tokens decoded from ``done`` in one batch."""
    from pyterrier_utility.backends.hf.loop import decode
    state = backend._merge(done, backend.decoding.max_new_tokens)
    tokens = decode(backend.model, backend.tokenizer, backend.eos_token_ids, backend.decoding, seeds, state,
                    backend.decoding.max_new_tokens, list(backend.decoding.stop))[0]
    return sum(map(len, tokens))


def shares(profile, phase: str) -> Dict[str, float]:
    """Each kernel's CPU time (ms) in ``profile``, the integer products' and the whole phase's."""
    totals = {e.key: e.cpu_time_total / 1e3 for e in profile.key_averages()}
    found = {name: totals.get(name, 0.0) for name in KERNELS[phase]}
    found['integer products (in all of them)'] = sum(t for key, t in totals.items() if key in PRODUCTS)
    found['total'] = totals.get(phase.upper(), 0.0)
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=3)
    parser.add_argument('-k', type=int, nargs='+', default=[1, 3, 5])
    parser.add_argument('--prompts', type=int, default=10)
    parser.add_argument('--profiled', type=int, default=3, help='prompts profiled (a profile of many is large)')
    args = parser.parse_args()
    import pyterrier_utility as pu
    torch.set_num_threads(1)
    prompts = study_prompts(args.queries, args.k)
    if len(prompts) < 2 + args.prompts:
        raise SystemExit(f'{len(prompts)} prompts: fewer than 2 to warm and --prompts {args.prompts}')
    backend = pu.backends.gemma3_270m(dtype='exact')
    print(f'CPU: {cpu_name()}; load average {os.getloadavg()[0]:.2f} at the start; torch {torch.__version__} '
          f'({torch.backends.cpu.get_cpu_capability()}), 1 torch thread; {backend!r}')
    decoded(backend, prefills(backend, prompts[:2]), [0, 0])
    timed = prompts[2:2 + args.prompts]
    before = backend.prefilled_tokens
    start = time.perf_counter()
    done = prefills(backend, timed)
    prefill_s, prefill_tokens = time.perf_counter() - start, backend.prefilled_tokens - before
    start = time.perf_counter()
    tokens = decoded(backend, done, [0] * len(timed))
    decode_s = time.perf_counter() - start
    del done
    print(f'{len(timed)} prompts, timed: prefill {prefill_s:.2f} s for {prefill_tokens} tokens '
          f'({1e3 * prefill_s / prefill_tokens:.2f} ms a token); decode {decode_s:.2f} s for {tokens} tokens in one '
          f'batch ({1e3 * decode_s / tokens:.1f} ms a token, {tokens / decode_s:.1f} tokens/s)')
    profiled = timed[:args.profiled]
    backend.prefixes.clear()
    with torch.profiler.profile() as prefill_profile, torch.profiler.record_function('PREFILL'):
        done = prefills(backend, profiled)
    with torch.profiler.profile() as decode_profile, torch.profiler.record_function('DECODE'):
        decoded(backend, done, [0] * len(profiled))
    found = {'prefill': shares(prefill_profile, 'prefill'), 'decode': shares(decode_profile, 'decode')}
    print(f'\n{len(profiled)} of them profiled, CPU time of each kernel:\n')
    print('| phase | kernel | ms | share |')
    print('|---|---|---:|---:|')
    for phase, times in found.items():
        total = times.pop('total')
        kernels = sum(t for name, t in times.items() if name in KERNELS[phase])
        for name, t in times.items():
            print(f'| {phase} | {NAMES.get(name, name)} | {t:.0f} | {100 * t / total:.1f}% |')
        rest = 'the prefix cache, tokens, logits' if phase == 'prefill' else 'sampler, penalty, batch upkeep, Python'
        print(f'| {phase} | the rest ({rest}) | {total - kernels:.0f} | {100 * (total - kernels) / total:.1f}% |')
        print(f'| {phase} | **total** | {total:.0f} | 100% |')


if __name__ == '__main__':
    main()
