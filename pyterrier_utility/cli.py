"""The ``pyterrier-utility`` command."""
import argparse
import sys
import time
from pathlib import Path

#: The systems of the study, in the order they are reported.
SYSTEMS = ('BM25', 'BM25-r', 'Neural', 'Neural-r', 'Rel', 'NRel')


def build_systems(dataset, qrels, k: int, neural: str, labels, seed: int, depth: int = 100):
    """The study's context sources at depth ``k``: BM25, a neural re-ranker of BM25's top ``depth``,
    their reversals, and the Rel / NRel oracles."""
    import pyterrier_utility as pu
    bm25 = dataset.bm25(num_results=depth)
    reranker = pu.backends.minilm_reranker() if neural == 'dense' else pu.backends.monot5_reranker()
    return {
        'BM25': bm25 % k,
        'BM25-r': bm25 % k >> pu.ReverseOrder(),
        'Neural': bm25 >> reranker % k,
        'Neural-r': bm25 >> reranker % k >> pu.ReverseOrder(),
        'Rel': pu.OracleSampler(qrels, dataset.texts, labels=labels, seed=seed) % k,
        'NRel': pu.OracleSampler(qrels, dataset.texts, relevant=False, fill_unjudged=True, seed=seed) % k,
    }


def experiment(args) -> int:
    import pyterrier as pt
    from pyterrier.measures import nDCG

    import pyterrier_utility as pu
    start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dataset = pu.datasets.get_dataset(args.dataset)
    qrels = dataset.get_qrels()
    topics = pu.datasets.answerable_topics(dataset.get_topics(), qrels, args.labels).head(args.queries)
    backend = pu.backends.get_backend(args.reader, temperature=args.temperature, top_k=50,
                                      max_new_tokens=args.max_new_tokens,
                                      repetition_penalty=args.repetition_penalty)
    reader = pu.Reader(pu.GenerationCache(backend, out / 'generations.sqlite'), n_samples=args.samples,
                       seed=args.seed, stop=pu.reader.BASE_MODEL_STOP, verbose=True)
    scorer = pu.FBertScorer(qrels, dataset.texts, labels=args.labels, model_type=args.scorer)
    evaluate = pu.UtilityEvaluator(reader, scorer)
    systems = build_systems(dataset, qrels, args.k, args.neural, args.labels, args.seed)
    # Each system runs once; both evaluations below read its stored output.
    outputs = [(s >> reader >> evaluate)(topics) for s in systems.values()]
    pipelines = [pt.Transformer.from_df(o) for o in outputs]
    metrics = [nDCG @ args.k, pu.FBERT, pu.FBERT0, pu.Utility]
    table = pt.Experiment(pipelines, topics, qrels, metrics, names=list(systems),
                          baseline=list(systems).index('Rel'), round=4)
    per_query = pt.Experiment(pipelines, topics, qrels, metrics, names=list(systems), perquery=True)
    table.to_csv(out / 'experiment.csv', index=False)
    per_query.to_csv(out / 'per_query.csv', index=False)
    print(f'{args.dataset}: {len(topics)} queries, k={args.k}, {args.samples} sample(s), '
          f'reader {args.reader}, BERTScore {args.scorer}; significance vs Rel (paired t-test)')
    print(table.to_string(index=False))
    print(f'written to {out}/ in {time.time() - start:.0f} s '
          f'({reader.backend.generated} answers generated, {len(reader.backend)} cached)')
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='pyterrier-utility', description=__doc__)
    sub = parser.add_subparsers(dest='command', required=True)
    exp = sub.add_parser('experiment', help='nDCG@k, FBERT and Utility of the six systems in pt.Experiment')
    exp.add_argument('--dataset', default='cranfield', help="'cranfield' (embedded) or a PyTerrier dataset id")
    exp.add_argument('--queries', type=int, default=6, help='first N answerable queries')
    exp.add_argument('-k', type=int, default=3, help='context size')
    exp.add_argument('--samples', type=int, default=1, help='answers per query (the paper: 5)')
    exp.add_argument('--labels', type=int, default=2, help='minimum relevant label for P and Rel')
    exp.add_argument('--reader', default='gemma3-270m',
                     help="'gemma3-270m', 'smollm2-135m', 'huggingface:ID', 'vllm:ID' or 'openai:ID ...'")
    exp.add_argument('--temperature', type=float, default=0.3)
    exp.add_argument('--max-new-tokens', type=int, default=40, help='the paper: 300')
    exp.add_argument('--repetition-penalty', type=float, default=1.2)
    exp.add_argument('--scorer', default='minilm', help="BERTScore model: 'minilm' or e.g. bert-large-uncased")
    exp.add_argument('--neural', choices=['dense', 'monot5'], default='dense',
                     help='dense: MiniLM bi-encoder (offline); monot5: castorini/monot5-base-msmarco')
    exp.add_argument('--seed', type=int, default=0)
    exp.add_argument('--out', default='results/experiment')
    exp.set_defaults(func=experiment)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
