"""The main job (``pyterrier-utility study`` with its defaults) against the generation grid, in one run.

Prepares first, untimed: the offline reader converted, Cranfield's PISA index built, the grid's prompts made.
Then, in this process, one after the other:

1. the reference: ``bench_generation.py``'s grid (``--grid-queries`` Cranfield queries x k = 1 ..
   ``--grid-k-max`` x 6 systems + 0-shot, 5 samples, at most 32 new tokens, repetition penalty 1.2
   over the whole sequence) through the project's path (``Reader`` over ``GenerationCache(
   CausalLMBackend)``);
2. the main job: ``pyterrier-utility study --out <a fresh folder>`` with its defaults (``--queries N``
   for a smaller slice; other study options after ``--``): its wall time, its generation time (inside
   the reader's ``generate``), the answers it generated and answers per second; run twice, into fresh
   folders, with the reader's batch invariance off (padded batches, ``CausalLMBackend(invariant=False)``)
   and on (the default), and the ratio of the two;
3. the reference again, so that a change in the machine's load between the two shows.

For both, what an answer costs in work, whatever the machine's load: prompt tokens asked and
prefilled (prefix reuse), tokens generated, decode steps and the rows each carries, the share of the
attention context that is left padding. A smaller slice's times are scaled to the main job's 20
queries as an estimate; the process's peak resident memory is printed last.

Usage: python benchmarks/bench_main_job.py [--queries 20] [--grid-queries 1] [--grid-k-max 10] [-- study options]
"""
import argparse
import os
import resource
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import List

import torch
from bench_generation import grid_prompts

#: What a newcomer's first run should take, models prepared (seconds).
TARGET_S = 600
#: The main job's queries at its defaults (a smaller slice is scaled to them).
FULL_QUERIES = 20


@dataclass
class Work:
    """What the reader did while a :func:`counted` block ran."""
    seconds: float = 0.0
    answers: int = 0
    prompt_tokens: int = 0
    prefilled: int = 0
    generated: int = 0
    steps: int = 0
    row_steps: int = 0
    context: int = 0
    padding: int = 0
    #: (backend, its counters when first seen, the hook on its decoder)
    seen: List[tuple] = field(default_factory=list)

    def line(self, name: str) -> str:
        n = max(self.answers, 1)
        return (f'{name}: {self.answers} answers in {self.seconds:.1f} s ({self.answers / self.seconds:.2f} answers/s, '
                f'{self.seconds / n:.3f} s an answer); per answer: {self.prompt_tokens / n:.0f} prompt tokens asked, '
                f'{self.prefilled / n:.1f} prefilled, {self.generated / n:.1f} generated, '
                f'{self.steps / n:.2f} decode steps of {self.row_steps / max(self.steps, 1):.1f} rows; '
                f'padding {self.padding / max(self.context, 1):.0%} of the attention context')


@contextmanager
def counted():
    """Counts the work of every ``CausalLMBackend`` answering inside the block (a wrapper around its
    ``generate`` and a forward hook on its model's decoder, attached on first use)."""
    from pyterrier_utility.backends.hf.backend import CausalLMBackend
    work = Work()
    generate = CausalLMBackend.generate

    def wrapped(backend, inps, **kwargs):
        if all(backend is not b for b, _, _ in work.seen):
            work.seen.append((backend, (backend.prompt_tokens, backend.prefilled_tokens, backend.generated_tokens),
                              backend.model.get_decoder().register_forward_pre_hook(on_decoder, with_kwargs=True)))
        start = time.perf_counter()
        outs = generate(backend, inps, **kwargs)
        work.seconds += time.perf_counter() - start
        work.answers += len(inps)
        return outs

    def on_decoder(module, args, kwargs):
        mask = kwargs.get('attention_mask')
        if mask is not None and kwargs['input_ids'].shape[1] == 1:  # a decode step
            work.steps += 1
            work.row_steps += mask.shape[0]
            work.context += mask.numel()
            work.padding += mask.numel() - int(mask.sum())

    CausalLMBackend.generate = wrapped
    try:
        yield work
    finally:
        CausalLMBackend.generate = generate
        for backend, (asked, prefilled, generated), hook in work.seen:
            hook.remove()
            work.prompt_tokens += backend.prompt_tokens - asked
            work.prefilled += backend.prefilled_tokens - prefilled
            work.generated += backend.generated_tokens - generated


