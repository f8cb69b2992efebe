"""The ``pyterrier-utility`` command: ``study`` (the k-sweep of the paper), ``experiment`` (one k in
pt.Experiment), ``attribute`` (each context document's share of U) and ``report`` (tables and figures
again from saved results).

The command line only parses: what is given explicitly, over ``--preset`` or the command's
defaults, becomes a :class:`~pyterrier_utility.experiment.config.StudyConfig` (validated once,
printed at the start and written whole to ``settings.json``), and the library runs it.
"""
import argparse
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

from .errors import UtilityError
from .experiment import config as cfg
from .settings import FIELDS, LabelSet
from .vocabulary import (
    AGGREGATIONS,
    ATTRIBUTION_METHODS,
    BM25_ENGINES,
    CORRECTIONS,
    ENDPOINTS,
    NDCG_ORDERS,
    ORACLE_MODES,
    ORDERING_NAMES,
    PROMPT_FORMAT_NAMES,
    QUALITIES,
    RERANKERS,
    SUBMEASURES,
    SYSTEMS,
)

#: What ``--top-k none`` (and the other optional decoding settings' 'none') parses to, told apart from
#: an option not given.
NOT_SENT = 'none'
EXAMPLE = """example:
  pyterrier-utility study --queries 3 -k 1 3 --samples 2 --out results/small
  pyterrier-utility study --preset paper --reader openai:meta-llama/Meta-Llama-3-8B-Instruct \\
      --base-url http://gpu1:8000/v1 --bm25 pisa"""


def _labels(text: str) -> LabelSet:
    try:
        return LabelSet.parse(text)
    except UtilityError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _number(kind, minimum, exclusive=False, maximum=None):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value != value or value < minimum or (exclusive and value == minimum) or \
                (maximum is not None and value > maximum):
            bound = f'{">" if exclusive else ">="} {minimum}' + (f' and <= {maximum}' if maximum is not None else '')
            raise argparse.ArgumentTypeError(f'must be {"an integer" if kind is int else "a number"} {bound}, '
                                             f'got {text!r}')
        return value
    return parse


def _or_none(parse):
    """``parse``, or 'none': the setting unset (a preset's value turned off)."""
    def parse_or_none(text: str):
        return NOT_SENT if text.lower() == 'none' else parse(text)
    return parse_or_none


def _run(text: str):
    """'NAME=PATH' -> (name, path)."""
    name, sep, path = text.partition('=')
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f'a run is NAME=PATH, got {text!r}')
    return name, path


