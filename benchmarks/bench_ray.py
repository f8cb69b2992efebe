"""Answers per second of RayBackend against its replicas, on a two-node Ray cluster on this machine.

The cluster is ``ray.cluster_utils.Cluster``: a head and one more node, ``--cpus`` CPUs each, all on
127.0.0.1. Two workloads, each through the generation cache as a study calls it, each rate a ratio
to one replica measured in the same run:

- the offline reader (Gemma 3 270M, greedy, ``--tokens`` new tokens, batches of four prompts),
  1 and 2 replicas of one CPU each (one per node), and in process for comparison (one torch thread,
  as an actor of one CPU has, and torch's default);
- a latency-bound server: tests/support/simulated_server.py on 127.0.0.1 answering every request after
  ``--latency`` seconds (64 at a time), driven through ``openai:`` with one request in flight per
  replica, 1, 2, 4 and 8 replicas of a quarter CPU each.

Usage: python benchmarks/bench_ray.py [--prompts 16] [--tokens 16] [--latency 0.2] [--requests 96]
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'  # every node on 127.0.0.1; read when Ray is imported

import ray  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

import pyterrier_utility as pu  # noqa: E402
from pyterrier_utility.prompt_formats import PROMPT_FORMATS  # noqa: E402

SERVER = Path(__file__).resolve().parent.parent / 'tests' / 'support' / 'simulated_server.py'


def rate(backend, prompts) -> float:
    """Answers per second of ``backend`` generating ``prompts`` (one seed) through a generation cache."""
    cache = pu.GenerationCache(backend)
    start = time.perf_counter()
    cache.answer(prompts, [0])
    elapsed = time.perf_counter() - start
    assert cache.generated == len(prompts)
    return len(prompts) / elapsed


def offline_prompts(count: int):
    """Cranfield queries, each with its first two judged documents (300 characters each) as contexts."""
    dataset = pu.datasets.cranfield()
    qrels = dataset.get_qrels()
    topics = dataset.get_topics().head(count)
    return [PROMPT_FORMATS['plain'].build(q, [dataset.texts[d][:300] for d in
                                              qrels[qrels['qid'] == qid]['docno'].head(2)])
            for qid, q in zip(topics['qid'], topics['query'])]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--prompts', type=int, default=16, help="offline reader: prompts (one answer each)")
    parser.add_argument('--tokens', type=int, default=16, help='offline reader: new tokens per answer')
    parser.add_argument('--latency', type=float, default=0.2, help='simulated server: seconds per request')
    parser.add_argument('--requests', type=int, default=96, help='simulated server: prompts per measurement')
    parser.add_argument('--cpus', type=int, default=1, help='CPUs of each of the two nodes')
    args = parser.parse_args()
    nodes = Cluster(initialize_head=True, head_node_args={'num_cpus': args.cpus, 'include_dashboard': False})
    nodes.add_node(num_cpus=args.cpus)
    ray.init(address=nodes.address, log_to_driver=False)
    server = subprocess.Popen([sys.executable, str(SERVER), str(args.latency), '64', '100000', '900'],
                              stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    rows = []
    begun = time.perf_counter()
    try:
        settings = dict(temperature=0, max_new_tokens=args.tokens, batch_size=4)
        prompts = offline_prompts(args.prompts)
        import torch
        local = pu.backends.gemma3_270m(**settings)
        threads = torch.get_num_threads()
        for count in sorted({1, threads}):
            torch.set_num_threads(count)
            rows.append(('offline reader', f'in process, {count} torch thread{"s" * (count > 1)}',
                         rate(local, prompts)))
        torch.set_num_threads(threads)
        del local
        for replicas in (1, 2):
            with pu.backends.RayBackend('gemma3-270m', replicas, **settings) as backend:
                rows.append(('offline reader', replicas, rate(backend, prompts)))
        for replicas in (1, 2, 4, 8):
            with pu.backends.RayBackend('openai:simulated', replicas, num_cpus=2 * args.cpus / 8, base_urls=[url],
                                        concurrency=1, max_retries=0) as backend:
                rows.append((f'simulated server ({args.latency * 1000:.0f} ms/request)', replicas,
                             rate(backend, [f'prompt {i} of {replicas}' for i in range(args.requests)])))
    finally:
        server.kill()
        ray.shutdown()
        nodes.shutdown()
    print(f'\nRayBackend on a two-node local cluster ({args.cpus} CPU each, 127.0.0.1); offline reader: '
          f'{args.prompts} prompts, {args.tokens} new tokens, greedy, batches of 4; simulated server: '
          f'{args.requests} prompts, one request in flight per replica; {time.perf_counter() - begun:.0f} s in all\n')
    print('| workload | replicas | answers/s | vs 1 replica |')
    print('|---|---:|---:|---:|')
    for workload, replicas, value in rows:
        one = next(v for w, r, v in rows if w == workload and r == 1)
        print(f'| {workload} | {replicas} | {value:.2f} | {value / one:.2f}x |')


if __name__ == '__main__':
    main()
