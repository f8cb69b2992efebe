"""The main job (``pyterrier-utility study`` with its defaults) in its ways of running, side by side in one run.

Prepares first, untimed: the offline reader converted, Cranfield's PISA index built, the re-ranker's
scores cached. Then runs the main job (``--queries N`` for a smaller slice; other study options after
``--``) into a fresh folder, as its own process tree, in each of these ways (``--ways`` picks some):

- ``replicas``: the default: one replica thread of one torch thread per core torch would use, in the study's
  process, the reader exact (integer products, :mod:`~pyterrier_utility.backends.hf.exact`: the same answers on
  every CPU; :class:`~pyterrier_utility.backends.ThreadBackend`);
- ``processes``: the same replicas as processes of one thread each, forked from one process that built the
  reader (:class:`~pyterrier_utility.backends.ProcessBackend`);
- ``in-process``: the study's process computing on torch's threads (``--replicas 1``);
- ``bfloat16``: the replicas with the float reader in bfloat16 (``--dtype bfloat16``), batch-invariant by
  row tiles and per-row attention;
- ``padded``: in one process on torch's threads, the reader in bfloat16 in padded batches
  (``CausalLMBackend(invariant=False)``): what invariance is measured against;
- ``float32``: the replicas with the reader in float32 (``--dtype float32``), batch-invariant by row tiles;
- ``avx2`` and ``float32-avx2``: the default and ``float32`` with oneDNN capped at AVX2 and ATen's kernels at
  avx2, standing in for a CPU without bfloat16 (or VNNI) instructions.

For each: its wall time, its generation time (the study's own ``generation:`` line), the answers
generated and answers per second, and the peak memory of the job's processes (the main process's
resident memory, the proportional set sizes of all of them summed, a page they share counted once, and
the largest other process's, a replica's, resident and proportional; sampled every second). Then the
ratios: each way against padded batches, and float32 against the default; whether each way's answers are those of the
default, byte for byte (``answers.csv``). A smaller slice's times are scaled to the main job's 20
queries as an estimate.

Usage: python benchmarks/bench_main_job.py [--queries 20] [--ways replicas processes in-process bfloat16 padded
       float32 avx2 float32-avx2]
       [--out DIR]
       [-- study options]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict

import psutil

#: What a newcomer's first run should take, models prepared (seconds).
TARGET_S = 300
#: The main job's queries at its defaults (a smaller slice is scaled to them).
FULL_QUERIES = 20
#: The ways of running the main job, and what each changes: study options, and the code its processes
#: run first (a ``sitecustomize`` module, so that replica processes run it too).
#: A CPU without bfloat16 or VNNI instructions, as oneDNN's and ATen's caps stand in for it.
_AVX2 = {'ONEDNN_MAX_CPU_ISA': 'AVX2', 'ATEN_CPU_CAPABILITY': 'avx2'}
WAYS = {
    'replicas': ([], '', {}),
    'processes': ([], """
        from pyterrier_utility import backends
        backends.ThreadBackend = backends.ProcessBackend
    """, {}),
    'in-process': (['--replicas', '1'], '', {}),
    'bfloat16': (['--dtype', 'bfloat16'], '', {}),
    'padded': (['--replicas', '1', '--dtype', 'bfloat16'], """
        from pyterrier_utility.backends.hf.backend import CausalLMBackend
        CausalLMBackend.__init__.__kwdefaults__['invariant'] = False
    """, {}),
    'float32': (['--dtype', 'float32'], '', {}),
    'avx2': ([], '', _AVX2),
    'float32-avx2': (['--dtype', 'float32'], '', _AVX2),
}


@dataclass
class Job:
    """One run of the main job."""
    way: str
    wall: float
    generation: float
    answers: int
    peak_main: float
    peak_all: float
    peak_child: float
    peak_child_pss: float
    folder: Path

    def line(self) -> str:
        return (f'{self.way}: wall {self.wall:.1f} s, generation {self.generation:.1f} s for {self.answers} answers '
                f'({self.answers / self.generation:.2f} answers/s); peak resident memory {self.peak_main:.2f} GiB in '
                f'the main process, {self.peak_all:.2f} GiB in all its processes together (proportional set sizes); '
                f'its largest other process (a replica) {self.peak_child:.2f} GiB resident, {self.peak_child_pss:.2f} '
                'GiB proportional')


def peaks(process: psutil.Popen, every: float = 1.0) -> Dict[str, float]:
    """The peak memory (GiB) of ``process`` alone (resident), of it with its descendants (their proportional
    set sizes summed: a page that several share, such as a library's code, counted once), and of its largest
    descendant (resident and proportional), sampled until it ends."""
    found = {'main': 0.0, 'all': 0.0, 'child': 0.0, 'child_pss': 0.0}

    def sample():
        while process.poll() is None:
            try:
                tree = [process] + process.children(recursive=True)
                shares = []
                for p in tree:
                    try:
                        info = p.memory_full_info()
                    except psutil.Error:
                        continue
                    shares.append(info.pss)
                    if p is not process:
                        found['child'] = max(found['child'], info.rss / 2**30)
                        found['child_pss'] = max(found['child_pss'], info.pss / 2**30)
                found['main'] = max(found['main'], process.memory_info().rss / 2**30)
                found['all'] = max(found['all'], sum(shares) / 2**30)
            except psutil.Error:
                pass
            time.sleep(every)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    return found


def main_job(way: str, args, out: str) -> Job:
    """The main job run ``way`` into a fresh folder, as a process tree of its own."""
    options, preamble, caps = WAYS[way]
    folder = Path(tempfile.mkdtemp(prefix=f'pu-main-job-{way}-', dir=out))
    env = {**os.environ, **caps}
    if preamble:
        site = folder / 'site'
        site.mkdir()
        (site / 'sitecustomize.py').write_text(textwrap.dedent(preamble))
        env['PYTHONPATH'] = os.pathsep.join([str(site)] + [p for p in [env.get('PYTHONPATH')] if p])
    command = [sys.executable, '-m', 'pyterrier_utility.cli', 'study', '--out', str(folder / 'study'),
               '--queries', str(args.queries), *options, *args.study]
    print(f'{way}: pyterrier-utility', ' '.join(command[3:]), flush=True)
    start = time.perf_counter()
    process = psutil.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    found = peaks(process)
    log, _ = process.communicate()
    wall = time.perf_counter() - start
    if process.returncode:
        print(log[-3000:])
        raise SystemExit(f'{way}: the main job failed')
    generated = re.search(r'generation: .*?, (\d+) generated \(([\d.]+) s\)', log)
    if generated is None:
        raise SystemExit(f'{way}: no generation line in the study\'s output')
    job = Job(way, wall, float(generated.group(2)), int(generated.group(1)), found['main'], found['all'],
              found['child'], found['child_pss'], folder)
    print(job.line(), flush=True)
    return job


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=FULL_QUERIES, help="the main job's queries (its default: 20)")
    parser.add_argument('--ways', nargs='+', choices=list(WAYS), default=list(WAYS))
    parser.add_argument('--out', help="a folder to keep the main jobs' study folders in (default: the system's "
                        'temporary folder)')
    parser.add_argument('study', nargs='*', help='further options of the study command (after --)')
    args = parser.parse_args()

    import torch

    import pyterrier_utility as pu
    print(f'CPU: {cpu_name()}; {torch.get_num_threads()} torch threads; {psutil.virtual_memory().total / 2**30:.0f} '
          'GiB of memory')
    pu.backends.gemma3_270m_path()
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    # The re-ranker's scores are cached by the first run: a run untimed first, on one query, prepares them.
    main_job('in-process', argparse.Namespace(queries=args.queries, study=['--systems', 'BM25', 'Neural', '--samples',
                                                                        '1', '-k', '1', *args.study]), args.out)
    jobs: Dict[str, Job] = {}
    for way in args.ways:
        jobs[way] = main_job(way, args, args.out)
    print()
    for job in jobs.values():
        print(job.line())
    reference = jobs.get('replicas')
    padded = jobs.get('padded')
    for job in jobs.values():
        if padded is not None and job is not padded:
            print(f'{job.way} against padded batches: wall {job.wall / padded.wall:.3f}x, generation '
                  f'{job.generation / padded.generation:.3f}x')
        if reference is not None and job is not reference and job.way != 'padded':
            print(f'{job.way} against replicas: wall {job.wall / reference.wall:.3f}x, generation '
                  f'{job.generation / reference.generation:.3f}x')
    if 'avx2' in jobs and 'float32-avx2' in jobs:
        capped, floats = jobs['avx2'], jobs['float32-avx2']
        print(f'exact against float32, both capped at AVX2: generation {capped.generation / floats.generation:.3f}x')
    if reference is not None:
        answers = (reference.folder / 'study' / 'answers.csv').read_bytes()
        for job in jobs.values():
            if job is not reference and job.way in ('processes', 'in-process', 'avx2'):
                same = (job.folder / 'study' / 'answers.csv').read_bytes() == answers
                print(f'{job.way}: answers.csv {"identical to" if same else "DIFFERS from"} the replicas\' run')
        full = reference.wall * FULL_QUERIES / args.queries  # a slice is set against the target scaled to 20 queries
        print(f'main job (replicas): wall {reference.wall:.1f} s for {args.queries} queries; the full main job '
              f'({FULL_QUERIES} queries) at this rate {full:.0f} s, {full / TARGET_S:.2f} of the {TARGET_S} s target')
    if args.queries != FULL_QUERIES:
        scale = FULL_QUERIES / args.queries
        for job in jobs.values():
            print(f'{job.way}: the full main job ({FULL_QUERIES} queries) at this rate: generation about '
                  f'{job.generation * scale:.0f} s, wall about {job.wall * scale:.0f} s')


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
