"""A small study under each ISA cap the CPU supports: its answers byte for byte and its time.

Runs ``pyterrier-utility study`` (a slice: ``--queries 2 -k 1 3 --systems BM25 Rel --samples 2`` unless
other study options follow ``--``) into a fresh folder under oneDNN's ``ONEDNN_MAX_CPU_ISA`` and ATen's
``ATEN_CPU_CAPABILITY`` caps, which stand in for other CPUs (an AMD EPYC with bfloat16 instructions and no
AMX, a Xeon without AMX, laptops with AVX-VNNI or AVX2 alone), and MKL's (``MKL_ENABLE_INSTRUCTIONS``,
``MKL_CBWR``: the code paths MKL takes on other CPUs), and prints for each: the ISA oneDNN, ATen and MKL
report, the wall and generation time, and whether ``answers.csv`` and ``token_logprobs.csv`` are those
of the run without a cap, byte for byte. A cap the CPU lacks is said and skipped.

Usage: python benchmarks/bench_isa_caps.py [--dtype exact] [-- study options]
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyterrier_utility.backends.hf.exact_ops import CAP_VARIABLES, ISA_CAPS, ISA_PROBE

#: Each cap: its environment and the CPU flag it needs (none: always).
CAPS = {'none': ({}, None), **ISA_CAPS}


def flags() -> set:
    text = Path('/proc/cpuinfo').read_text()
    return set(next(line for line in text.splitlines() if line.startswith('flags')).split(':', 1)[1].split())


def run(env: dict, study: list, folder: Path):
    environment = {k: v for k, v in os.environ.items() if k not in CAP_VARIABLES}
    environment.update(env)
    verbose = {'ONEDNN_VERBOSE': '1', 'MKL_VERBOSE': '1'}
    probe = subprocess.run([sys.executable, '-c', ISA_PROBE], env={**environment, **verbose}, capture_output=True,
                           text=True, check=True).stdout
    onednn, aten = re.search(r'isa:([^\n]*)', probe), re.search(r'aten:(\w+)', probe)
    mkl = re.search(r'64 architecture (.*?)(?:, Lnx|, Win|$)', probe, re.M)
    isa = f'{onednn.group(1)}; ATen {aten.group(1)}; MKL {mkl.group(1) if mkl else "?"}'  # type: ignore[union-attr]
    start = time.perf_counter()
    done = subprocess.run([sys.executable, '-m', 'pyterrier_utility.cli', 'study', '--out', str(folder), *study],
                          env=environment, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    generation = float(re.search(r'generation: .*?\(([\d.]+) s\)', done.stdout + done.stderr).group(1))  # type: ignore
    digest = hashlib.sha256(b''.join((folder / name).read_bytes() for name in ('answers.csv', 'token_logprobs.csv')))
    return isa, wall, generation, digest.hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--dtype', default='exact', help='the reader\'s --dtype (default: exact)')
    parser.add_argument('study', nargs='*', help='study options (after --)')
    args = parser.parse_args()
    study = ['--dtype', args.dtype, *(args.study or ['--queries', '2', '-k', '1', '3', '--systems', 'BM25', 'Rel',
                                                     '--samples', '2'])]
    name = next((line.split(':', 1)[1].strip() for line in Path('/proc/cpuinfo').read_text().splitlines()
                 if line.startswith('model name')), 'unknown')
    print(f'CPU: {name}; study {" ".join(study)}')
    have = flags()
    reference = None
    with tempfile.TemporaryDirectory() as tmp:
        for cap, (env, flag) in CAPS.items():
            if flag is not None and flag not in have:
                print(f'{cap}: skipped, the CPU lacks {flag}')
                continue
            isa, wall, generation, digest = run(env, study, Path(tmp) / re.sub(r'\W+', '-', cap))
            reference = reference or digest
            same = 'identical' if digest == reference else 'DIFFERENT'
            print(f'| {cap} | {isa} | {wall:.1f} s | {generation:.1f} s | {same} |', flush=True)


if __name__ == '__main__':
    main()
