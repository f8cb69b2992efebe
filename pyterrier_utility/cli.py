"""The ``pyterrier-utility`` command: ``study`` (the k-sweep of the paper) and ``experiment`` (one k in pt.Experiment).

Every setting of a run is resolved once, here: what the command line says, else the preset
(``--preset paper``), else the command's defaults. The settings are printed at the start and written
to ``settings.json`` next to the results. Errors in settings are one-line messages, raised before
any model is loaded or any answer generated.
"""
import argparse
import json
import sys
import time
from pathlib import Path

#: The paper's settings (Tian, Ganguly & Macdonald, ECIR 2025): Llama-3-8B-Instruct sampling at
#: temperature 0.3 with top-k 50 and up to 300 tokens, 5 samples, BERTScore with bert-large-uncased,
#: MonoT5 over BM25's top 100, k = 2, 5, 10, 15, relevant labels {2, 3} and {3} (TREC DL), Rel sampling
#: labels 2 and up, every query.
PRESETS = {
    'paper': {'reader': 'vllm:meta-llama/Meta-Llama-3-8B-Instruct', 'temperature': 0.3, 'top_k': 50,
              'max_new_tokens': 300, 'samples': 5, 'stop': ['STOP'], 'scorer': 'bert-large-uncased',
              'neural': 'monot5', 'k': [2, 5, 10, 15], 'labels': [{2, 3}, {3}], 'rel_labels': 2, 'queries': 0},
}
#: Defaults shared by both commands (offline: runnable on a CPU with nothing downloaded).
DEFAULTS = {'dataset': ['cranfield'], 'rel_labels': 2, 'ndcg_order': 'context', 'reader': 'gemma3-270m', 'temperature': 0.3, 'top_k': 50, 'top_p': None,
            'samples': 1, 'seed': 0, 'scorer': 'minilm', 'neural': 'dense', 'endpoint': 'completions',
            'concurrency': 8, 'tensor_parallel_size': 1, 'chat_template': False}
#: What ``--top-k none`` parses to, told apart from an option not given.
NOT_SENT = 'none'
#: Conveniences for the offline base models only: they repeat themselves and ignore "STOP".
OFFLINE_CONVENIENCES = {'repetition_penalty': 1.2}


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
    try:
        parts = [int(x) for x in text.split(',') if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f'labels must be integers, got {text!r}') from None
    if not parts:
        raise argparse.ArgumentTypeError(f'no label in {text!r}')
    return parts[0] if len(parts) == 1 and ',' not in text else set(parts)


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f'must be an integer >= {minimum}, got {text!r}')
        return value
    return parse


