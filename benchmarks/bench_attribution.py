"""What each attribution method costs and how far it is from exact Shapley: the cost-accuracy table.

On the offline reader (the study's decoding, ``--samples`` per prompt), BM25 on Cranfield, the first
answerable ``--queries``, for each k of ``--ks``: every coalition of every context is generated once
(exact Shapley, 2^k per context), size by size, each size's generation timed; then every method is
played on those values at each budget of ``--budgets`` and ``--seeds`` seeds (a method reads a
coalition's value from the table: the reader is batch-invariant, so it is the value the method's own
run would generate). For each method and budget, over the contexts and seeds:

- ``coalitions``: the distinct coalitions it read per context (what its own run would generate);
- ``mae`` against exact Shapley, ``top1`` (the same top document) and ``lds`` (Spearman between its
  additive predictions and the values of ``--held-out`` held-out coalitions per context);
- ``time``: the generation of the coalitions it read, from each size's measured seconds per
  coalition, against the generation of the cell it explains (its k-shot prompt); the 0-shot prompt
  is left out of both (the study generates it for P_0 whatever is attributed).

Then k = 10 in earnest (``--k10-budget``; skipped with 0): the cell of the same queries at k = 10,
then ``ContextAttribution(method='kernelshap')`` over it with a fresh cache (the 0-shot prompts
generated first, untimed), each timed; the ratio of the attribution's generation (its coalitions with
the whole context) to the cell's.

``--plot`` draws the error against exact Shapley against the coalitions read, per method and k.

Usage: python benchmarks/bench_attribution.py [--queries 2] [--ks 5 8] [--budgets 8 16 32 64 128]
[--seeds 5] [--held-out 32] [--samples 1] [--k10-budget 16] [--plot FILE]
"""
import argparse
import itertools
import time
from collections import defaultdict

import numpy as np

#: The methods compared, and whether each takes a budget.
METHODS = {'permutation': True, 'kernelshap': True, 'tmc': True, 'contextcite': True, 'loo': False,
           'single': False}


def fresh_reader(loaded):
    """A reader of the loaded model with an empty in-memory cache, timing its backend's generation."""
    import pyterrier_utility as pu
    reader = pu.Reader(pu.GenerationCache(loaded.cache.backend), n_samples=loaded.n_samples, seed=loaded.seed,
                       prompt_format=loaded.prompt_format)
    reader.seconds = 0.0
    answer = reader.answer

    def timed(prompts):
        start = time.perf_counter()
        try:
            return answer(prompts)
        finally:
            reader.seconds += time.perf_counter() - start
    reader.answer = timed
    return reader


def zero_shot(reader, contexts):
    """Generates the 0-shot prompts of the contexts' queries."""
    reader.answer_frames([contexts.drop_duplicates('qid')[['qid', 'query']]], by='qid')


def tables(loaded, scorer, contexts, k):
    """Every coalition's value per context (qid -> {coalition: value}) and each coalition size's
    generation seconds per coalition (the cell's, size k, first)."""
    from pyterrier_utility import ContextAttribution
    from pyterrier_utility.methods.attribution import games
    reader = fresh_reader(loaded)
    zero_shot(reader, contexts)
    attribution = ContextAttribution(reader, scorer)
    values = defaultdict(dict)
    per_coalition = {}
    for size in [k] + list(range(1, k)):
        wanted = [frozenset(c) for c in itertools.combinations(range(1, k + 1), size)]
        before = reader.seconds
        found = attribution.values_of(contexts, lambda _: [frozenset(), *wanted])
        per_coalition[size] = (reader.seconds - before) / len(wanted)
        for qid, coalition, value in zip(found['qid'], found['coalition'], found['value']):
            values[qid][games.parse_coalition(coalition)] = float(value)
    return values, per_coalition


def played(table, k, method, budget, seed, per_coalition, held):
    """One method's figures on one context's table."""
    from pyterrier_utility.methods.attribution import games, lds
    read = set()
    phi = games.estimate(lambda s: read.add(s) or table[s], k, method, budget, seed).phi
    exact = games.estimate(table.__getitem__, k, 'shapley').phi
    cost = sum(per_coalition[len(s)] for s in read if s) / per_coalition[k]
    return dict(coalitions=len(read), mae=float(np.abs(phi - exact).mean()),
                top1=float(np.argmax(phi) == np.argmax(exact)), lds=lds(phi, table[frozenset()], held),
                time=cost)


