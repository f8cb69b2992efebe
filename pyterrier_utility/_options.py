"""The command line's options, every command's declared once: each as (flags, field, argparse
keywords, help) in :data:`OPTIONS`, with the parsers of their values; :data:`COMMANDS` says which
each command takes, and :func:`explicit_settings`, :func:`placement` and :func:`prediction_parameters`
turn parsed arguments into the values the library takes."""
import argparse
import dataclasses
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

from ._checks import check_k, check_system, check_window
from .engines import ENGINES_BY_NAME, OFFLINE_READERS, model_engines, server_engines
from .errors import SettingError, UtilityError
from .prediction.parameters import PredictionParameters
from .qualities import QUALITIES_BY_NAME, quality_help
from .settings import FIELDS, Decoding, LabelSet, Placement
from .study.presets import PRESETS
from .vocabulary import (
    AGGREGATIONS,
    ATTRIBUTION_METHODS,
    BM25_ENGINES,
    CORRECTIONS,
    DTYPE_CHOICES,
    ENDPOINTS,
    MAX_REFERENCE_K,
    NDCG_ORDERS,
    ORACLE_MODES,
    ORDERING_NAMES,
    POOL_CAP,
    PREDICTION_COMBINATION,
    PROMPT_FORMAT_NAMES,
    RAY_ADDRESSES,
    RAY_CONNECT_TIMEOUT,
    RERANKERS,
    SUBMEASURES,
    SYSTEMS,
    UTILITY_GAINS,
)


def readers_taking(option: str) -> str:
    """Which readers a study option is for, as its help says it: the engines whose description
    (:mod:`~pyterrier_utility.engines`) takes it, 'openai and llamacpp readers'."""
    names = [name for name, engine in ENGINES_BY_NAME.items() if engine.takes(option)]
    return (', '.join(names[:-1]) + ' and ' if len(names) > 1 else '') + names[-1] + ' readers'


def _reader_names() -> str:
    """The reader names for ``--reader``'s help, from the engines' descriptions."""
    offline = ' or '.join(f"'{name}'" for name in OFFLINE_READERS)
    named = model_engines()
    local = ', '.join(f"'{name}:MODEL'" for name in named if name not in server_engines())
    servers = ' or '.join(f"'{name}:MODEL'" for name in named if name in server_engines())
    return f'{offline} (offline), {local}, {servers} (with --base-url)'


#: What ``--top-k none`` (and the other optional decoding settings' 'none') parses to, told apart from
#: an option not given.
NOT_SENT = 'none'


def labels(text: str) -> LabelSet:
    try:
        return LabelSet.parse(text)
    except UtilityError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def number(kind, minimum, exclusive=False, maximum=None):
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


def checked(rule):
    """An option's value read from its text (an integer, or a number, where it reads as one) and checked
    by ``rule``, the function of :mod:`~pyterrier_utility._checks` the library checks the setting with,
    so the command line refuses what the Python API refuses, with the same message."""
    def parse(text: str):
        value: Any = text
        for kind in (int, float):
            try:
                value = kind(text)
                break
            except ValueError:
                pass
        try:
            return rule('', value)
        except SettingError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def decoding_field(name: str):
    """The decoding setting ``name`` read from its text (as :func:`checked` reads it) and checked by
    :class:`~pyterrier_utility.settings.Decoding` itself, so the command line refuses what ``Decoding(...)``
    refuses, with the same message."""
    return checked(lambda _, value: getattr(Decoding(**{name: value}), name))


def or_none(parse):
    """``parse``, or 'none': the setting unset (a preset's value turned off)."""
    def parse_or_none(text: str):
        return NOT_SENT if text.lower() == 'none' else parse(text)
    return parse_or_none


def ray_address(text: str) -> str:
    """A Ray cluster: one of :data:`~pyterrier_utility.vocabulary.RAY_ADDRESSES` or ``[ray://]HOST:PORT``."""
    if text not in RAY_ADDRESSES and ':' not in text:
        raise argparse.ArgumentTypeError(f"a Ray cluster is {' or '.join(map(repr, RAY_ADDRESSES))} or HOST:PORT, "
                                         f'got {text!r}')
    return text


def _run(text: str):
    """'NAME=PATH' -> (name, path)."""
    name, sep, path = text.partition('=')
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f'a run is NAME=PATH, got {text!r}')
    return name, path


