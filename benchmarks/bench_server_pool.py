"""Answers per second of OpenAICompatibleBackend against concurrency and pool size, on SIMULATED servers.

Each endpoint is tests/support/simulated_server.py in its own process on 127.0.0.1: a stand-in for a GPU
server (vLLM) that answers every request after a fixed latency, at most CAPACITY requests at a
time (its batch), with a bounded number of requests and a lifetime limit. The answers are not a
model's; the benchmark measures the client: how throughput scales with requests in flight and with
endpoints, through the generation cache exactly as a study calls it. The reference, measured in the
same run, sends one request at a time to one endpoint.

Usage: python benchmarks/bench_server_pool.py [--latency 0.2] [--capacity 16] [--prompts 512]
"""
import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'tests'))

from pyterrier_utility import GenerationCache  # noqa: E402
from pyterrier_utility.backends import OpenAICompatibleBackend  # noqa: E402

SERVER = Path(__file__).resolve().parent.parent / 'tests' / 'support' / 'simulated_server.py'


def start(n: int, latency: float, capacity: int, lifetime: float):
    procs = [subprocess.Popen([sys.executable, str(SERVER), str(latency), str(capacity), '100000', str(lifetime)],
                              stdout=subprocess.PIPE, text=True) for _ in range(n)]
    return procs, [p.stdout.readline().strip() for p in procs]


def rate(urls, concurrency: int, prompts: int, tag: str) -> float:
    backend = OpenAICompatibleBackend('simulated', urls, concurrency=concurrency, temperature=0.3, top_k=50,
                                      max_new_tokens=300, max_retries=0)
    cache = GenerationCache(backend)
    start_time = time.perf_counter()
    out = cache.generate([f'{tag} prompt {i}' for i in range(prompts)], seeds=[0] * prompts)
    elapsed = time.perf_counter() - start_time
    assert len(out) == prompts and cache.generated == prompts
    return prompts / elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--latency', type=float, default=0.2, help='seconds per simulated request')
    parser.add_argument('--capacity', type=int, default=16, help='requests one simulated server processes at once')
    parser.add_argument('--prompts', type=int, default=512, help='prompts per measurement')
    parser.add_argument('--reference-prompts', type=int, default=20)
    args = parser.parse_args()
    procs, urls = start(4, args.latency, args.capacity, lifetime=600)
    try:
        sequential = rate(urls[:1], 1, args.reference_prompts, 'reference')
        print(f'SIMULATED servers: {args.latency * 1000:.0f} ms per request, {args.capacity} requests at a time each')
        print(f'reference (one request at a time, one endpoint): {sequential:.2f} answers/s '
              f'(ideal {1 / args.latency:.2f})\n')
        print('| endpoints | concurrency | answers/s | vs reference '
              '| vs ideal min(concurrency, endpoints x capacity) / latency |')
        print('|---:|---:|---:|---:|---:|')
        for pool in (1, 2, 4):
            for concurrency in (1, 4, 16, 64):
                value = rate(urls[:pool], concurrency, args.prompts if concurrency > 1 else args.reference_prompts,
                             f'{pool}-{concurrency}')
                ideal = min(concurrency, pool * args.capacity) / args.latency
                print(f'| {pool} | {concurrency} | {value:.1f} | {value / sequential:.1f}x | {value / ideal:.2f} |',
                      flush=True)
    finally:
        for p in procs:
            p.kill()


if __name__ == '__main__':
    main()