def _number_at_least(minimum: float, exclusive: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or value != value or value < minimum or (exclusive and value == minimum):
            raise argparse.ArgumentTypeError(f'must be a number {">" if exclusive else ">="} {minimum}, got {text!r}')
        return value
    return parse


def _top_k(text: str):
    """An integer >= 0 (0: all tokens) or 'none' (not sent: the engine's default)."""
    return NOT_SENT if text.lower() == 'none' else _int_at_least(0)(text)


def _top_p(text: str) -> float:
    value = _number_at_least(0, exclusive=True)(text)
    if value > 1:
        raise argparse.ArgumentTypeError(f'must be in (0, 1], got {text!r}')
    return value


def _describe_labels(labels) -> str:
    from pyterrier_utility.fbert import describe_labels
    return describe_labels(labels)


def resolve(args, command_defaults: dict) -> dict:
    """The run's settings: the command line, else the preset, else the command's and shared defaults."""
    from pyterrier_utility.backends import OFFLINE_READERS
    preset = PRESETS.get(args.preset, {}) if args.preset else {}
    settings = {}
    for name in list(DEFAULTS) + list(command_defaults) + ['max_new_tokens', 'repetition_penalty', 'stop', 'k',
                                                             'labels', 'queries', 'base_url']:
        given = getattr(args, name, None)
        if given is not None:
            settings[name] = given
        elif name in preset:
            settings[name] = preset[name]
        elif name in command_defaults:
            settings[name] = command_defaults[name]
        else:
            settings[name] = DEFAULTS.get(name)
    if settings['top_k'] == NOT_SENT:
        settings['top_k'] = None
    offline = settings['reader'] in OFFLINE_READERS
    if settings['repetition_penalty'] is None and offline:
        settings['repetition_penalty'] = OFFLINE_CONVENIENCES['repetition_penalty']
    if settings['stop'] is None:
        from pyterrier_utility.reader import BASE_MODEL_STOP
        settings['stop'] = list(BASE_MODEL_STOP) if offline else ['STOP']
    settings['seeds'] = [settings['seed'] + j for j in range(settings['samples'])]
    settings['preset'] = args.preset
    return settings


def backend_options(settings: dict) -> dict:
    """The keyword arguments of :func:`pyterrier_utility.backends.get_backend` for the reader named;
    a setting its engine cannot honour is an error, never dropped."""
    from pyterrier_utility.backends import check_reader
    from pyterrier_utility.errors import SettingError
    reader = settings['reader']
    engine = check_reader(reader)
    options = {'temperature': settings['temperature'], 'max_new_tokens': settings['max_new_tokens']}
    unusable = []
    if engine in ('offline', 'huggingface', 'vllm'):
        options['top_k'] = settings['top_k'] or 0
        options['repetition_penalty'] = settings['repetition_penalty'] or 1.0
        if engine == 'vllm':
            options['top_p'] = settings['top_p']
            options['tensor_parallel_size'] = settings['tensor_parallel_size']
        elif settings['top_p'] is not None:
            unusable.append('--top-p')
        if engine != 'offline':
            options['chat_template'] = settings['chat_template']
    if engine == 'openai':
        options.update(top_k=settings['top_k'], top_p=settings['top_p'], endpoint=settings['endpoint'],
                       repetition_penalty=settings['repetition_penalty'], concurrency=settings['concurrency'],
                       base_urls=settings['base_url'] or ['http://127.0.0.1:8000/v1'])
        if settings['chat_template']:
            unusable.append('--chat-template (the server applies its own with --endpoint chat)')
    else:
        unusable += [flag for flag, name, default in (('--base-url', 'base_url', None),
                                                       ('--concurrency', 'concurrency', DEFAULTS['concurrency']),
                                                       ('--endpoint', 'endpoint', DEFAULTS['endpoint']))
                     if settings[name] != default]
    if engine != 'vllm' and settings['tensor_parallel_size'] != 1:
        unusable.append('--tensor-parallel-size')
    if unusable:
        raise SettingError(f'the reader {reader!r} cannot honour {", ".join(unusable)}')
    return options


def _check_out(out: Path) -> None:
    from pyterrier_utility.errors import SettingError
    if out.exists() and not out.is_dir():
        raise SettingError(f'--out {out} is a file, not a folder')
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / '.write-test'
        probe.write_text('')
        probe.unlink()
    except OSError as e:
        raise SettingError(f'--out {out} cannot be written: {e.strerror or e}') from None


def _scorer(name: str):
    from pyterrier_utility import BertScore
    from pyterrier_utility.errors import SettingError
    try:
        return BertScore(name)
    except Exception as e:  # any loading failure: the message says which model and why
        raise SettingError(f'--scorer {name!r} cannot be loaded ({type(e).__name__}: {e})') from None


def _collection(name: str, settings: dict):
    """A dataset, its qrels and its topics answerable under at least one label set (narrower sets
    give NaN for the others), the label sets checked against its qrels."""
    import pyterrier_utility as pu
    from pyterrier_utility.errors import SettingError
    dataset = pu.datasets.get_dataset(name)
    qrels = dataset.get_qrels()
    present = sorted(qrels['label'].unique().tolist())
    answerable = set()
    for option, label_sets in (('--labels', settings['labels']), ('--rel-labels', [settings['rel_labels']])):
        for labels in label_sets:
            relevant = pu.fbert.relevant_docnos(qrels, labels)
            if not relevant:
                raise SettingError(f'{option} {_describe_labels(labels)}: no document has such a label '
                                   f'(the qrels of {name} have labels {present})')
            if option == '--labels':
                answerable |= set(relevant)
    topics = dataset.get_topics()
    topics = topics[topics['qid'].astype(str).isin(answerable)].reset_index(drop=True)
    if settings['queries']:
        topics = topics.head(settings['queries'])
    return dataset, qrels, topics


def _setup(args, settings: dict, out: Path):
    """Checks everything that can fail late, then: the collections (dataset, qrels, answerable
    topics), the scorer and the cached reader shared by every command and dataset."""
    import pyterrier_utility as pu
    _check_out(out)
    options = backend_options(settings)
    collections = {name: _collection(name, settings) for name in settings['dataset']}
    bertscore = _scorer(settings['scorer'])
    backend = pu.backends.get_backend(settings['reader'], **options)
    reader = pu.Reader(pu.GenerationCache(backend, out / 'generations.sqlite'), n_samples=settings['samples'],
                       seed=settings['seed'], stop=settings['stop'], verbose=True)
    return collections, bertscore, reader


def _announce(command: str, settings: dict, out: Path, reader) -> None:
    """Prints the settings and writes them (with the backend as built) to ``settings.json``."""
    import pyterrier_utility as pu
    from pyterrier_utility.cache import backend_key
    record = dict(settings, labels=[_describe_labels(x) for x in settings['labels']], command=command,
                  version=pu.__version__, backend=backend_key(reader.backend.backend), argv=sys.argv[1:])
    (out / 'settings.json').write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + '\n')
    shown = ', '.join(f'{k}={record[k]}' for k in ('dataset', 'reader', 'temperature', 'top_k', 'top_p',
                                                   'max_new_tokens', 'repetition_penalty', 'stop', 'samples',
                                                   'seeds', 'scorer', 'neural', 'k', 'labels'))
    print(f'pyterrier-utility {command}' + (f' (preset {settings["preset"]})' if settings['preset'] else '')
          + f': {shown}' + (f', base_url={settings["base_url"]}' if settings['base_url'] else '')
          + f'; settings in {out / "settings.json"}', flush=True)