#: An option: (flags, field, argparse keywords, help); a help read when the parser is built is a function
#: (``--quality``'s, from the qualities registered by then), as is a choice list that is a live registry.
Option = Tuple[Tuple[str, ...], str, Dict[str, Any], Union[str, Callable[[], str]]]
#: Every command's options, each declared once, by group. The field is what the option sets: in the
#: groups of :data:`SETTINGS`, a field of the study's config (or of its decoding) or of
#: :class:`~pyterrier_utility.settings.Placement`, whose default is the command's config's; in the
#: others, an argument of the command or a field of
#: :class:`~pyterrier_utility.prediction.parameters.PredictionParameters`.
OPTIONS: Dict[str, List[Option]] = {
    'preset': [
        (('--preset',), 'preset', dict(choices=sorted(PRESETS)),
         'every setting of the paper at once (its values are listed below the options); options given explicitly '
         'override it'),
    ],
    'data': [
        (('--dataset',), 'datasets', dict(nargs='+', metavar='ID'),
         "'cranfield' (embedded) or PyTerrier / ir_datasets ids, e.g. "
                                                      'irds:msmarco-passage/trec-dl-2019/judged; several: one table'),
        (('--queries',), 'queries', dict(type=number(int, 0), metavar='N'),
         'the first N queries with a relevant document (0: all)'),
        (('-k',), 'ks', dict(type=checked(check_k), nargs='+', metavar='K'),
         'the context sizes: how many retrieved documents the reader is given, a column of Table 1 each'),
        (('--figure-k',), 'figure_ks', dict(type=checked(check_k), nargs='+', metavar='K'),
         "the context sizes of Figures 3 and 5 (default: -k's); a k in both is answered once"),
        (('--labels',), 'label_sets', dict(type=labels, nargs='+', metavar='LABELS'),
         "relevant labels for P: a minimum ('2') or a set ('2,3'); several: a column block each"),
    ],
    'systems': [
        (('--systems',), 'systems', dict(type=checked(check_system), nargs='+', metavar='SYSTEM'),
         f'the systems, of {", ".join(SYSTEMS)}; BM25 and Neural are also run reversed (-r)'),
        (('--run',), 'runs', dict(type=_run, action='append', metavar='NAME=PATH'),
         'a saved run as a system (TREC six columns, or a PyTerrier result CSV / parquet); repeatable'),
        (('--orderings',), 'orderings', dict(nargs='+', choices=ORDERING_NAMES),
         'the orderings of the rankings given to the reader: original, reversed (-r), lost in the middle (-lim: '
         'the best at both ends, the best first) and its reversal (-lim-r), and the authors\' orientation of both '
         '(-lim-authors, -lim-authors-r: the same for even k, mirrored for odd k)'),
        (('--no-reverse',), 'no_reverse', dict(action='store_true', default=None), 'the original orderings only'),
        (('--windows',), 'windows', dict(type=checked(check_window), nargs='+', metavar='START'),
         'also the contexts at ranks START .. START + k - 1 of each ranking (BM25@6), START >= 2; -J: the J-th '
         "window from the tail, on --window-grid's step (BM25@-1 the last)"),
        (('--window-grid',), 'window_grid', dict(type=number(int, 0), nargs=3, metavar=('TOPS', 'TAILS', 'STEP')),
         "windows as the authors' compose_context samples them: the first TOPS windows every STEP ranks from the top "
         '(BM25, BM25@1+STEP, ...) and the last TAILS of that grid (BM25@-1 the last)'),
        (('--neural',), 'neural', dict(choices=RERANKERS),
         'the neural re-ranker: MiniLM bi-encoder or MonoT5'),
        (('--bm25',), 'bm25', dict(choices=BM25_ENGINES), "BM25's engine: PISA (offline) or Terrier (Java)"),
        (('--index',), 'index', dict(metavar='PATH'),
         'an existing index for BM25 (default: PISA, built in the cache folder)'),
        (('--rel-labels',), 'rel_labels', dict(type=labels, metavar='LABELS'), 'the labels the Rel oracle draws from'),
        (('--oracle',), 'oracle', dict(choices=ORACLE_MODES),
         "Rel and NRel: a random sample (the paper's text) or every judged document by label (the authors' "
         'released runs: Rel highest first, padded with lower labels)'),
        (('--oracle-seed',), 'oracle_seed', dict(type=number(int, 0), metavar='N'),
         'the seed of the Rel and NRel samples'),
        (('--cosmix-threshold',), 'cosmix_threshold', dict(type=float, metavar='COSINE'),
         "COSMix: the cosine to a document's nearest other document at or above which it is not sparse"),
    ],
    'reader': [
        (('--reader',), 'readers', dict(nargs='+', metavar='READER'),
         f'{_reader_names()}; several: each with its own 0-shot baseline, a reader column in the results'),
        (('--prompt-format',), 'prompt_format', dict(choices=PROMPT_FORMAT_NAMES),
         "the prompt layout: this project's plain one, the authors' exact one, their short-answer one, or the plain "
         'one with a worked example first (offline readers, unless given)'),
        (('--samples',), 'samples', dict(type=number(int, 1), metavar='N'), 'answers per prompt'),
        (('--seed',), 'seed', dict(type=number(int, 0), metavar='N'), 'the seed of sample 0; sample j uses seed + j'),
    ],
    'decoding': [
        (('--temperature',), 'temperature', dict(type=number(float, 0), metavar='T'), '0: greedy'),
        (('--top-k',), 'top_k', dict(type=or_none(number(int, 0)), metavar='K'),
         "0: all tokens; 'none': not sent to a server"),
        (('--top-p',), 'top_p', dict(type=or_none(number(float, 0, exclusive=True, maximum=1)), metavar='P'),
         "nucleus sampling, in (0, 1]; 'none': off"),
        (('--min-p',), 'min_p', dict(type=or_none(number(float, 0, maximum=1)), metavar='P'),
         "keep the tokens at least P times as likely as the most likely, in [0, 1]; 'none': off"),
        (('--max-new-tokens',), 'max_new_tokens', dict(type=decoding_field('max_new_tokens'), metavar='N'),
         'tokens per answer'),
        (('--repetition-penalty',), 'repetition_penalty', dict(type=number(float, 0, exclusive=True), metavar='X'),
         'the repetition penalty: the score of every token already in the prompt or answer is lowered by a factor '
         'X (1: off); a model named with --reader gets none unless given'),
        (('--repeat-last-n',), 'repeat_last_n', dict(type=or_none(number(int, 1)), metavar='N'),
         "the penalty counts the last N tokens of prompt and answer (llama.cpp's window; vLLM has none); "
         "'none': every token"),
        (('--stop',), 'stop', dict(nargs='+', metavar='TEXT'),
         "stops besides the prompt's (STOP; authors-short: </answer> only); offline: the end of the answer's line"),
    ],
    'servers and engines': [
        (('--base-url',), 'base_urls', dict(nargs='+', metavar='URL'),
         f"{readers_taking('base_urls')}: the servers, each ending in /v1 (default http://127.0.0.1:8000/v1, "
         "llama.cpp's 8080)"),
        (('--concurrency',), 'concurrency', dict(type=number(int, 1), metavar='N'),
         f"{readers_taking('concurrency')}: requests in flight"),
        (('--endpoint',), 'endpoint', dict(choices=ENDPOINTS),
         f"{readers_taking('endpoint')}: the raw prompt (completions) or a chat message"),
        (('--timeout',), 'timeout', dict(type=number(float, 0, exclusive=True), metavar='SECONDS'),
         f"{readers_taking('timeout')}: seconds per request"),
        (('--max-retries',), 'max_retries', dict(type=number(int, 0), metavar='N'),
         f"{readers_taking('max_retries')}: retries of a failed request"),
        (('--retry-deadline',), 'retry_deadline', dict(type=number(float, 0, exclusive=True), metavar='SECONDS'),
         f"{readers_taking('retry_deadline')}: seconds after a prompt's first attempt when it is not tried again"),
        (('--tensor-parallel-size',), 'tensor_parallel_size', dict(type=number(int, 1), metavar='N'),
         f"{readers_taking('tensor_parallel_size')}: GPUs per model"),
        (('--chat-template',), 'chat_template', dict(action='store_true', default=None),
         f"{readers_taking('chat_template')}: wrap the prompt in the model's chat template"),
        (('--dtype',), 'dtype', dict(choices=DTYPE_CHOICES),
         f"{readers_taking('dtype')}: what the model computes in: auto (the offline Gemma on a CPU: exact; other "
         'models bfloat16 where the CPU computes it natively, else float32), exact (the offline Gemma with its '
         'products in integers: the same answers on every CPU), bfloat16 or float32'),
        (('--reproducible',), 'reproducible', dict(action='store_true', default=None),
         f"{readers_taking('reproducible')}: compute every answer alone (one sequence or request at a time per "
         'engine, no cached prefix reused), so fresh generation gives the same answers on every run'),
    ],
    'ray': [
        (('--ray',), 'ray', dict(type=ray_address, metavar='ADDRESS'),
         "generate on a Ray cluster: 'auto' (the one this host is a node of, started with ray start), 'local' (a "
         f'new one here, on 127.0.0.1) or HOST:PORT (for auto and HOST:PORT the run stops, naming the address, when '
         f'nothing there answers within {RAY_CONNECT_TIMEOUT} s); the same answers and tables as in process (default: '
         'in process)'),
        (('--replicas',), 'replicas', dict(type=number(int, 1), metavar='N'),
         "copies of the reader: with --ray, each in a Ray actor of its own (default: 1); without it, a reader "
         "computed on this CPU (offline, huggingface:) runs as N threads of one torch thread each, the model "
         'held once, the answers those of one (default: one per core torch would use; 1: in this process on '
         "torch's threads)"),
        (('--replica-gpus',), 'replica_gpus', dict(type=number(float, 0), metavar='N'),
         'with --ray: GPUs per copy (default: 0; vllm: readers, --tensor-parallel-size)'),
    ],
    'scoring and output': [
        (('--quality',), 'quality', dict(choices=QUALITIES_BY_NAME), quality_help),
        (('--judge',), 'judge', dict(metavar='READER'),
         'the judge of a quality graded by one (judge-docs, judge-gold, the nugget scores): a reader name, its '
         "answers in the study's generation cache (default: the first --reader)"),
        (('--nuggets',), 'nuggets', dict(metavar='FILE'),
         "the nuggets of a quality scored by them, in TREC RAG's JSONL format (a line per query: qid, query, "
         'nuggets, each with its text and importance, vital or okay; a study writes its own as nuggets.jsonl); '
         'default: the judge makes them from the relevant documents'),
        (('--scorer',), 'scorer', dict(metavar='MODEL'),
         "BERTScore model ('minilm' offline; the paper: bert-large-uncased)"),
        (('--submeasure',), 'submeasure', dict(choices=SUBMEASURES), "BERTScore's precision, recall or F1"),
        (('--agg',), 'agg', dict(choices=AGGREGATIONS), 'BERTScore over the references: the best or the mean'),
        (('--utility',), 'utility', dict(choices=UTILITY_GAINS),
         'utility U: the relative gain (P_k - P_0) / P_0 (the paper\'s) or the absolute gain P_k - P_0, in Table 1 and '
         "its t-tests, the figures and the report (default: relative; report: the gain the study was run with)"),
        (('--ndcg-order',), 'ndcg_order', dict(choices=NDCG_ORDERS),
         'nDCG@k of a reversed system: the contexts as the reader sees them, or the retrieval order'),
        (('--correction',), 'correction', dict(choices=CORRECTIONS),
         'a multiple-testing correction of the t-tests'),
        (('--min-n',), 'min_n', dict(type=number(int, 1), metavar='N'),
         'the fewest paired queries a significance mark is given on'),
        (('--fig4-k',), 'fig4_k', dict(type=checked(check_k), metavar='K'),
         'the k of Figure 4, the nDCG@k against utility scatter'),
        (('--out',), 'out', dict(metavar='FOLDER'), 'the folder the results are written to'),
        (('--title',), 'title', dict(metavar='TEXT'), "report.html's title (default: the output folder's name)"),
        (('--verbose',), 'verbose', dict(action='store_true', default=None),
         'keep third-party logs (PISA, transformers, ir_datasets)'),
    ],
    'prediction': [
        (('--predict',), 'predict', dict(action='store_true'),
         'then the predict command over the study folder, with its defaults: signals.csv, prediction.csv and the '
         "report's section on what predicts utility"),
        (('--out',), 'out', dict(required=True, metavar='STUDY_DIR'), 'the study folder, read and written into'),
        (('--folds',), 'folds', dict(type=number(int, 2), metavar='N'),
         'folds of the out-of-fold linear regression (KFold over queries)'),
        (('--seed',), 'seed', dict(type=number(int, 0), metavar='N'), 'the seed of the folds and of the bootstrap'),
        (('--resamples',), 'n_resamples', dict(type=number(int, 1), metavar='N'),
         'bootstrap resamples per 95%% interval'),
        (('--apair-k',), 'apair_k', dict(type=number(int, 2), metavar='N'),
         "A-Pair-Ratio's documents per query (each encoded once by the MiniLM encoder)"),
        (('--perplexity',), 'perplexity', dict(action='store_true'),
         "also the reader's perplexity of each context (its model loaded here, in process; one forward pass per "
         'document and context, nothing generated)'),
        (('--udcg',), 'udcg', dict(action='store_true'),
         "also UDCG of each context: the reader's probability of answering NO-RESPONSE from each document alone "
         '(its model loaded here; one prefill per query and document, nothing generated), relevant documents '
         'adding, others taking away'),
        (('--combine',), 'combine', dict(nargs='+', metavar='SIGNAL'),
         'the signals the linear regression combines, each system over those that apply to it; one that applies '
         f'to no system is refused (default: {" ".join(PREDICTION_COMBINATION)}, those that apply)'),
    ],
    'transfer': [
        (('--out',), 'out', dict(required=True, metavar='STUDY_DIR'),
         'the folder of a finished study of two or more readers, read and written into'),
        (('--transfer',), 'transfer', dict(action='store_true'),
         "then the transfer command over the study folder (two or more readers, one dataset): each document's "
         "utility for each reader, each reader's own oracle Util:<reader>, the transfer table and the report's "
         'section across readers'),
        (('--max-docs',), 'max_docs', dict(type=number(int, 1), metavar='N'),
         "the most pool documents per query (the systems' contexts at the largest k by rank, then the judged "
         f'documents by label; default: {POOL_CAP})'),
    ],
    'attribution': [
        (('--method',), 'method', dict(choices=ATTRIBUTION_METHODS, nargs='+', default=[ATTRIBUTION_METHODS[0]]),
         'one or more: exact Shapley (2^k coalitions, k <= 10); Shapley by permutation sampling, Kernel SHAP or '
         'truncated Monte Carlo, and ContextCite (each with --budget, drawn with --seed); leave-one-out; each '
         'document alone. Their coalitions are answered once for all (default: shapley)'),
        (('--budget',), 'budget', dict(type=number(int, 2), metavar='N'),
         'coalitions per context for the sampling methods (permutation, kernelshap, tmc, contextcite), which '
         'need it: the empty and the whole context among them (default: none)'),
        (('--evaluate',), 'evaluate', dict(type=number(int, 1), metavar='N'),
         'judge each method on N held-out coalitions per context (its LDS), and against exact Shapley where '
         f'k <= {MAX_REFERENCE_K}: attribution_quality.csv (default: none)'),
    ],
    'report': [
        (('folders',), 'folders', dict(nargs='+'), 'study folders; several (e.g. one per dataset) make one table'),
        (('--html',), 'html', dict(action='store_true'), "also the folder's browsable report.html (one file, offline)"),
    ],
}


