"""The ``pyterrier-utility`` command: ``study`` (the k-sweep of the paper), ``experiment`` (one k in
pt.Experiment), ``attribute`` (each context document's share of U) and ``report`` (tables and figures
again from saved results).

The command line only parses: what is given explicitly, over ``--preset`` or the command's
defaults, becomes a :class:`~pyterrier_utility.experiment.config.StudyConfig` (validated once,
printed at the start and written whole to ``settings.json``), and the library runs it.
"""
import argparse
import sys
import textwrap
from pathlib import Path

from ._options import LEFT_OUT, OPTIONS, explicit_settings, format_value, number, placement
from .errors import UtilityError
from .experiment import config as cfg
from .prediction.settings import PredictionSettings
from .settings import FIELDS
from .vocabulary import ATTRIBUTION_METHODS, CORRECTIONS, NDCG_ORDERS, PREDICTION_COMBINATION

#: The first line of ``pyterrier-utility --help``.
DESCRIPTION = 'Context utility for PyTerrier: does the relevance a retriever achieves reach a RAG reader\'s answers?'
#: Read as reStructuredText by the documentation's page of the command (each line of a command at
#: the same indent), and as it is by ``--help``.
EXAMPLE = """examples:

  pyterrier-utility study --queries 3 -k 1 3 --samples 2 --out results/small

  pyterrier-utility study --preset paper --reader openai:meta-llama/Meta-Llama-3-8B-Instruct \\
  --base-url http://gpu1:8000/v1 --bm25 pisa"""
#: The attribution's own examples (its epilog).
ATTRIBUTE_EXAMPLE = """examples:

  pyterrier-utility attribute --systems BM25 Rel -k 4 --queries 2 --samples 2 --out results/attribution

  pyterrier-utility attribute -k 8 --method permutation --budget 64 --out results/attribution"""
#: What ``--help`` of each running command says first.
DESCRIPTIONS = {
    'study': 'Runs the k-sweep of the paper: every system cut at each k, answered by the reader 0-shot and '
             'k-shot, scored, and written as Table 1 (mean context utility U per system and k, with '
             'significance marks), Figures 3-5, per-query CSV files and report.html.',
    'experiment': 'Evaluates the systems at one k in pt.Experiment: nDCG@k, FBERT, FBERT0 and Utility, with '
                  't-tests against Rel.',
    'attribute': "Splits each context's utility U among its documents: the answer quality of the reader's answer "
                 'from every coalition of the context, and each document\'s Shapley value (or leave-one-out, or '
                 'each alone) of it. In a study folder it reuses the study\'s answers.',
}


def _value(config: cfg.StudyConfig, field: str):
    return getattr(config.decoding if field in FIELDS else config, field, None)


def _add_options(parser: argparse.ArgumentParser, base: cfg.StudyConfig, command: str) -> None:
    """The options of a running command, in groups, each default taken from ``base`` and stated once
    (an option whose help already says its default, or a flag, gets none added)."""
    parser.add_argument('--preset', choices=sorted(cfg.PRESETS),
                        help='every setting of the paper at once (its values are listed below the options); '
                             'options given explicitly override it')
    for title, options in OPTIONS.items():
        group = parser.add_argument_group(title)
        for flags, field, kwargs, text in options:
            if field in LEFT_OUT[command]:
                continue
            flag = kwargs.get('action') in ('store_true', 'append')
            note = '' if flag or 'default' in text else f' (default: {format_value(_value(base, field))})'
            group.add_argument(*flags, dest=field, help=text + note, **kwargs)


def preset_note(base: cfg.StudyConfig, command: str) -> str:
    """The settings ``--preset paper`` changes from the command's defaults, as the options that give them."""
    changed = [f'{flags[-1]} {format_value(_value(cfg.PAPER, field))}' for options in OPTIONS.values()
               for flags, field, kwargs, _ in options
               if field not in LEFT_OUT[command] and field != 'out' and kwargs.get('action') is None
               and _value(cfg.PAPER, field) != _value(base, field)]
    return '--preset paper sets: ' + ', '.join(changed) + '.'


def config_of(args: argparse.Namespace, base: cfg.StudyConfig) -> cfg.StudyConfig:
    """The run's config: what is given explicitly, over the preset, over the command's defaults."""
    base = cfg.PRESETS[args.preset] if args.preset else base
    return cfg.resolve(base, explicit_settings(args))