def experiment(args) -> int:
    import pyterrier as pt
    from pyterrier.measures import nDCG

    import pyterrier_utility as pu
    from pyterrier_utility.errors import SettingError
    start = time.time()
    out = Path(args.out)
    settings = resolve(args, {'queries': 6, 'max_new_tokens': 40, 'labels': [2], 'k': 3})
    if len(settings['dataset']) > 1:
        raise SettingError('experiment takes one --dataset; the study command takes several')
    collections, bertscore, reader = _setup(args, settings, out)
    dataset, qrels, topics = collections[settings['dataset'][0]]
    _announce('experiment', settings, out, reader)
    labels = settings['labels'][0]
    # A preset's k-sweep has no single k: the one-k view takes the paper's Figure 4 k.
    k = settings['k'] if isinstance(settings['k'], int) else 5
    scorer = pu.FBertScorer(qrels, dataset.texts, labels=labels, model_type=bertscore)
    evaluate = pu.UtilityEvaluator(reader, scorer)
    systems = build_systems(dataset, qrels, k, settings['neural'], settings['rel_labels'], settings['seed'])
    # Each system runs once; both evaluations below read its stored output.
    outputs = [(s >> reader >> evaluate)(topics) for s in systems.values()]
    pipelines = [pt.Transformer.from_df(o) for o in outputs]
    metrics = [nDCG @ k, pu.FBERT, pu.FBERT0, pu.Utility]
    table = pt.Experiment(pipelines, topics, qrels, metrics, names=list(systems),
                          baseline=list(systems).index('Rel'), round=4)
    per_query = pt.Experiment(pipelines, topics, qrels, metrics, names=list(systems), perquery=True)
    table.to_csv(out / 'experiment.csv', index=False)
    per_query.to_csv(out / 'per_query.csv', index=False)
    print(f'{settings["dataset"][0]}: {len(topics)} queries, k={k}; significance vs Rel (paired t-test)')
    print(table.to_string(index=False))
    print(f'written to {out}/ in {time.time() - start:.0f} s '
          f'({reader.backend.generated} answers generated, {len(reader.backend)} cached)')
    return 0


def parse_run(text: str):
    """'NAME=PATH' -> (name, path)."""
    name, sep, path = text.partition('=')
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f'a run is NAME=PATH, got {text!r}')
    return name, path


