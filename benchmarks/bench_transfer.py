"""What the transfer across readers costs, beside the study it reads.

A study of two offline readers (``study --reader gemma3-270m smollm2-135m``, each reader's own default
decoding) over the first Cranfield queries, then the ``transfer`` command over its folder: each reader
answers each pool document alone (one prompt per reader, query, document and sample; the 0-shot
answers are the study's) and is studied on every reader's oracle. Prints the study's time and answers,
the transfer's, and the transfer's time as a ratio to the study's (both on this machine, one after
the other, the models loaded afresh by each), then the transfer table and the agreement.

What bounds it: the pool (``--max-docs`` per query) times the samples times the readers, each a
one-document prompt; the oracles' studies add one k-shot prompt per (reader, oracle, k, query, sample).

Usage: python benchmarks/bench_transfer.py [--queries 5] [-k 1 3] [--max-docs 10] [--samples 3]
[--out results/bench-transfer]
"""
import argparse
import shutil
import time
from pathlib import Path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=5)
    parser.add_argument('-k', type=int, nargs='+', default=[1, 3])
    parser.add_argument('--max-docs', type=int, default=10)
    parser.add_argument('--samples', type=int, default=3)
    parser.add_argument('--out', default='results/bench-transfer')
    args = parser.parse_args()

    from pyterrier_utility.commands import main as commands
    from pyterrier_utility.study import StudyConfig
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    config = StudyConfig(readers=('gemma3-270m', 'smollm2-135m'), queries=args.queries, ks=tuple(args.k),
                         systems=('BM25', 'Rel', 'NRel'), samples=args.samples, out=str(out))
    start = time.perf_counter()
    study = commands.study(config)
    study_seconds = time.perf_counter() - start
    start = time.perf_counter()
    found = commands.transfer(out, args.max_docs)
    transfer_seconds = time.perf_counter() - start
    print(f'\nstudy: {study_seconds:.1f} s, {study.generated} answers generated')
    print(f'transfer (max_docs {args.max_docs}): {transfer_seconds:.1f} s, {found.settings["generated"]} answers '
          f'generated')
    print(f'transfer / study: {transfer_seconds / study_seconds:.2f}x the time, '
          f'{found.settings["generated"] / max(study.generated, 1):.2f}x the answers')


if __name__ == '__main__':
    main()
