"""The command line's options, declared once (:mod:`pyterrier_utility._options`): every command's
parser holds exactly the table's options it takes, the commands that read a finished folder share
the study's, and parsed arguments become the library's values through the table."""
import argparse

import pytest

from pyterrier_utility import _options, cli
from pyterrier_utility.errors import SettingError
from pyterrier_utility.prediction.parameters import PredictionParameters
from pyterrier_utility.settings import Decoding, Placement
from pyterrier_utility.study import config as cfg
from pyterrier_utility.study.config_json import from_dict
from pyterrier_utility.study.presets import PRESETS, REPORT


def _commands():
    return cli.parser()._subparsers._group_actions[0].choices


def _actions(command: str):
    """The command's arguments by field, -h left out."""
    return {a.dest: a for a in _commands()[command]._actions if not isinstance(a, argparse._HelpAction)}


def test_every_command_takes_exactly_the_table_options_it_lists_and_each_once():
    assert set(_commands()) == set(_options.COMMANDS)
    for command, parser in _commands().items():
        listed = [_options.option(group, field) for _, group, fields in _options.COMMANDS[command] for field in fields]
        assert [(a.option_strings or [a.dest], a.dest) for a in parser._actions[1:]] == \
               [(list(flags), field) for flags, field, _, _ in listed], command
    for group, options in _options.OPTIONS.items():
        fields = [field for _, field, _, _ in options]
        assert len(fields) == len(set(fields)), group


@pytest.mark.parametrize('field', ['correction', 'min_n', 'fig4_k', 'ndcg_order'])
def test_report_shares_the_study_options_it_has(field):
    study, report = _actions('study')[field], _actions('report')[field]
    for name in ('option_strings', 'type', 'choices', 'metavar', 'nargs', 'default', 'help'):
        assert getattr(report, name) == getattr(study, name), name
    # The same flag and meaning; each command says its own default folder.
    assert _actions('study')['out'].help == 'the folder the results are written to (default: results/study)'
    assert _actions('report')['out'].help == 'the folder the results are written to (default: results/report)'


def test_report_resolves_its_options_over_the_studys_defaults():
    def report(*argv):
        args = cli.parser().parse_args(['report', 'folder', *argv])
        return REPORT.replace(**cli.explicit_settings(args))
    defaults = report()
    assert (defaults.out, defaults.correction, defaults.fig4_k, defaults.min_n, defaults.ndcg_order) == \
           ('results/report', None, 5, 5, 'context')
    given = report('--out', 'o', '--correction', 'holm', '--fig4-k', '3', '--min-n', '2', '--ndcg-order', 'retrieval')
    assert (given.out, given.correction, given.fig4_k, given.min_n, given.ndcg_order) == \
           ('o', 'holm', 3, 2, 'retrieval')


def test_predict_maps_its_options_to_the_prediction_settings_through_the_table():
    def settings(*argv):
        return cli.prediction_parameters(cli.parser().parse_args(['predict', '--out', 'folder', *argv]))
    assert settings() == PredictionParameters()
    assert settings('--folds', '3', '--seed', '7', '--resamples', '50', '--apair-k', '4', '--perplexity', '--udcg',
                    '--combine', 'spatial', 'max_score') == \
        PredictionParameters(folds=3, seed=7, n_resamples=50, apair_k=4, perplexity=True, udcg=True,
                           combine=('spatial', 'max_score'))
    assert _actions('predict')['n_resamples'].option_strings == ['--resamples']


def test_the_ray_options_become_one_placement():
    def placement(*argv):
        return cli.placement(cli.parser().parse_args(['study', *argv]))
    assert placement() == Placement() and Placement().ray is None and Placement().replicas is None
    assert placement('--ray', 'local', '--replicas', '3', '--replica-gpus', '0.5') == \
        Placement(ray='local', replicas=3, replica_gpus=0.5)
    assert placement('--replicas', '2') == Placement(replicas=2)
    with pytest.raises(SettingError, match='^--replica-gpus needs --ray$'):
        placement('--replicas', '2', '--replica-gpus', '1')
    with pytest.raises(SettingError, match='replicas must be an integer >= 1, got 0'):
        Placement(replicas=0)
    assert 'ray' not in cli.explicit_settings(cli.parser().parse_args(['study', '--ray', 'auto']))


def _cli_error(capsys, *argv) -> str:
    """The message the command line's parser prints for ``argv`` (after 'argument -k: ')."""
    with pytest.raises(SystemExit):
        cli.parser().parse_args(['study', *argv])
    return capsys.readouterr().err.strip().splitlines()[-1].split(': ', 3)[-1]