def study(args) -> int:
    import pandas as pd

    import pyterrier_utility as pu
    from pyterrier_utility import experiment as ex
    from pyterrier_utility.errors import SettingError
    start = time.time()
    out = Path(args.out)
    settings = resolve(args, {'queries': 10, 'samples': 5, 'max_new_tokens': 32, 'labels': [2, 3], 'k': [1, 3, 5]})
    choices = list(ex.SYSTEMS) + ['COSMix']
    unknown = sorted(set(args.systems) - set(choices))
    if unknown:
        raise SettingError(f'unknown systems {unknown}; choose from {choices}')
    runs = dict(args.run or [])
    clash = sorted(set(runs) & set(ex.SYSTEMS))
    if clash:
        raise SettingError(f'--run names {clash} are built-in systems; name the runs otherwise')
    collections, bertscore, reader = _setup(args, settings, out)
    _announce('study', settings, out, reader)
    results, cosmix_branches = [], []
    for name, (dataset, qrels, topics) in collections.items():
        systems = ex.default_systems(dataset, qrels, neural=settings['neural'], labels=settings['rel_labels'],
                                     seed=settings['seed'], index=args.index, bm25=args.bm25,
                                     verbose=args.verbose)
        if 'COSMix' in args.systems:
            systems['COSMix'] = pu.cosmix.cosmix_system(dataset, reader, threshold=args.cosmix_threshold,
                                                        reranker=settings['neural'])
        systems = {s: systems[s] for s in args.systems}
        for run_name, path in runs.items():
            run = pu.RunFile(path, dataset.texts)
            if run.qids() & set(topics['qid'].astype(str)):
                systems[run_name] = run
            else:
                print(f'{name}: run {run_name} ranks none of its queries; left out', flush=True)
        reverse = [] if args.no_reverse else [s for s in systems if s in ex.REVERSED_SYSTEMS or s in runs]
        print(f'{name}: {len(topics)} queries, systems {list(systems)}', flush=True)
        result = ex.run_study(topics, qrels, systems, reader, dataset.texts, ks=settings['k'],
                                    label_sets=settings['labels'], reverse=reverse, bertscore=bertscore,
                                    baseline='Rel' if 'Rel' in systems else None,
                                    ndcg_order=settings['ndcg_order'], dataset=name if len(collections) > 1 else None)
        results.append(result)
        if 'COSMix' in systems:
            branches = systems['COSMix'].branches().assign(dataset=name)
            cosmix_branches.append(branches)
            share = branches.groupby('k')['branch'].apply(lambda b: (b == 'S').mean())
            print(f'{name}: COS-Mix fell back to the sparse documents for '
                  + ', '.join(f'{share[k]:.0%} of queries at k={k}' for k in share.index), flush=True)
    results = ex.StudyResults.concat(results)
    paths = results.save(out, correction=args.correction)
    if cosmix_branches:
        paths['cosmix_branches.csv'] = out / 'cosmix_branches.csv'
        pd.concat(cosmix_branches, ignore_index=True).to_csv(paths['cosmix_branches.csv'], index=False)
    fig4_k = args.fig4_k if args.fig4_k in settings['k'] else max(settings['k'])
    figures = ex.draw_figures(results.per_query, out, fig4_k, ndcg_order=settings['ndcg_order'])
    print()
    print(paths['table1_paper.md'].read_text())
    print(f'written to {out}/ ({", ".join(sorted(list(paths) + figures + ["settings.json"]))}) in '
          f'{time.time() - start:.0f} s; {results.generated} answers generated, {len(reader.backend)} cached')
    return 0


def report(args) -> int:
    """Tables and figures again from saved per_query.csv files: nothing is generated."""
    import pandas as pd

    from pyterrier_utility import experiment as ex
    from pyterrier_utility.errors import SettingError
    frames = []
    for folder in args.folders:
        path = Path(folder) / 'per_query.csv'
        if not path.is_file():
            raise SettingError(f'{path} does not exist: report reads the per_query.csv of a study folder')
        frame = pd.read_csv(path, dtype={'qid': str})
        if 'dataset' not in frame.columns:
            frame.insert(0, 'dataset', Path(folder).name)
        frames.append(frame)
    per_query = pd.concat(frames, ignore_index=True)
    if per_query['dataset'].nunique() == 1 and len(args.folders) == 1:
        per_query = per_query.drop(columns=['dataset'])
    out = Path(args.out)
    _check_out(out)
    baseline = 'Rel' if 'Rel' in set(per_query['system']) else None
    paths = ex.write_tables(per_query, out, baseline=baseline, correction=args.correction)
    ks = sorted(set(per_query['k']))
    figures = ex.draw_figures(per_query, out, args.fig4_k if args.fig4_k in ks else max(ks), ndcg_order=args.ndcg_order)
    print(paths['table1_paper.md'].read_text())
    print(f'written to {out}/ ({", ".join(sorted(list(paths) + figures))}); nothing generated')
    return 0