def format_value(value) -> str:
    """A setting's value as the command line would give it: 'none' for unset, a text with spaces
    quoted."""
    if isinstance(value, tuple):
        return ' '.join(map(format_value, value)) or 'none'
    if isinstance(value, LabelSet):  # as LabelSet.parse reads it: '2', '2,3', 'label in {3}'
        labels = sorted(value.exact or ())
        return str(value.minimum) if value.minimum is not None else \
            ','.join(map(str, labels)) if len(labels) > 1 else repr(str(value))
    if value == '\n':  # a stop at the end of a line: no shell gives it, and reStructuredText drops a backslash
        return '<newline>'
    if isinstance(value, str):
        return value if value and value.isprintable() and ' ' not in value else repr(value)
    return 'none' if value is None else str(value)


#: The groups of :data:`OPTIONS` that give a study's settings: the running commands show them under
#: their titles, and each option of them states the default of the command's config.
SETTINGS = ('data', 'systems', 'reader', 'decoding', 'servers and engines', 'ray', 'scoring and output')
#: Options that say where the reader runs, not what is computed (a study gives the same answers and
#: tables in process and on Ray): the command hands them to the driver (:func:`placement`), not to the
#: config.
PLACEMENT = tuple(f.name for f in dataclasses.fields(Placement))
#: The study's options that a command does not take.
LEFT_OUT = {'study': (),
            'experiment': ('runs', 'cosmix_threshold', 'fig4_k', 'figure_ks', 'ndcg_order', 'correction', 'min_n',
                           'title') + PLACEMENT,
            'attribute': ('figure_ks', 'orderings', 'no_reverse', 'windows', 'window_grid', 'fig4_k', 'ndcg_order',
                          'correction', 'min_n', 'title', 'utility') + PLACEMENT}


