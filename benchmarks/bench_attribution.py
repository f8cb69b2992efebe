"""What attribution costs: one k-shot cell against exact Shapley and permutation sampling over it.

On the offline reader (the study's defaults for decoding, samples given), BM25 on Cranfield at one k,
the first answerable queries: the time of the cell (its k-shot answers), of exact Shapley over the
same contexts (2^k coalitions each) and of permutation sampling at a budget, each with a fresh
in-memory generation cache (so every coalition is generated) and the same loaded model, one after
the other. Each time is split into generation (inside the reader's backend) and the rest (scoring
FBERT, estimating), and put as a ratio to the cell's generation. The issue's targets: exact Shapley
at k = 5 at most 8x the cell's generation, sampling at most 2x per 16 coalition evaluations.

What bounds it: every coalition is one prompt to generate, so the cost is the distinct coalitions
(printed) times a prompt's generation; prompts of fewer documents are shorter to prefill. At k = 5
a budget of 64 evaluations exceeds the 32 coalitions there are, so sampling generates about as much
as exact Shapley. The backend may keep prefix KV across calls, which favours the later runs.

Usage: python benchmarks/bench_attribution.py [--queries 2] [-k 5] [--budget 64] [--samples 1]
[--max-new-tokens 32]
"""
import argparse
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=2)
    parser.add_argument('-k', type=int, default=5)
    parser.add_argument('--budget', type=int, default=64)
    parser.add_argument('--samples', type=int, default=1)
    parser.add_argument('--max-new-tokens', type=int, default=32)
    args = parser.parse_args()

    import pyterrier_utility as pu
    from pyterrier_utility.experiment import StudyConfig, preparation
    config = StudyConfig(queries=args.queries, ks=(args.k,), samples=args.samples, label_sets=(2,),
                         decoding=StudyConfig.decoding.replace(max_new_tokens=args.max_new_tokens))
    collection = preparation.load_collection('cranfield', config)
    dataset, qrels, topics, config = collection.dataset, collection.qrels, collection.topics, collection.config
    contexts = (dataset.bm25(num_results=args.k) % args.k)(topics)
    loaded = preparation.build_reader(config, config.readers[0])
    scorer = pu.FBertScorer(qrels, dataset.texts, labels=2, model_type=config.scorer)

    def fresh():
        """A reader of the loaded model with an empty cache, timing its backend calls."""
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

    rows = []
    reader = fresh()
    start = time.perf_counter()
    reader(contexts)
    rows.append(('k-shot cell', time.perf_counter() - start, reader.seconds, reader.cache.generated))
    for method, budget in (('shapley', None), ('permutation', args.budget)):
        reader = fresh()
        start = time.perf_counter()
        pu.ContextAttribution(reader, scorer, method=method, budget=budget).evaluate(contexts)
        rows.append((f'{method}' + (f' (budget {budget})' if budget else f' (2^{args.k} coalitions)'),
                     time.perf_counter() - start, reader.seconds, reader.cache.generated))
    cell = rows[0][2]
    print(f'{len(topics)} queries, BM25 at k={args.k}, {args.samples} samples, max_new_tokens {args.max_new_tokens}')
    print('| run | wall (s) | generation (s) | answers generated | generation / cell |')
    print('|---|---:|---:|---:|---:|')
    for name, wall, generation, generated in rows:
        print(f'| {name} | {wall:.1f} | {generation:.1f} | {generated} | {generation / cell:.1f}x |')
    per_16 = rows[2][2] / cell / args.budget * 16
    print(f'exact Shapley: {rows[1][2] / cell:.1f}x the cell (target <= 8x); permutation: {per_16:.1f}x per 16 '
          'evaluations (target <= 2x)')


if __name__ == '__main__':
    main()