#: Options as (flags, config field, argparse keywords, help); the default shown is the command's.
OPTIONS: Dict[str, List[Tuple[Tuple[str, ...], str, Dict[str, Any], str]]] = {
    'data': [
        (('--dataset',), 'datasets', dict(nargs='+', metavar='ID'),
         "'cranfield' (embedded) or PyTerrier / ir_datasets ids, e.g. "
                                                      'irds:msmarco-passage/trec-dl-2019/judged; several: one table'),
        (('--queries',), 'queries', dict(type=_number(int, 0), metavar='N'),
         'the first N queries with a relevant document (0: all)'),
        (('-k',), 'ks', dict(type=_number(int, 1), nargs='+', metavar='K'), 'context sizes (of Table 1)'),
        (('--figure-k',), 'figure_ks', dict(type=_number(int, 1), nargs='+', metavar='K'),
         "the context sizes of Figures 3 and 5 (default: -k's); a k in both is answered once"),
        (('--labels',), 'label_sets', dict(type=_labels, nargs='+', metavar='LABELS'),
         "relevant labels for P: a minimum ('2') or a set ('2,3'); several: a column block each"),
    ],
    'systems': [
        (('--systems',), 'systems', dict(nargs='+', choices=SYSTEMS), 'the systems; BM25 and Neural are also '
                                                                          'run reversed (-r)'),
        (('--run',), 'runs', dict(type=_run, action='append', metavar='NAME=PATH'),
         'a saved run as a system (TREC six columns, or a PyTerrier result CSV / parquet); repeatable'),
        (('--orderings',), 'orderings', dict(nargs='+', choices=ORDERING_NAMES),
         'the orderings of the rankings given to the reader: original, reversed (-r), lost in the middle (-lim: '
         'the best at both ends, the best first) and its reversal (-lim-r), and the authors\' orientation of both '
         '(-lim-authors, -lim-authors-r: the same for even k, mirrored for odd k)'),
        (('--no-reverse',), 'no_reverse', dict(action='store_true', default=None), 'the original orderings only'),
        (('--windows',), 'windows', dict(type=_number(int, 2), nargs='+', metavar='START'),
         'also the contexts at ranks START .. START + k - 1 of each ranking (BM25@6)'),
        (('--window-grid',), 'window_grid', dict(type=_number(int, 0), nargs=3, metavar=('TOPS', 'TAILS', 'STEP')),
         "windows as the authors' compose_context samples them: the first TOPS windows every STEP ranks from the top "
         '(BM25, BM25@1+STEP, ...) and the last TAILS of that grid (BM25@-1 the last)'),
        (('--neural',), 'neural', dict(choices=RERANKERS),
         'the neural re-ranker: MiniLM bi-encoder or MonoT5'),
        (('--bm25',), 'bm25', dict(choices=BM25_ENGINES), "BM25's engine: PISA (offline) or Terrier (Java)"),
        (('--index',), 'index', dict(metavar='PATH'),
         'an existing index for BM25 (default: PISA, built in the cache folder)'),
        (('--rel-labels',), 'rel_labels', dict(type=_labels, metavar='LABELS'), 'the labels the Rel oracle draws from'),
        (('--oracle',), 'oracle', dict(choices=ORACLE_MODES),
         "Rel and NRel: a random sample (the paper's text) or every judged document by label (the authors' "
         'released runs: Rel highest first, padded with lower labels)'),
        (('--oracle-seed',), 'oracle_seed', dict(type=_number(int, 0), metavar='N'),
         'the seed of the Rel and NRel samples'),
        (('--cosmix-threshold',), 'cosmix_threshold', dict(type=float, metavar='COSINE'),
         "COSMix: the cosine to a document's nearest other document at or above which it is not sparse"),
    ],
    'reader': [
        (('--reader',), 'readers', dict(nargs='+', metavar='READER'),
         "'gemma3-270m' or 'smollm2-135m' (offline), 'huggingface:MODEL', 'openai:MODEL' or 'llamacpp:MODEL' (with "
         "--base-url) or 'vllm:MODEL'; several: each with its own 0-shot baseline, a reader column in the results"),
        (('--prompt-format',), 'prompt_format', dict(choices=PROMPT_FORMAT_NAMES),
         "the prompt layout: this project's plain one, the authors' exact one, their short-answer one, or the plain "
         'one with a worked example first (offline readers, unless given)'),
        (('--samples',), 'samples', dict(type=_number(int, 1), metavar='N'), 'answers per prompt'),
        (('--seed',), 'seed', dict(type=_number(int, 0), metavar='N'), 'the seed of sample 0; sample j uses seed + j'),
    ],
    'decoding': [
        (('--temperature',), 'temperature', dict(type=_number(float, 0), metavar='T'), '0: greedy'),
        (('--top-k',), 'top_k', dict(type=_or_none(_number(int, 0)), metavar='K'),
         "0: all tokens; 'none': not sent to a server"),
        (('--top-p',), 'top_p', dict(type=_or_none(_number(float, 0, exclusive=True, maximum=1)), metavar='P'),
         "nucleus sampling, in (0, 1]; 'none': off"),
        (('--min-p',), 'min_p', dict(type=_or_none(_number(float, 0, maximum=1)), metavar='P'),
         "keep the tokens at least P times as likely as the most likely, in [0, 1]; 'none': off"),
        (('--max-new-tokens',), 'max_new_tokens', dict(type=_number(int, 1), metavar='N'), 'tokens per answer'),
        (('--repetition-penalty',), 'repetition_penalty', dict(type=_number(float, 0, exclusive=True), metavar='X'),
         '(offline readers: 1.2 over the last 64 tokens unless given)'),
        (('--repeat-last-n',), 'repeat_last_n', dict(type=_or_none(_number(int, 1)), metavar='N'),
         "the penalty counts the last N tokens of prompt and answer (llama.cpp's window; vLLM has none); "
         "'none': every token"),
        (('--stop',), 'stop', dict(nargs='+', metavar='TEXT'),
         "stops besides the prompt's (STOP; authors-short: </answer> only); offline: the end of the answer's line"),
    ],
    'servers and engines': [
        (('--base-url',), 'base_urls', dict(nargs='+', metavar='URL'),
         'openai and llamacpp readers: the servers, each ending in /v1 (default http://127.0.0.1:8000/v1, '
         "llama.cpp's 8080)"),
        (('--concurrency',), 'concurrency', dict(type=_number(int, 1), metavar='N'),
         'openai and llamacpp readers: requests in flight'),
        (('--endpoint',), 'endpoint', dict(choices=ENDPOINTS),
         'openai and llamacpp readers: the raw prompt (completions) or a chat message'),
        (('--timeout',), 'timeout', dict(type=_number(float, 0, exclusive=True), metavar='SECONDS'),
         'openai and llamacpp readers: seconds per request'),
        (('--max-retries',), 'max_retries', dict(type=_number(int, 0), metavar='N'),
         'openai and llamacpp readers: retries of a failed request'),
        (('--retry-deadline',), 'retry_deadline', dict(type=_number(float, 0, exclusive=True), metavar='SECONDS'),
         "openai and llamacpp readers: seconds after a prompt's first attempt when it is not tried again"),
        (('--tensor-parallel-size',), 'tensor_parallel_size', dict(type=_number(int, 1), metavar='N'),
         'vllm readers: GPUs per model'),
        (('--chat-template',), 'chat_template', dict(action='store_true', default=None),
         "huggingface and vllm readers: wrap the prompt in the model's chat template"),
        (('--reproducible',), 'reproducible', dict(action='store_true', default=None),
         'vllm, openai and llamacpp readers: compute every answer alone (one sequence or request at a time per '
         'engine, no cached prefix reused), so fresh generation gives the same answers on every run'),
    ],
    'scoring and output': [
        (('--quality',), 'quality', dict(choices=QUALITIES),
         "answer quality P: FBERT against the relevant documents (the paper), or against a QA collection's gold "
         'answers: BERTScore, exact match, token F1'),
        (('--scorer',), 'scorer', dict(metavar='MODEL'),
         "BERTScore model ('minilm' offline; the paper: bert-large-uncased)"),
        (('--submeasure',), 'submeasure', dict(choices=SUBMEASURES), "BERTScore's precision, recall or F1"),
        (('--agg',), 'agg', dict(choices=AGGREGATIONS), 'BERTScore over the references: the best or the mean'),
        (('--ndcg-order',), 'ndcg_order', dict(choices=NDCG_ORDERS),
         'nDCG@k of a reversed system: the contexts as the reader sees them, or the retrieval order'),
        (('--correction',), 'correction', dict(choices=CORRECTIONS),
         'a multiple-testing correction of the t-tests'),
        (('--min-n',), 'min_n', dict(type=_number(int, 1), metavar='N'),
         'the fewest paired queries a significance mark is given on'),
        (('--fig4-k',), 'fig4_k', dict(type=_number(int, 1), metavar='K'), 'the k of the nDCG@k vs utility scatter'),
        (('--out',), 'out', dict(metavar='FOLDER'), 'the output folder'),
        (('--title',), 'title', dict(metavar='TEXT'), "report.html's title (default: the output folder's name)"),
        (('--verbose',), 'verbose', dict(action='store_true', default=None),
         'keep third-party logs (PISA, transformers, ir_datasets)'),
    ],
}