def k10(loaded, scorer, dataset, topics, budget):
    """The cell at k = 10 and kernelshap over it: generation seconds of each, answers generated."""
    from pyterrier_utility import ContextAttribution
    contexts = (dataset.bm25(num_results=10) % 10)(topics)
    reader = fresh_reader(loaded)
    zero_shot(reader, contexts)
    start, generated = reader.seconds, reader.cache.generated
    reader(contexts)
    cell = (reader.seconds - start, reader.cache.generated - generated)
    start, generated = reader.seconds, reader.cache.generated
    ContextAttribution(reader, scorer, method='kernelshap', budget=budget).evaluate(contexts)
    return cell, (reader.seconds - start, reader.cache.generated - generated)


def plot(rows, path):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    ks = sorted({r['k'] for r in rows})
    fig, axes = plt.subplots(1, len(ks), figsize=(5 * len(ks), 3.6), squeeze=False)
    for ax, k in zip(axes[0], ks):
        for method in METHODS:
            own = sorted((r for r in rows if r['k'] == k and r['method'] == method), key=lambda r: r['coalitions'])
            style = '-o' if METHODS[method] else 's'
            ax.plot([r['coalitions'] for r in own], [r['mae'] for r in own], style, label=method, markersize=4)
        ax.set_xscale('log', base=2)
        ax.set_title(f'k = {k}')
        ax.set_xlabel('coalitions read per context')
        ax.set_ylabel('mean |phi - exact Shapley|')
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=2)
    parser.add_argument('--ks', type=int, nargs='+', default=[5, 8])
    parser.add_argument('--budgets', type=int, nargs='+', default=[8, 16, 32, 64, 128])
    parser.add_argument('--seeds', type=int, default=5)
    parser.add_argument('--held-out', type=int, default=32)
    parser.add_argument('--samples', type=int, default=1)
    parser.add_argument('--k10-budget', type=int, default=16)
    parser.add_argument('--plot')
    args = parser.parse_args()

    import pyterrier_utility as pu
    from pyterrier_utility.methods.attribution import held_out
    from pyterrier_utility.study import StudyConfig
    from pyterrier_utility.study.collection import load_collection
    from pyterrier_utility.study.readers import build_reader
    config = StudyConfig(queries=args.queries, ks=tuple(args.ks), samples=args.samples, label_sets=(2,))
    collection = load_collection('cranfield', config)
    dataset, qrels, topics, config = collection.dataset, collection.qrels, collection.topics, collection.config
    loaded = build_reader(config, config.readers[0])
    scorer = pu.FBertScorer(qrels, dataset.texts, labels=2, model_type=config.scorer)
    print(f'{len(topics)} Cranfield queries, BM25, the offline reader ({config.readers[0]}), {args.samples} sample(s), '
          f'{args.seeds} seeds per sampling method and budget, {args.held_out} held-out coalitions per context')
    rows = []
    for k in args.ks:
        contexts = (dataset.bm25(num_results=k) % k)(topics)
        values, per_coalition = tables(loaded, scorer, contexts, k)
        print(f'k={k}: {2 ** k} coalitions per context generated in '
              f'{sum(per_coalition[s] * len(list(itertools.combinations(range(k), s))) for s in per_coalition):.0f} s; '
              f'the cell (one coalition of each context) in {per_coalition[k]:.1f} s')
        for method, sampled in METHODS.items():
            for budget in (args.budgets if sampled else [None]):
                figures = []
                for qid, table in values.items():
                    held = {s: table[s] for s in held_out(k, args.held_out, 0)}
                    for seed in range(args.seeds if sampled else 1):
                        try:
                            figures.append(played(table, k, method, budget, seed, per_coalition, held))
                        except pu.errors.SettingError:  # a budget below one order of k documents
                            break
                if figures:
                    mean = {f: float(np.nanmean([x[f] for x in figures])) for f in figures[0]}
                    rows.append(dict(k=k, method=method, budget=budget, **mean))
    print('| k | method | budget | coalitions read | MAE vs exact | top-1 agreement | LDS | time / cell |')
    print('|---:|---|---:|---:|---:|---:|---:|---:|')
    for r in rows:
        budget = '' if r['budget'] is None else r['budget']
        print(f"| {r['k']} | {r['method']} | {budget} | {r['coalitions']:.1f} | {r['mae']:.4f} | {r['top1']:.2f} | "
              f"{r['lds']:.3f} | {r['time']:.1f}x |")
    if args.plot:
        plot(rows, args.plot)
        print(f'plot: {args.plot}')
    if args.k10_budget:
        (cell, cell_n), (extra, extra_n) = k10(loaded, scorer, dataset, topics, args.k10_budget)
        print(f'k=10, kernelshap at a budget of {args.k10_budget}: the cell {cell:.1f} s ({cell_n} answers), the '
              f'attribution {extra:.1f} s more ({extra_n} answers); (cell + attribution) / cell = '
              f'{(cell + extra) / cell:.1f}x (target <= 16x)')


if __name__ == '__main__':
    main()
