"""The ``pyterrier-utility`` command: ``study`` (the k-sweep of the paper), ``experiment`` (one k in
pt.Experiment), ``attribute`` (each context document's share of U) and ``report`` (tables and figures
again from saved results).

The command line only parses: what is given explicitly, over ``--preset`` or the command's
defaults, becomes a :class:`~pyterrier_utility.study.config.StudyConfig` (validated once,
printed at the start and written whole to ``settings.json``), and the library runs it.
"""
import argparse
import sys
import textwrap
from pathlib import Path
from typing import Optional

from ._options import (
    COMMANDS,
    SETTINGS,
    explicit_settings,
    format_value,
    option,
    placement,
    prediction_parameters,
    transfer_max_docs,
)
from .errors import UtilityError
from .prediction.parameters import PredictionParameters
from .settings import FIELDS
from .study import presets
from .study.config import StudyConfig
from .study.merge import resolve

#: The exit status of a command stopped by Ctrl-C, as a shell gives it (128 + SIGINT).
INTERRUPTED = 130
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
    'experiment': 'Evaluates the systems at one k in pt.Experiment: nDCG@k, P_k and P_0 named for the quality '
                  '(FBERT and FBERT0 by default) and Utility, with t-tests against Rel.',
    'attribute': "Splits each context's utility U among its documents: the answer quality of the reader's answer "
                 'from every coalition of the context, and each document\'s Shapley value (or leave-one-out, or '
                 'each alone) of it. In a study folder it reuses the study\'s answers.',
}


def _value(config: StudyConfig, field: str):
    return getattr(config.decoding if field in FIELDS else config, field, None)


def _add_options(parser: argparse.ArgumentParser, command: str, base: Optional[StudyConfig] = None) -> None:
    """The options of ``command`` (:data:`~pyterrier_utility._options.COMMANDS`), in their groups; the
    default of a study's setting taken from ``base``, the command's config, and stated once (an
    option whose help already says its default, or a flag, gets none added)."""
    for heading, group, fields in COMMANDS[command]:
        target = parser if heading is None else parser.add_argument_group(heading)
        for flags, field, kwargs, text in (option(group, field) for field in fields):
            flag = kwargs.get('action') in ('store_true', 'append')
            note = '' if base is None or group not in SETTINGS or flag or 'default' in text else \
                f' (default: {format_value(_value(base, field))})'
            named = dict(kwargs, dest=field) if flags[0].startswith('-') else kwargs  # a positional's dest: its name
            target.add_argument(*flags, help=text + note, **named)


def preset_note(base: StudyConfig, command: str) -> str:
    """The settings ``--preset paper`` changes from the command's defaults, as the options that give them."""
    paper = presets.PAPER
    changed = [f'{flags[-1]} {format_value(_value(paper, field))}'
               for _, group, fields in COMMANDS[command] if group in SETTINGS
               for flags, field, kwargs, _ in (option(group, field) for field in fields)
               if field != 'out' and kwargs.get('action') is None and _value(paper, field) != _value(base, field)]
    return '--preset paper sets: ' + ', '.join(changed) + '.'


def config_of(args: argparse.Namespace, base: StudyConfig) -> StudyConfig:
    """The run's config: what is given explicitly, over the preset, over the command's defaults."""
    base = presets.PRESETS[args.preset] if args.preset else base
    return resolve(base, explicit_settings(args))