def _common(parser: argparse.ArgumentParser, defaults: dict) -> None:
    """Options of both commands. Those left out come from --preset, else the defaults shown."""
    def default(name):
        return f' (default: {defaults.get(name, DEFAULTS.get(name))}; the paper: {PRESETS["paper"].get(name, "-")})'
    parser.add_argument('--verbose', action='store_true', help="keep third-party logs (PISA, transformers, ir_datasets)")
    parser.add_argument('--preset', choices=sorted(PRESETS),
                        help='every setting of the paper at once (reader, decoding, samples, scorer, MonoT5, k, '
                             'labels); options given explicitly override it')
    parser.add_argument('--dataset', nargs='+', help="'cranfield' (embedded, the default) or PyTerrier / ir_datasets "
                                                     'ids, e.g. irds:msmarco-passage/trec-dl-2019/judged; several: one '
                                                     'study, one table')
    parser.add_argument('--queries', type=_int_at_least(0),
                        help=f'the first N queries with a relevant document (0: all){default("queries")}')
    parser.add_argument('--samples', type=_int_at_least(1), help=f'answers per prompt{default("samples")}')
    parser.add_argument('--seed', type=_int_at_least(0), help='the seed of sample 0; sample j uses seed + j (default: 0)')
    parser.add_argument('--labels', type=parse_labels, nargs='+',
                        help=f"relevant labels for P: a minimum ('2') or a set ('2,3'); several allowed{default('labels')}")
    parser.add_argument('--reader', help="'gemma3-270m' (offline, the default), 'smollm2-135m', 'huggingface:MODEL', "
                                         "'openai:MODEL' (with --base-url) or 'vllm:MODEL'")
    parser.add_argument('--base-url', nargs='+', metavar='URL',
                        help='openai readers: the servers, each ending in /v1; requests go to the one with the '
                             'fewest in flight (default: http://127.0.0.1:8000/v1)')
    parser.add_argument('--concurrency', type=_int_at_least(1), help='openai readers: requests in flight (default: 8)')
    parser.add_argument('--endpoint', choices=['completions', 'chat'],
                        help='openai readers: the raw prompt (completions, the default) or a chat message')
    parser.add_argument('--tensor-parallel-size', type=_int_at_least(1), help='vllm readers: GPUs per model')
    parser.add_argument('--chat-template', action='store_true', default=None,
                        help="huggingface and vllm readers: wrap the prompt in the model's chat template")
    parser.add_argument('--temperature', type=_number_at_least(0), help=f'0: greedy{default("temperature")}')
    parser.add_argument('--top-k', type=_top_k, help=f"0: all tokens; 'none': not sent to a server{default('top_k')}")
    parser.add_argument('--top-p', type=_top_p, help='nucleus sampling, in (0, 1] (default: none)')
    parser.add_argument('--max-new-tokens', type=_int_at_least(1), help=f'tokens per answer{default("max_new_tokens")}')
    parser.add_argument('--repetition-penalty', type=_number_at_least(0, exclusive=True),
                        help='default: 1.2 for the offline readers, none for any other')
    parser.add_argument('--stop', nargs='+', metavar='TEXT',
                        help="stop sequences (default: 'STOP'; for the offline base models also a new "
                             "'Question:' or 'Context' line)")
    parser.add_argument('--scorer', help=f"BERTScore model{default('scorer')}")
    parser.add_argument('--rel-labels', type=parse_labels,
                        help=f"the labels the Rel oracle samples from: a minimum or a set{default('rel_labels')}")
    parser.add_argument('--neural', choices=['dense', 'monot5'],
                        help=f'the neural re-ranker: MiniLM bi-encoder or MonoT5{default("neural")}')


