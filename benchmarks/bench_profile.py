"""Where the generation grid's time goes: a py-spy sampling profile, folded into the study's phases.

Runs the project's path over the grid of ``bench_generation.py`` (``--queries`` Cranfield queries x
k = 1..10 x 6 systems + 0-shot, 5 samples, Gemma 3 270M) under ``py-spy record`` and reports the
share of the answering time (the samples inside ``CausalLMBackend.generate``) spent in:

- prefill (forward passes over prompt chunks, prefix-cache lookups and copies, tokenizing);
- decode matmuls (``Linear`` in the decode step's forward, the output layer included, as ``linear``
  or ``w @ x.T``);
- decode attention (scaled dot-product attention in the decode step);
- the KV cache's upkeep (appending tokens, dropping finished rows, merging prompts into a batch);
- sampling (top-k candidates and the Gumbel draw);
- the rest of the decode loop (norms, activations, log-probabilities, stop checks, Python).

Needs py-spy (``pip install py-spy``); run as root or where ptrace is allowed.
Usage: python benchmarks/bench_profile.py [--queries 1] [--rate 50]
"""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: (phase, a frame that puts a sample in it), first match from the leaf's side wins.
PHASES = [
    ('sampling', '_SeededSampling.'),
    ('prefill', 'CausalLMBackend._prefill'),
    ('KV cache upkeep', 'batch_select_indices'),
    ('KV cache upkeep', '_merge'),
    ('KV cache upkeep', '_buffered'),
    ('KV cache upkeep', 'Cache.update'),
    ('decode attention', 'sdpa_attention_forward'),
    ('decode matmuls', 'Linear.forward'),  # torch's Linear and this project's _WeightMajorLinear
]

RUN = '''
import sys, time
sys.path.insert(0, {here!r})
from bench_generation import grid_prompts
import pyterrier_utility as pu
prompts = grid_prompts({queries}, range(1, 11), 20)
backend = pu.backends.gemma3_270m(temperature=0.3, top_k=50, max_new_tokens=32, repetition_penalty=1.2)
reader = pu.Reader(pu.GenerationCache(backend), n_samples=5, stop=list(pu.reader.BASE_MODEL_STOP))
start = time.perf_counter()
reader.answer(prompts)
print(f'{{len(prompts)}} prompts x 5 samples answered in {{time.perf_counter() - start:.1f}} s')
'''


def phase_of(frames):
    for phase, marker in PHASES:
        if any(marker in f for f in frames):
            return phase
    return 'rest of the decode loop'


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=1)
    parser.add_argument('--rate', type=int, default=50, help='samples per second')
    args = parser.parse_args()
    spy = shutil.which('py-spy') or shutil.which('py-spy', path=str(Path(sys.executable).parent))
    if spy is None:
        sys.exit('bench_profile.py needs py-spy: pip install py-spy')
    with tempfile.TemporaryDirectory() as tmp:
        script, raw = Path(tmp) / 'grid.py', Path(tmp) / 'profile.txt'
        script.write_text(RUN.format(here=str(HERE), queries=args.queries))
        subprocess.run([spy, 'record', '-r', str(args.rate), '-f', 'raw', '-o', str(raw), '--',
                        sys.executable, str(script)], check=True, env=dict(os.environ))
        counts, total = collections.Counter(), 0
        for line in raw.read_text().splitlines():
            stack, n = line.rsplit(' ', 1)
            frames = stack.split(';')
            if not any('CausalLMBackend.generate' in f for f in frames):
                continue
            counts[phase_of(frames)] += int(n)
            total += int(n)
    print(f'\n{total / args.rate:.1f} s of samples inside CausalLMBackend.generate')
    print('| phase | share |\n|---|---:|')
    for phase, n in counts.most_common():
        print(f'| {phase} | {100 * n / total:.1f}% |')


if __name__ == '__main__':
    main()
