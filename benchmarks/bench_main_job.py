"""The main job (``pyterrier-utility study`` with its defaults): wall time and peak memory.

Runs the main-job command (README, Setting up) in a child process with a fresh output folder (nothing
generated yet; converted models and indices are reused from the cache folder when present) and
reports its wall time against the 10-minute target and its peak resident memory.

Usage: python benchmarks/bench_main_job.py [extra study options, e.g. --queries 3]
"""
import resource
import subprocess
import sys
import tempfile
import time

TARGET_S = 600


def main():
    out = tempfile.mkdtemp(prefix='pu-main-job-')
    command = [sys.executable, '-m', 'pyterrier_utility.cli', 'study', '--out', out] + sys.argv[1:]
    print('running:', ' '.join(command))
    start = time.perf_counter()
    subprocess.run(command, check=True)
    wall = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    print(f'wall time:   {wall:7.1f} s  ({wall / TARGET_S:.2f} of the {TARGET_S} s target)')
    print(f'peak memory: {peak_kib / 2**20:7.2f} GiB (resident)')


if __name__ == '__main__':
    main()