def _shown(value) -> str:
    if isinstance(value, tuple):
        return ' '.join(_shown(v) if not isinstance(v, str) else v for v in value) or '-'
    return str(value)


#: The study's options that a command does not take.
LEFT_OUT = {'study': (),
            'experiment': ('runs', 'cosmix_threshold', 'fig4_k', 'figure_ks', 'ndcg_order', 'correction', 'min_n',
                           'title'),
            'attribute': ('figure_ks', 'orderings', 'no_reverse', 'windows', 'window_grid', 'fig4_k', 'ndcg_order',
                          'correction', 'min_n', 'title')}


def _add_options(parser: argparse.ArgumentParser, base: cfg.StudyConfig, command: str) -> None:
    """The options of a running command, in groups, each default taken from ``base``."""
    parser.add_argument('--preset', choices=sorted(cfg.PRESETS),
                        help='every setting of the paper at once (datasets, BM25, reader, decoding, samples, scorer, '
                             'MonoT5, k, labels); options given explicitly override it')
    for title, options in OPTIONS.items():
        group = parser.add_argument_group(title)
        for flags, field, kwargs, text in options:
            if field in LEFT_OUT[command]:
                continue
            default, paper = (getattr(c.decoding if field in FIELDS else c, field, None) for c in (base, cfg.PAPER))
            shown = f' (default: {_shown(default)}; --preset paper: {_shown(paper)})' \
                if field not in ('runs', 'no_reverse', 'verbose', 'out', 'title') else ''
            group.add_argument(*flags, dest=field, help=text + shown, **kwargs)


def given(args: argparse.Namespace) -> dict:
    """The settings given explicitly on the command line, as config fields."""
    fields = {field for options in OPTIONS.values() for _, field, _, _ in options}
    out = {name: value for name, value in vars(args).items() if name in fields and value is not None}
    out.update({name: None for name in FIELDS if out.get(name) == NOT_SENT})
    if out.pop('no_reverse', None):
        out['orderings'] = ('original',)
    for name in ('datasets', 'ks', 'figure_ks', 'label_sets', 'systems', 'runs', 'base_urls', 'stop', 'orderings',
                 'windows', 'window_grid', 'readers'):
        if name in out:
            out[name] = tuple(out[name])
    return out


