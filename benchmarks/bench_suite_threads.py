"""Two processes generating at once, as ``make test``'s two pytest-xdist workers do: each with torch on
every core, against each on its share of the cores (what tests/conftest.py gives a worker).

Each process loads the offline reader (Gemma 3 270M, the study's defaults but ``max_new_tokens``) and
answers the same prompts; the time is the wall clock of the two together, model loading included. With
every core each, the two processes' OpenMP threads wait at each product's barrier for threads the
other process holds. Printed: each setting's time, and the ratio of every-core to the share.

Usage: python benchmarks/bench_suite_threads.py [--prompts 8] [--max-new-tokens 24] [--processes 2]
"""
import argparse
import os
import subprocess
import sys
import time

WORK = '''
import sys
import torch
from pyterrier_utility import backends
prompts, tokens = int(sys.argv[1]), int(sys.argv[2])
backend = backends.gemma3_270m(max_new_tokens=tokens)
questions = ['what is lift?', 'how is heat conducted in composite slabs?', 'what is a sigmet?',
             'what limits the speed of sound in a gas?']
batch = [f'Question: {questions[i % len(questions)]} ({i})\\nAnswer:' for i in range(prompts)]
backend.generate(batch, seeds=list(range(prompts)))
print(torch.get_num_threads())
'''


def together(processes: int, threads: int, prompts: int, tokens: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    start = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, '-c', WORK, str(prompts), str(tokens)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for _ in range(processes)]
    outs = [p.communicate()[0].strip() for p in procs]
    elapsed = time.perf_counter() - start
    if any(p.returncode for p in procs) or outs != [str(threads)] * processes:
        raise SystemExit(f'a process failed or ran another number of threads: {outs}')
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--prompts', type=int, default=8)
    parser.add_argument('--max-new-tokens', type=int, default=24)
    parser.add_argument('--processes', type=int, default=2)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    share = max(1, cores // args.processes)
    print(f'{args.processes} processes at once on {cores} cores, {args.prompts} prompts of '
          f'{args.max_new_tokens} new tokens each')
    every = together(args.processes, cores, args.prompts, args.max_new_tokens)
    print(f'  {cores} threads each (every core): {every:.1f} s')
    shared = together(args.processes, share, args.prompts, args.max_new_tokens)
    print(f'  {share} thread(s) each (its share):  {shared:.1f} s')
    print(f'  ratio every core / share: {every / shared:.2f}')


if __name__ == '__main__':
    main()