def report(args) -> int:
    """Tables and figures again from saved per_query.csv files: nothing is generated."""
    from .commands import main as commands  # after parsing: --help needs no PyTerrier nor torch
    given = explicit_settings(args)
    config = presets.REPORT.replace(**given)
    commands.report(args.folders, Path(config.out), correction=config.correction, fig4_k=config.fig4_k,
                    ndcg_order=config.ndcg_order, html=args.html, min_n=config.min_n, gain=given.get('utility'))
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
    for name, base, text in (('study', StudyConfig(), 'the k-sweep: Table 1 with significance marks, '
                                                      'Figures 3-5, per-query CSV'),
                             ('experiment', presets.EXPERIMENT, 'nDCG@k, P and Utility of the systems at one k '
                                                               'in pt.Experiment'),
                             ('attribute', presets.ATTRIBUTE, "each context document's share of U (Shapley values "
                                                              'of the answer quality over the coalitions of the '
                                                              'context)')):
        examples = ATTRIBUTE_EXAMPLE if name == 'attribute' else EXAMPLE
        epilog = textwrap.fill(preset_note(base, name), 79) + '\n\n' + examples
        command = sub.add_parser(name, help=text, description=textwrap.fill(DESCRIPTIONS[name], 79), epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_options(command, name, base)
        command.set_defaults(base=base)
    rep = sub.add_parser('report',
                         help='Table 1 and Figures 3-5 again from saved per_query.csv files, generating nothing',
                         description=textwrap.fill('Writes Table 1, the correlations and Figures 3-5 again from '
                                                   'the per_query.csv files of saved studies, generating nothing; '
                                                   'several folders (e.g. one study per dataset) make one table.', 79),
                         epilog='example:\n\n  pyterrier-utility report results/study --out results/report --html',
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(rep, 'report', presets.REPORT)
    transfer_parser = sub.add_parser(
        'transfer', help="whose utility is it: each document's utility for each reader of a finished study of two "
                         "or more readers, each reader's own utility oracle (Util:<reader>) beside Rel, every reader "
                         'on every oracle, and how far their utility agrees; generates only what the folder lacks',
        epilog='example:\n\n  pyterrier-utility study --reader gemma3-270m smollm2-135m --queries 5 -k 1 3 '
               '--out results/readers\n  pyterrier-utility transfer --out results/readers',
        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_options(transfer_parser, 'transfer')
    predict_parser = sub.add_parser('predict', help='which signals predict U, P_k - P_0 and P_k in a finished study '
                                                    'folder (query-performance predictors, readability, IR measures, '
                                                    "the reader's confidence): signals.csv and prediction.csv, "
                                                    'generating nothing')
    _add_options(predict_parser, 'predict')
    return main_parser


def predict(args) -> int:
    """Signals and their correlations with the targets from a saved study folder: nothing is generated."""
    from .commands import predicting  # after parsing: --help needs no PyTerrier nor torch
    predicting.predict(args.out, prediction_parameters(args))
    return 0


def main(argv=None) -> int:
    """Runs the command ``argv`` gives (default: the process's); its exit status: 0, 2 for a setting
    refused (one line saying why), :data:`INTERRUPTED` for a run stopped by Ctrl-C (one line saying what
    is kept)."""
    args = parser().parse_args(argv)
    from pyterrier.validate import InputValidationError  # after parsing: --help needs no PyTerrier nor torch
    try:
        if not getattr(args, 'verbose', False):
            quiet_third_parties()
        from .commands import main as commands  # where a torchvision that does not load beside torch is named
        if args.command == 'report':
            return report(args)
        if args.command == 'predict':
            return predict(args)
        if args.command == 'transfer':
            commands.transfer(args.out, transfer_max_docs(args), argv=sys.argv[1:] if argv is None else list(argv))
            return 0
        config = config_of(args, args.base)
        given_argv = sys.argv[1:] if argv is None else list(argv)
        if args.command == 'study':
            commands.study(config, argv=given_argv, prediction=PredictionParameters() if args.predict else None,
                           placement=placement(args), with_transfer=args.transfer,
                           transfer_max_docs=transfer_max_docs(args))
        elif args.command == 'attribute':
            commands.attribute(config, args.method, args.budget, argv=given_argv, evaluate=args.evaluate)
        else:
            commands.experiment(config, argv=given_argv)
        return 0
    except (UtilityError, InputValidationError) as e:
        parser().exit(2, f'pyterrier-utility {args.command}: error: {e}\n')
    except KeyboardInterrupt:
        from .commands.main import interrupted
        print(interrupted(args.command, getattr(args, 'out', None)), file=sys.stderr)
        return INTERRUPTED


if __name__ == '__main__':
    sys.exit(main())
