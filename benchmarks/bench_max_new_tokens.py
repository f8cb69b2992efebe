"""The main job at several ``--max-new-tokens``: the share of answers cut at the limit and the time.

Runs ``pyterrier-utility study`` (its defaults, plus any options given) once per length, each in a
fresh output folder (its own generation cache, so every answer is generated), and prints a Markdown
table: answers cut (``answers.csv``'s ``truncated``), all answers and the k-shot ones that FBERT
scores against U, the generation phase's time as the study prints it, the wall time, the study's CPU
time, and the machine's 1-minute load average sampled during the run (the machine may be shared).

Usage: python benchmarks/bench_max_new_tokens.py [--lengths 32 48 64 96] [extra study options, e.g. --queries 5]
"""
import argparse
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pandas as pd

from pyterrier_utility.vocabulary import ZERO_SHOT


def load_average() -> float:
    return float(Path('/proc/loadavg').read_text().split()[0])


def _children_cpu() -> float:
    """CPU seconds (user and system) of the finished child processes: the study's own work, which
    other processes on a shared machine stretch less than its wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def study(options: list, prefix: str) -> dict:
    """One ``pyterrier-utility study`` with ``options`` in a fresh folder: the generation phase's time
    as the study prints it, the wall and CPU times, the load seen while it ran, the folder and the
    study's output."""
    out = tempfile.mkdtemp(prefix=prefix)
    command = [sys.executable, '-m', 'pyterrier_utility.cli', 'study', '--out', out] + options
    print('running:', ' '.join(command), flush=True)
    loads, done = [], threading.Event()

    def sample():
        while not done.wait(10):
            loads.append(load_average())
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start, cpu = time.perf_counter(), _children_cpu()
    finished = subprocess.run(command, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall, cpu = time.perf_counter() - start, _children_cpu() - cpu
    done.set()
    sampler.join()
    print(finished.stdout[-3000:], flush=True)
    # The study's phase line: "generation: 5 samples per prompt, 785 generated (137.4 s)".
    phase = re.search(r'generation: .*?, (\d+) generated \(([\d.]+) s\)', finished.stdout)
    return {'generated': int(phase.group(1)), 'generation': float(phase.group(2)), 'wall': wall, 'cpu': cpu,
            'load': f'{sum(loads) / max(len(loads), 1):.1f} [{min(loads, default=0):.1f}, {max(loads, default=0):.1f}]',
            'folder': out, 'stdout': finished.stdout}


def run(length: int, extra: list) -> dict:
    """One study at ``length`` new tokens; its cut share, times and the load seen while it ran."""
    done = study(['--max-new-tokens', str(length)] + extra, f'pu-mnt{length}-')
    answers = pd.read_csv(Path(done['folder']) / 'answers.csv')
    cut = answers['truncated'].astype(str).eq('True')
    kshot = answers['system'] != ZERO_SHOT
    return {'max_new_tokens': length, 'cut': f'{cut.sum()} / {len(cut)} ({cut.mean():.0%})',
            'k-shot cut': f'{cut[kshot].sum()} / {kshot.sum()} ({cut[kshot].mean():.0%})',
            'generation (s)': f'{done["generation"]:.1f}', 'wall (s)': f'{done["wall"]:.1f}',
            'CPU (s)': f'{done["cpu"]:.0f}', 'load (1 min, mean [min, max])': done['load'], 'folder': done['folder']}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--lengths', type=int, nargs='+', default=[32, 48, 64, 96])
    args, extra = parser.parse_known_args()
    rows = []
    for length in args.lengths:
        rows.append(run(length, extra))
        print('\n'.join(['| ' + ' | '.join(rows[0]) + ' |', '|' + '---|' * len(rows[0])]
                        + ['| ' + ' | '.join(map(str, row.values())) + ' |' for row in rows]), flush=True)


if __name__ == '__main__':
    main()