def grid(prompts) -> Work:
    """The grid answered by the project's path, with a fresh backend (nothing cached)."""
    import pyterrier_utility as pu
    backend = pu.backends.gemma3_270m(temperature=0.3, top_k=50, max_new_tokens=32, repetition_penalty=1.2)
    reader = pu.Reader(pu.GenerationCache(backend), n_samples=5, stop=list(pu.reader.BASE_MODEL_STOP))
    with counted() as work:
        reader.answer(prompts)
    return work


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=20, help="the main job's queries (its default: 20)")
    parser.add_argument('--grid-queries', type=int, default=1, help='0: no grid (the two main jobs alone)')
    parser.add_argument('--grid-k-max', type=int, default=10)
    parser.add_argument('--out', help="a folder to keep the main jobs' study folders in (default: the system's "
                        'temporary folder); each run gets a fresh one')
    parser.add_argument('study', nargs='*', help='further options of the study command (after --)')
    args = parser.parse_args()

    import pyterrier_utility as pu
    print(f'CPU: {cpu_name()}; {torch.get_num_threads()} torch threads')
    pu.backends.gemma3_270m_path()
    pu.datasets.cranfield().bm25(num_results=1)
    prompts = grid_prompts(args.grid_queries, range(1, args.grid_k_max + 1), 20) if args.grid_queries else []
    if prompts:
        print(f'grid: {args.grid_queries} queries x k=1..{args.grid_k_max} x 6 systems + 0-shot = {len(prompts)} '
              'prompts x 5 samples, <= 32 new tokens')
        before = grid(prompts)
        print(before.line('grid (before)'), flush=True)
    runs = {}
    for invariant in (False, True):
        runs[invariant] = main_job(args, invariant)
    job, wall = runs[True]
    (off, off_wall), name = runs[False], 'batch invariance'
    print(f'{name}: the main job took {wall:.1f} s with it and {off_wall:.1f} s without it ({wall / off_wall:.3f}x); '
          f'its generation {job.seconds:.1f} s against {off.seconds:.1f} s ({job.seconds / off.seconds:.3f}x)')
    if not prompts:
        return
    after = grid(prompts)
    print(after.line('grid (after)'))
    reference = (before.answers + after.answers) / (before.seconds + after.seconds)
    rate = job.answers / job.seconds
    print(f'main job: wall {wall:.1f} s ({wall / TARGET_S:.2f} of the {TARGET_S} s target), generation '
          f'{job.seconds:.1f} s ({job.seconds / wall:.0%} of it), {rate:.2f} answers/s against the grid\'s '
          f'{reference:.2f} (an answer of the main job costs {reference / rate:.2f}x one of the grid)')
    print(f'peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB')
    if args.queries != FULL_QUERIES:
        scale = FULL_QUERIES / args.queries
        print(f'the full main job ({FULL_QUERIES} queries, about {job.answers * scale:.0f} answers) at this rate: '
              f'generation about {job.seconds * scale:.0f} s, wall about {wall * scale:.0f} s')


def main_job(args, invariant: bool):
    """The main job into a fresh folder, its reader batch-invariant or not: its work and wall time."""
    from pyterrier_utility import cli
    from pyterrier_utility.backends.hf.backend import CausalLMBackend
    defaults = CausalLMBackend.__init__.__kwdefaults__
    kept = defaults['invariant']
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    out = tempfile.mkdtemp(prefix='pu-main-job-', dir=args.out)
    command = ['study', '--out', out, '--queries', str(args.queries), *args.study]
    label = f'main job ({"batch-invariant" if invariant else "padded batches"})'
    print(f'{label}: pyterrier-utility', ' '.join(command), flush=True)
    defaults['invariant'] = invariant
    start = time.perf_counter()
    try:
        with counted() as job:
            if cli.main(command):
                raise SystemExit('the main job failed')
    finally:
        defaults['invariant'] = kept
    wall = time.perf_counter() - start
    print(job.line(f'{label} generation'), flush=True)
    print(f'{label}: wall {wall:.1f} s', flush=True)
    return job, wall


def cpu_name() -> str:
    """The CPU's model name and its bf16 matrix instructions, from ``/proc/cpuinfo``."""
    try:
        info = open('/proc/cpuinfo').read().splitlines()
    except OSError:
        return 'unknown'
    name = next((line.split(':', 1)[1].strip() for line in info if line.startswith('model name')), 'unknown')
    flags = next((line.split(':', 1)[1].split() for line in info if line.startswith('flags')), [])
    return f'{name} ({", ".join(f for f in ("amx_bf16", "avx512_bf16", "avx512f") if f in flags) or "no bf16"})'


if __name__ == '__main__':
    main()