def config_of(args: argparse.Namespace, base: cfg.StudyConfig) -> cfg.StudyConfig:
    """The run's config: what is given explicitly, over the preset, over the command's defaults."""
    base = cfg.PRESETS[args.preset] if args.preset else base
    return cfg.resolve(base, given(args))


def report(args) -> int:
    """Tables and figures again from saved per_query.csv files: nothing is generated."""
    from .experiment import driver  # after parsing: --help needs no PyTerrier nor torch
    driver.report(args.folders, Path(args.out), correction=args.correction, fig4_k=args.fig4_k,
                  ndcg_order=args.ndcg_order, html=args.html, min_n=args.min_n)
    return 0


def quiet_third_parties() -> None:
    """Leaves only this tool's progress: transformers' weight-loading bars and notices, PISA's
    indexing log and ir_datasets' info lines are off (``--verbose`` keeps them)."""
    import logging
    logging.getLogger('ir_datasets').setLevel(logging.WARNING)
    import transformers
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def parser() -> argparse.ArgumentParser:
    """The command line's parser."""
    main_parser = argparse.ArgumentParser(prog='pyterrier-utility', description=__doc__.split('\n')[0],
                                          epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = main_parser.add_subparsers(dest='command', required=True)
    for name, base, text in (('study', cfg.StudyConfig(), 'the k-sweep: Table 1 with significance marks, '
                                                          'Figures 3-5, per-query CSV'),
                             ('experiment', cfg.EXPERIMENT, 'nDCG@k, FBERT and Utility of the systems at one k '
                                                            'in pt.Experiment'),
                             ('attribute', cfg.ATTRIBUTE, "each context document's share of U (Shapley values of the "
                                                          'answer quality over the coalitions of the context)')):
        command = sub.add_parser(name, help=text, epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_options(command, base, name)
        command.set_defaults(base=base)
    attribution = sub.choices['attribute'].add_argument_group('attribution')
    attribution.add_argument('--method', choices=ATTRIBUTION_METHODS, default=ATTRIBUTION_METHODS[0],
                             help='exact Shapley (2^k coalitions, k <= 10), Shapley by permutation sampling (with '
                                  '--budget; orders drawn with --seed), leave-one-out, or each document alone')
    attribution.add_argument('--budget', type=_number(int, 2), metavar='N',
                             help='permutation: coalition evaluations per context (v(empty), v(all), then k - 1 per '
                                  'sampled order)')
    rep = sub.add_parser('report',
                         help='Table 1 and Figures 3-5 again from saved per_query.csv files, generating nothing')
    rep.add_argument('folders', nargs='+', help='study folders; several (e.g. one per dataset) make one table')
    rep.add_argument('--out', default='results/report')
    rep.add_argument('--correction', choices=CORRECTIONS, help='a multiple-testing correction of the t-tests')
    study = cfg.StudyConfig()  # the study's defaults are the report's
    rep.add_argument('--fig4-k', type=_number(int, 1), default=study.fig4_k)
    rep.add_argument('--min-n', type=_number(int, 1), default=study.min_n, metavar='N',
                     help='the fewest paired queries a significance mark is given on')
    rep.add_argument('--html', action='store_true', help="also the folder's browsable report.html (one file, offline)")
    rep.add_argument('--ndcg-order', choices=NDCG_ORDERS, default=study.ndcg_order,
                     help='how the study computed nDCG@k of reversed systems (for the figure labels)')
    return main_parser


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if not getattr(args, 'verbose', False):
        quiet_third_parties()
    from pyterrier.validate import InputValidationError

    from .experiment import driver  # after parsing: --help needs no PyTerrier nor torch
    try:
        if args.command == 'report':
            return report(args)
        config = config_of(args, args.base)
        if args.command == 'study':
            driver.study(config, argv=sys.argv[1:] if argv is None else list(argv))
        elif args.command == 'attribute':
            from .experiment import attribution
            attribution.attribute(config, args.method, args.budget, argv=sys.argv[1:] if argv is None else list(argv))
        else:
            driver.one_k(config, argv=sys.argv[1:] if argv is None else list(argv))
        return 0
    except (UtilityError, InputValidationError) as e:
        parser().exit(2, f'pyterrier-utility {args.command}: error: {e}\n')


if __name__ == '__main__':
    sys.exit(main())