#: A command's options: (heading, group of :data:`OPTIONS`, the fields taken from it), in --help's order.
Layout = List[Tuple[Optional[str], str, Tuple[str, ...]]]


def _running(command: str, *own: Tuple[str, Tuple[str, ...]]) -> Layout:
    """A running command's options: --preset, the study's settings less those :data:`LEFT_OUT`, then
    the groups of its own."""
    settings = [(title, title, tuple(field for _, field, _, _ in OPTIONS[title] if field not in LEFT_OUT[command]))
                for title in SETTINGS]
    return [(None, 'preset', ('preset',)), *settings, *((title, title, fields) for title, fields in own)]


#: Each command's options (:data:`Layout`); the heading ``None``: argparse's own 'options' and
#: 'positional arguments'. The commands that read a finished folder share the study's options where
#: they have them.
COMMANDS: Dict[str, Layout] = {
    'study': _running('study', ('prediction', ('predict',)), ('transfer', ('transfer', 'max_docs'))),
    'experiment': _running('experiment'),
    'attribute': _running('attribute', ('attribution', ('method', 'budget', 'evaluate'))),
    'report': [(None, 'report', ('folders',)),
               (None, 'scoring and output', ('out', 'utility', 'correction', 'fig4_k', 'min_n')),
               (None, 'report', ('html',)), (None, 'scoring and output', ('ndcg_order',))],
    'transfer': [(None, 'transfer', ('out', 'max_docs'))],
    'predict': [(None, 'prediction', ('out', 'folds', 'seed', 'n_resamples', 'apair_k', 'perplexity', 'udcg',
                                      'combine'))],
}


