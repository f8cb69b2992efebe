"""The ``pyterrier-utility`` command: ``study`` (the k-sweep of the paper) and ``experiment`` (one k in pt.Experiment)."""
import argparse
import sys
import time
from pathlib import Path

def build_systems(dataset, qrels, k: int, neural: str, labels, seed: int, depth: int = 100):
    """The six systems at context size ``k``: each default system cut at k, and the reversals."""
    import pyterrier_utility as pu
    from pyterrier_utility.experiment import REVERSED_SYSTEMS, default_systems
    systems = {}
    for name, system in default_systems(dataset, qrels, neural=neural, labels=labels, seed=seed,
                                        depth=depth).items():
        systems[name] = system % k
        if name in REVERSED_SYSTEMS:
            systems[name + '-r'] = system % k >> pu.ReverseOrder()
    return systems


def parse_labels(text: str):
    """'2' -> 2 (label 2 and up); '2,3' -> {2, 3} (exactly these labels)."""
    parts = [int(x) for x in text.split(',') if x.strip()]
    if not parts:
        raise argparse.ArgumentTypeError(f'no label in {text!r}')
    return parts[0] if len(parts) == 1 and ',' not in text else set(parts)


def _setup(args, out: Path):
    """Dataset, qrels, answerable topics and the cached reader shared by both subcommands."""
    import pyterrier_utility as pu
    dataset = pu.datasets.get_dataset(args.dataset)
    qrels = dataset.get_qrels()
    topics = dataset.get_topics()
    for labels in args.labels:
        topics = pu.datasets.answerable_topics(topics, qrels, labels)
    if args.queries:
        topics = topics.head(args.queries)
    backend = pu.backends.get_backend(args.reader, temperature=args.temperature, top_k=50,
                                      max_new_tokens=args.max_new_tokens,
                                      repetition_penalty=args.repetition_penalty)
    reader = pu.Reader(pu.GenerationCache(backend, out / 'generations.sqlite'), n_samples=args.samples,
                       seed=args.seed, stop=pu.reader.BASE_MODEL_STOP, verbose=True)
    return dataset, qrels, topics, reader


def experiment(args) -> int:
    import pyterrier as pt
    from pyterrier.measures import nDCG

    import pyterrier_utility as pu
    start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    labels = args.labels[0]
    dataset, qrels, topics, reader = _setup(args, out)
    scorer = pu.FBertScorer(qrels, dataset.texts, labels=labels, model_type=args.scorer)
    evaluate = pu.UtilityEvaluator(reader, scorer)
    systems = build_systems(dataset, qrels, args.k, args.neural, labels, args.seed)
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


def study(args) -> int:
    import matplotlib.pyplot as plt

    from pyterrier_utility import experiment as ex
    start = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dataset, qrels, topics, reader = _setup(args, out)
    systems = ex.default_systems(dataset, qrels, neural=args.neural, labels=args.labels[0], seed=args.seed)
    unknown = sorted(set(args.systems) - set(systems))
    if unknown:
        raise SystemExit(f'pyterrier-utility study: unknown systems {unknown}; choose from {sorted(systems)}')
    systems = {name: systems[name] for name in args.systems}
    reverse = [] if args.no_reverse else [s for s in ex.REVERSED_SYSTEMS if s in systems]
    results = ex.run_study(topics, qrels, systems, reader, dataset.texts, ks=args.k, label_sets=args.labels,
                           reverse=reverse, bertscore=args.scorer,
                           baseline='Rel' if 'Rel' in systems else None)
    paths = results.save(out)
    fig4_k = args.fig4_k if args.fig4_k in args.k else max(args.k)
    figures = {'fig3_utility_vs_k.png': lambda p: ex.utility_vs_k(results.per_query, p),
               f'fig4_ndcg_vs_utility_k{fig4_k}.png': lambda p: ex.ndcg_vs_utility(results.per_query, fig4_k, path=p),
               'fig5_pearson_vs_k.png': lambda p: ex.correlation_vs_k(results.per_query, 'pearson', path=p)}
    for name, draw in figures.items():
        plt.close(draw(out / name))
    print(f'{args.dataset}: {len(topics)} queries, k={args.k}, {args.samples} sample(s), reader {args.reader}, '
          f'BERTScore {args.scorer}\n')
    print(paths['table1.md'].read_text())
    print(f'written to {out}/ ({", ".join(sorted(list(paths) + list(figures)))}) in {time.time() - start:.0f} s; '
          f'{results.generated} answers generated, {len(reader.backend)} cached')
    return 0


def _common(parser: argparse.ArgumentParser, queries: int, max_new_tokens: int, labels: list) -> None:
    parser.add_argument('--dataset', default='cranfield',
                        help="'cranfield' (embedded) or a PyTerrier / ir_datasets id, e.g. irds:msmarco-passage/trec-dl-2019/judged")
    parser.add_argument('--queries', type=int, default=queries,
                        help='the first N queries with a relevant document under every label set (0: all)')
    parser.add_argument('--samples', type=int, default=1, help='answers per query and prompt (the paper: 5)')
    parser.add_argument('--labels', type=parse_labels, nargs='+', default=labels,
                        help="relevant labels for P: a minimum ('2') or a set ('2,3'); several allowed")
    parser.add_argument('--reader', default='gemma3-270m',
                        help="'gemma3-270m', 'smollm2-135m', 'huggingface:ID', 'vllm:ID' or 'openai:ID ...'")
    parser.add_argument('--temperature', type=float, default=0.3)
    parser.add_argument('--max-new-tokens', type=int, default=max_new_tokens, help='the paper: 300')
    parser.add_argument('--repetition-penalty', type=float, default=1.2)
    parser.add_argument('--scorer', default='minilm', help="BERTScore model: 'minilm' or e.g. bert-large-uncased (the paper's)")
    parser.add_argument('--neural', choices=['dense', 'monot5'], default='dense',
                        help='dense: MiniLM bi-encoder (offline); monot5: castorini/monot5-base-msmarco (the paper\'s)')
    parser.add_argument('--seed', type=int, default=0)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog='pyterrier-utility', description=__doc__)
    sub = parser.add_subparsers(dest='command', required=True)
    st = sub.add_parser('study', help='the k-sweep: Table 1 with significance marks, Figures 3-5, per-query CSV')
    _common(st, queries=5, max_new_tokens=32, labels=[2, 3])
    st.add_argument('-k', type=int, nargs='+', default=[1, 3, 5], help='context sizes')
    st.add_argument('--systems', nargs='+', default=['BM25', 'Neural', 'Rel', 'NRel'],
                    help='among BM25, Neural, Rel, NRel; BM25 and Neural are also run reversed (-r)')
    st.add_argument('--no-reverse', action='store_true', help='leave out the reversed orderings')
    st.add_argument('--fig4-k', type=int, default=5, help='the k of the nDCG@k vs utility scatter')
    st.add_argument('--out', default='results/study')
    st.set_defaults(func=study)
    exp = sub.add_parser('experiment', help='nDCG@k, FBERT and Utility of the six systems in pt.Experiment')
    _common(exp, queries=6, max_new_tokens=40, labels=[2])
    exp.add_argument('-k', type=int, default=3, help='context size')
    exp.add_argument('--out', default='results/experiment')
    exp.set_defaults(func=experiment)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == '__main__':
    sys.exit(main())