def quiet_third_parties() -> None:
    """Leaves only this tool's progress: transformers' weight-loading bars and notices, PISA's
    indexing log and ir_datasets' info lines are off (``--verbose`` keeps them)."""
    import logging
    logging.getLogger('ir_datasets').setLevel(logging.WARNING)
    try:
        import transformers
        transformers.utils.logging.set_verbosity_error()
        transformers.utils.logging.disable_progress_bar()
    except ImportError:
        pass


def main(argv=None) -> int:
    from pyterrier.validate import InputValidationError

    from pyterrier_utility.errors import UtilityError
    parser = argparse.ArgumentParser(prog='pyterrier-utility', description=__doc__.split('\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    st = sub.add_parser('study', help='the k-sweep: Table 1 with significance marks, Figures 3-5, per-query CSV')
    _common(st, {'queries': 10, 'samples': 5, 'max_new_tokens': 32, 'labels': '2 3', 'k': '1 3 5'})
    st.add_argument('-k', type=_int_at_least(1), nargs='+', help='context sizes (default: 1 3 5; the paper: 2 5 10 15)')
    st.add_argument('--systems', nargs='+', default=['BM25', 'Neural', 'Rel', 'NRel'],
                    help='among BM25, Neural, Rel, NRel and COSMix; BM25 and Neural are also run reversed (-r)')
    st.add_argument('--cosmix-threshold', type=float, default=0.65,
                    help="COSMix: the cosine similarity to a document's nearest other document at or above "
                         'which its information is not sparse')
    st.add_argument('--no-reverse', action='store_true', help='leave out the reversed orderings')
    st.add_argument('--fig4-k', type=_int_at_least(1), default=5, help='the k of the nDCG@k vs utility scatter')
    st.add_argument('--run', type=parse_run, action='append', metavar='NAME=PATH',
                    help='a saved run as a system (TREC six columns, or a PyTerrier result CSV / parquet), '
                         'reversed like the built-in systems; repeat for several')
    st.add_argument('--index', help='an existing index to run BM25 over (PISA, or Terrier with --bm25 terrier); '
                                    'default: a PISA index built in the cache folder with every core')
    st.add_argument('--bm25', choices=['pisa', 'terrier'], default='pisa',
                    help="BM25's engine: PISA (offline, the default) or Terrier (needs Java), the paper's")
    st.add_argument('--ndcg-order', choices=['context', 'retrieval'],
                    help='nDCG@k of a reversed system: on the contexts as the reader sees them (default) or '
                         'in the retrieval order of its unreversed system')
    st.add_argument('--correction', help="a multiple-testing correction of the t-tests, as pt.Experiment's "
                                         "(e.g. 'holm', 'bonferroni')")
    st.add_argument('--out', default='results/study')
    st.set_defaults(func=study)
    rep = sub.add_parser('report', help='Table 1 and Figures 3-5 again from saved per_query.csv files, generating nothing')
    rep.add_argument('folders', nargs='+', help='study folders; several (e.g. one per dataset) make one table')
    rep.add_argument('--out', default='results/report')
    rep.add_argument('--correction', help="a multiple-testing correction of the t-tests (e.g. 'holm')")
    rep.add_argument('--fig4-k', type=_int_at_least(1), default=5)
    rep.add_argument('--ndcg-order', choices=['context', 'retrieval'], default='context',
                     help='how the study computed nDCG@k of reversed systems (for the figure labels)')
    rep.set_defaults(func=report)
    exp = sub.add_parser('experiment', help='nDCG@k, FBERT and Utility of the six systems in pt.Experiment')
    _common(exp, {'queries': 6, 'max_new_tokens': 40, 'labels': '2', 'k': 3})
    exp.add_argument('-k', type=_int_at_least(1), help='context size (default: 3)')
    exp.add_argument('--out', default='results/experiment')
    exp.set_defaults(func=experiment)
    args = parser.parse_args(argv)
    if not getattr(args, 'verbose', False):
        quiet_third_parties()
    try:
        return args.func(args)
    except (UtilityError, InputValidationError) as e:
        parser.exit(2, f'pyterrier-utility {args.command}: error: {e}\n')


if __name__ == '__main__':
    sys.exit(main())