def option(group: str, field: str) -> Tuple[Tuple[str, ...], str, Dict[str, Any], str]:
    """The option of :data:`OPTIONS` in ``group`` that sets ``field``, its help read now."""
    flags, name, kwargs, text = next(entry for entry in OPTIONS[group] if entry[1] == field)
    return flags, name, kwargs, text() if callable(text) else text


def _given(args: argparse.Namespace, fields) -> dict:
    """The options among ``fields`` given explicitly on the command line, lists as tuples."""
    values = {name: getattr(args, name, None) for name in fields}
    return {name: tuple(value) if isinstance(value, list) else value for name, value in values.items()
            if value is not None}


def explicit_settings(args: argparse.Namespace) -> dict:
    """The settings given explicitly on the command line, as config fields."""
    fields = [field for title in SETTINGS for _, field, _, _ in OPTIONS[title] if field not in PLACEMENT]
    out = _given(args, fields)
    out.update({name: None for name in FIELDS if out.get(name) == NOT_SENT})
    if out.pop('no_reverse', None):
        out['orderings'] = ('original',)
    return out


def placement(args: argparse.Namespace) -> Placement:
    """Where the reader runs: on this machine (as --replicas threads), or on the Ray cluster given with
    --ray (its --replicas and their --replica-gpus); a :class:`SettingError` for --replica-gpus without --ray."""
    given = _given(args, PLACEMENT)
    if 'replica_gpus' in given and 'ray' not in given:
        raise SettingError(f"{option('ray', 'replica_gpus')[0][-1]} needs --ray")
    return Placement(**given)


def transfer_max_docs(args: argparse.Namespace) -> Optional[int]:
    """The pool's cap given to the ``transfer`` command, or to ``study --transfer`` (``None``: its default,
    :data:`~pyterrier_utility.vocabulary.POOL_CAP`); a :class:`SettingError` for a study's --max-docs
    without --transfer."""
    if args.command == 'study' and not args.transfer and args.max_docs is not None:
        raise SettingError('--max-docs needs --transfer')
    return args.max_docs


def prediction_parameters(args: argparse.Namespace) -> PredictionParameters:
    """The ``predict`` command's settings: those given explicitly, over their defaults."""
    return PredictionParameters(**_given(args, [f.name for f in dataclasses.fields(PredictionParameters)]))