def _api_error(call) -> str:
    with pytest.raises(SettingError) as caught:
        call()
    return str(caught.value).split(': ', 1)[1]


def _run_study(**settings):
    import pandas as pd

    from pyterrier_utility.study.sweep import run_study
    topics = pd.DataFrame({'qid': ['1'], 'query': ['q']})
    qrels = pd.DataFrame({'qid': ['1'], 'docno': ['d'], 'label': [2]})
    return run_study(topics, qrels, {}, None, {}, **settings)


@pytest.mark.parametrize('k, text', [(0, '0'), (True, 'True'), (2.5, '2.5'), (-3, '-3')])
def test_a_bad_k_is_refused_by_one_rule_with_one_message_by_the_cli_the_config_and_the_study(capsys, k, text):
    said = f'k must be an integer >= 1, got {k!r}'
    assert _api_error(lambda: cfg.StudyConfig(ks=(3, k))) == said
    assert _api_error(lambda: cfg.StudyConfig(figure_ks=(k,))) == said
    assert _api_error(lambda: cfg.StudyConfig(fig4_k=k)) == said
    assert _api_error(lambda: _run_study(ks=[k])) == said
    from pyterrier_utility.contexts.order import GridWindow, Window, permutations
    for call in (lambda: Window(6, k), lambda: GridWindow(-1, k), lambda: permutations(k)):
        assert _api_error(call) == said
    # The command line reads '2.5' as the number 2.5; 'True' stays text.
    for flag in ('-k', '--figure-k', '--fig4-k'):
        assert _cli_error(capsys, flag, text) == (said if k is not True else "k must be an integer >= 1, got 'True'")


@pytest.mark.parametrize('start', [1, 0, 2.5, True])
def test_a_bad_window_is_refused_by_one_rule_with_one_message_by_the_cli_the_config_and_the_study(capsys, start):
    said = f'window must be a start rank >= 2 (the top k is always there) or a tail window <= -1, got {start!r}'
    assert _api_error(lambda: cfg.StudyConfig(windows=(6, start))) == said
    assert _api_error(lambda: _run_study(windows=[start])) == said
    if start is not True:
        assert _cli_error(capsys, '--windows', '6', str(start)) == said


@pytest.mark.parametrize('value, text', [(0, '0'), (2.5, '2.5'), ('many', 'many')])
def test_a_bad_max_new_tokens_is_refused_by_decoding_with_one_message_on_the_cli_and_in_python(capsys, value, text):
    said = f'Decoding: max_new_tokens must be an integer >= 1, got {value!r}'
    with pytest.raises(SettingError) as caught:
        Decoding(max_new_tokens=value)
    assert str(caught.value) == said
    with pytest.raises(SystemExit):
        cli.parser().parse_args(['study', '--max-new-tokens', text])
    assert capsys.readouterr().err.strip().splitlines()[-1].endswith(f'argument --max-new-tokens: {said}')
    assert cli.parser().parse_args(['study', '--max-new-tokens', '7']).max_new_tokens == 7


@pytest.mark.parametrize('system', ['Dense', 'bm25', 'COSMIX'])
def test_an_unknown_system_is_refused_by_one_rule_with_one_message_by_the_cli_the_config_and_settings_json(
        capsys, system):
    """A notebook gives run_study its systems as transformers, under any name; a built-in system is
    named in the study's config, however it is made: the command line, StudyConfig, a preset
    changed, a settings.json read back."""
    said = f"system must be one of ['BM25', 'Neural', 'Rel', 'NRel', 'COSMix'], got {system!r}"
    assert _api_error(lambda: cfg.StudyConfig(systems=('BM25', system))) == said
    assert _api_error(lambda: PRESETS['paper'].replace(systems=(system,))) == said
    assert _api_error(lambda: from_dict({'systems': ['Rel', system]})) == said
    assert _cli_error(capsys, '--systems', 'BM25', system) == said


def test_a_window_is_a_deeper_start_rank_or_a_tail_window_alike_everywhere():
    config = cli.config_of(cli.parser().parse_args(['study', '--windows', '6', '-1']), cfg.StudyConfig())
    assert config.windows == (6, -1) == cfg.StudyConfig(windows=(6, -1)).study_windows


def test_figure_4_is_drawn_at_fig4_k_where_it_was_answered_else_at_table_1s_largest_k():
    assert cfg.figure4_k(5, answered=(1, 3, 5), table_ks=(1, 3)) == 5
    assert cfg.figure4_k(5, answered=(1, 3, 10), table_ks=(1, 3)) == 3