def report(args) -> int:
    """Tables and figures again from saved per_query.csv files: nothing is generated."""
    from .experiment import commands  # after parsing: --help needs no PyTerrier nor torch
    commands.report(args.folders, Path(args.out), correction=args.correction, fig4_k=args.fig4_k,
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
    main_parser = argparse.ArgumentParser(prog='pyterrier-utility', description=DESCRIPTION,
                                          epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = main_parser.add_subparsers(dest='command', required=True)
    for name, base, text in (('study', cfg.StudyConfig(), 'the k-sweep: Table 1 with significance marks, '
                                                          'Figures 3-5, per-query CSV'),
                             ('experiment', cfg.EXPERIMENT, 'nDCG@k, FBERT and Utility of the systems at one k '
                                                            'in pt.Experiment'),
                             ('attribute', cfg.ATTRIBUTE, "each context document's share of U (Shapley values of the "
                                                          'answer quality over the coalitions of the context)')):
        examples = ATTRIBUTE_EXAMPLE if name == 'attribute' else EXAMPLE
        epilog = textwrap.fill(preset_note(base, name), 79) + '\n\n' + examples
        command = sub.add_parser(name, help=text, description=textwrap.fill(DESCRIPTIONS[name], 79), epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_options(command, base, name)
        command.set_defaults(base=base)
    sub.choices['study'].add_argument_group('prediction').add_argument(
        '--predict', action='store_true',
        help='then the predict command over the study folder, with its defaults: signals.csv, prediction.csv and '
             "the report's section on what predicts utility")
    attribution = sub.choices['attribute'].add_argument_group('attribution')
    attribution.add_argument('--method', choices=ATTRIBUTION_METHODS, default=ATTRIBUTION_METHODS[0],
                             help='exact Shapley (2^k coalitions, k <= 10), Shapley by permutation sampling (with '
                                  '--budget; orders drawn with --seed), leave-one-out, or each document alone '
                                  '(default: %(default)s)')
    attribution.add_argument('--budget', type=number(int, 2), metavar='N',
                             help='coalition evaluations per context for --method permutation, which needs it: '
                                  'the empty and the whole context, then k - 1 per sampled order (default: none)')
    rep = sub.add_parser('report',
                         help='Table 1 and Figures 3-5 again from saved per_query.csv files, generating nothing',
                         description=textwrap.fill('Writes Table 1, the correlations and Figures 3-5 again from '
                                                   'the per_query.csv files of saved studies, generating nothing; '
                                                   'several folders (e.g. one study per dataset) make one table.', 79),
                         epilog='example:\n\n  pyterrier-utility report results/study --out results/report --html',
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument('folders', nargs='+', help='study folders; several (e.g. one per dataset) make one table')
    rep.add_argument('--out', default='results/report', metavar='FOLDER',
                     help='the folder the tables and figures are written to (default: %(default)s)')
    rep.add_argument('--correction', choices=CORRECTIONS,
                     help='a multiple-testing correction of the t-tests (default: none)')
    study = cfg.StudyConfig()  # the study's defaults are the report's
    rep.add_argument('--fig4-k', type=number(int, 1), default=study.fig4_k, metavar='K',
                     help='the k of Figure 4, the nDCG@k against utility scatter (default: %(default)s)')
    rep.add_argument('--min-n', type=number(int, 1), default=study.min_n, metavar='N',
                     help='the fewest paired queries a significance mark is given on (default: %(default)s)')
    rep.add_argument('--html', action='store_true', help="also the folder's browsable report.html (one file, offline)")
    rep.add_argument('--ndcg-order', choices=NDCG_ORDERS, default=study.ndcg_order,
                     help='how the study computed nDCG@k of reversed systems, for the figure labels '
                          '(default: %(default)s)')
    _add_predict(sub)
    return main_parser


def _add_predict(sub) -> None:
    """The ``predict`` command's parser: a finished study folder, the parameters of the signals'
    meta-evaluation."""
    defaults = PredictionSettings()
    command = sub.add_parser('predict', help='which signals predict U, P_k - P_0 and P_k in a finished study folder '
                                             '(query-performance predictors, readability, IR measures, the '
                                             "reader's confidence): signals.csv and prediction.csv, generating nothing")
    command.add_argument('--out', required=True, metavar='STUDY_DIR', help='the study folder, read and written into')
    command.add_argument('--folds', type=number(int, 2), default=defaults.folds, metavar='N',
                         help='folds of the out-of-fold linear regression (KFold over queries)')
    command.add_argument('--seed', type=number(int, 0), default=defaults.seed, metavar='N',
                         help='the seed of the folds and of the bootstrap')
    command.add_argument('--resamples', type=number(int, 1), default=defaults.n_resamples, metavar='N',
                         help='bootstrap resamples per 95%% interval')
    command.add_argument('--apair-k', type=number(int, 2), default=defaults.apair_k, metavar='N',
                         help="A-Pair-Ratio's documents per query (each encoded once by the MiniLM encoder)")
    command.add_argument('--perplexity', action='store_true',
                         help="also the reader's perplexity of each context (its model loaded here, in process; one "
                              'forward pass per document and context, nothing generated)')
    command.add_argument('--udcg', action='store_true',
                         help="also UDCG of each context: the reader's probability of answering NO-RESPONSE from "
                              'each document alone (its model loaded here; one prefill per query and document, '
                              'nothing generated), relevant documents adding, others taking away')
    command.add_argument('--combine', nargs='+', metavar='SIGNAL',
                         help='the signals the linear regression combines, each system over those that apply to '
                              'it; one that applies to no system is refused (default: '
                              f'{" ".join(PREDICTION_COMBINATION)}, those that apply)')


def predict(args) -> int:
    """Signals and their correlations with the targets from a saved study folder: nothing is generated."""
    from .experiment import commands  # after parsing: --help needs no PyTerrier nor torch
    combine = None if args.combine is None else tuple(args.combine)
    commands.predict(args.out, PredictionSettings(folds=args.folds, seed=args.seed, n_resamples=args.resamples,
                                                  apair_k=args.apair_k, combine=combine, perplexity=args.perplexity,
                                                  udcg=args.udcg))
    return 0


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from pyterrier.validate import InputValidationError  # after parsing: --help needs no PyTerrier nor torch
    try:
        if not getattr(args, 'verbose', False):
            quiet_third_parties()
        from .experiment import commands  # where a torchvision that does not load beside torch is named
        if args.command == 'report':
            return report(args)
        if args.command == 'predict':
            return predict(args)
        config = config_of(args, args.base)
        given_argv = sys.argv[1:] if argv is None else list(argv)
        if args.command == 'study':
            commands.study(config, argv=given_argv, prediction=PredictionSettings() if args.predict else None,
                           placement=placement(args))
        elif args.command == 'attribute':
            commands.attribute(config, args.method, args.budget, argv=given_argv)
        else:
            commands.experiment(config, argv=given_argv)
        return 0
    except (UtilityError, InputValidationError) as e:
        parser().exit(2, f'pyterrier-utility {args.command}: error: {e}\n')


if __name__ == '__main__':
    sys.exit(main())
