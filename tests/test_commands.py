"""The commands' one preparation (:mod:`pyterrier_utility.study.preparation`), the readers it builds
(:mod:`pyterrier_utility.study.readers`) and ``study
--predict``: the study and the predict command over its folder in one run."""
import json

import pandas as pd
import pytest
from support.backends import CountingBackend
from support.interrupt import interrupt_command

import pyterrier_utility as pu
from pyterrier_utility import cli
from pyterrier_utility.commands import main as commands
from pyterrier_utility.errors import SettingError
from pyterrier_utility.settings import Placement
from pyterrier_utility.study import StudyConfig, preparation, readers


def test_prepare_gives_each_command_its_collection_readers_record_and_scorer(tmp_path, monkeypatch):
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    config = StudyConfig(queries=2, ks=(1,), samples=1, systems=('Rel',), quality='fbert-docs', out=str(tmp_path))
    prepared = preparation.prepare(config, 'experiment', ['experiment'])
    collection = prepared.collections['cranfield']
    assert len(collection.topics) == 2 and collection.config == config
    assert set(prepared.readers) == set(config.readers)
    assert prepared.record['command'] == 'experiment' and prepared.record['argv'] == ['experiment']
    assert prepared.record['studied_as'] == {}  # Cranfield is studied as the config says
    systems = prepared.systems(collection, prepared.readers[config.readers[0]])
    assert list(systems) == ['Rel']
    scorer = prepared.scorer_for(collection)(config.label_sets[0])
    assert isinstance(scorer, pu.FBertScorer)
    assert prepared.bertscore is not None and scorer.bertscore is prepared.bertscore  # loaded once, shared


def test_study_predict_refuses_several_datasets_or_readers_before_running(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError('the study ran')
    monkeypatch.setattr(commands, 'run', refuse)
    with pytest.raises(SystemExit) as stopped:
        cli.main(['study', '--predict', '--reader', 'gemma3-270m', 'smollm2-135m', '--out', str(tmp_path)])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.count('\n') == 0 and '--predict reads a study of one dataset and one reader' in error
    assert "readers ['gemma3-270m', 'smollm2-135m']" in error


@pytest.mark.slow
def test_study_predict_writes_the_study_then_its_signals_and_prediction(tmp_path, monkeypatch, capsys):
    backend = CountingBackend(logprobs=True)
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: backend)
    assert cli.main(['study', '--predict', '--systems', 'BM25', 'Rel', '--no-reverse', '-k', '2', '--queries', '5',
                     '--samples', '1', '--labels', '2', '--out', str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert printed.index('Mean utility') < printed.index("Spearman's rho") and '0 answers generated' in printed
    per_query = pd.read_csv(tmp_path / 'per_query.csv', dtype={'qid': str})
    signals = pd.read_csv(tmp_path / 'signals.csv', dtype={'qid': str})
    assert len(signals) == len(per_query) == 2 * 5
    assert (tmp_path / 'prediction.csv').is_file()
    settings = json.loads((tmp_path / 'settings.json').read_text())
    assert settings['command'] == 'study'
    assert settings['prediction']['folds'] == pu.prediction.parameters.PredictionParameters().folds
    assert 'id="prediction"' in (tmp_path / 'report.html').read_text()


def test_build_reader_puts_the_backend_where_the_placement_says(monkeypatch):
    built = []
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: built.append(('here', spec)) or
                        CountingBackend())
    monkeypatch.setattr(pu.backends, 'RayBackend', lambda spec, replicas, num_gpus, address, **kw:
                        built.append(('ray', spec, replicas, num_gpus, address)) or CountingBackend())
    monkeypatch.setattr(pu.backends, 'ThreadBackend', lambda spec, replicas, **kw:
                        built.append(('threads', spec, replicas)) or CountingBackend())
    config = StudyConfig()
    for threads in (1, 2):
        monkeypatch.setattr(pu.backends, 'cpu_replicas', lambda: threads)
        readers.build_reader(config, 'gemma3-270m')
    readers.build_reader(config, 'gemma3-270m', placement=Placement(replicas=1))
    readers.build_reader(config, 'gemma3-270m', placement=Placement(replicas=3))
    readers.build_reader(config, 'gemma3-270m', placement=Placement(ray='auto', replicas=2, replica_gpus=0.5))
    readers.build_reader(config, 'openai:m', placement=Placement())
    assert built == [('here', 'gemma3-270m'), ('threads', 'gemma3-270m', 2), ('here', 'gemma3-270m'),
                     ('threads', 'gemma3-270m', 3), ('ray', 'gemma3-270m', 2, 0.5, 'auto'), ('here', 'openai:m')]
    with pytest.raises(SettingError, match="replicas are for readers computed on this CPU.*'openai:m'"):
        readers.build_reader(config, 'openai:m', placement=Placement(replicas=2))


def test_a_command_stopped_by_ctrl_c_says_in_one_line_what_is_kept_and_exits_130(tmp_path, monkeypatch, capsys):
    path = tmp_path / 'generations.sqlite'
    pu.GenerationCache(CountingBackend(), path).generate(['a', 'b', 'c'])

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    for name in ('study', 'attribute', 'report'):
        monkeypatch.setattr(commands, name, interrupted)
    assert cli.main(['study', '--out', str(tmp_path)]) == 130
    assert capsys.readouterr().err == (f'pyterrier-utility study: interrupted; 3 answers are kept in {path}, and the '
                                       'same command goes on from them\n')
    assert cli.main(['attribute', '--out', str(tmp_path / 'new')]) == 130
    assert capsys.readouterr().err == (f'pyterrier-utility attribute: interrupted; 0 answers are kept in '
                                       f'{tmp_path / "new" / "generations.sqlite"}, and the same command goes on from '
                                       'them\n')
    assert cli.main(['report', str(tmp_path), '--out', str(tmp_path / 'report')]) == 130
    assert capsys.readouterr().err == ('pyterrier-utility report: interrupted; it generates nothing, and the same '
                                       'command writes its files again\n')


#: The child's reader and scorer: the counting backend in this process; the scorer marks that it has begun
#: (a file), then encodes slowly.
SLOW_SCORING = '''
from pathlib import Path
from support.backends import CountingBackend
from pyterrier_utility.scoring.bertscore import BertScore
pu.backends.get_backend = lambda name, **options: CountingBackend()
embed = BertScore.embed
def slow(self, texts, verbose=None):
    Path({marker!r}).touch()
    time.sleep(60)
    return embed(self, texts, verbose)
BertScore.embed = slow
'''


@pytest.mark.slow
def test_ctrl_c_while_a_study_scores_stops_it_in_one_line_keeping_every_answer(tmp_path):
    out, marker = tmp_path / 'study', tmp_path / 'scoring'
    argv = ['study', '--systems', 'Rel', '--no-reverse', '-k', '1', '--queries', '2', '--samples', '2', '--labels',
            '2', '--replicas', '1', '--out', str(out)]
    done = interrupt_command(argv, SLOW_SCORING.format(marker=str(marker)), marker.exists)
    assert done.returncode == 130, done.stderr[-6000:]
    assert done.after == [f'pyterrier-utility study: interrupted; 8 answers are kept in {out}/generations.sqlite, '
                          'and the same command goes on from them'], done.stderr[-6000:]
    assert done.seconds < 5, done.stderr[-6000:]
    assert not (out / 'per_query.csv').exists()


@pytest.mark.slow
def test_ctrl_c_while_a_study_writes_its_files_leaves_the_last_runs_files_whole(tmp_path, monkeypatch, capsys):
    """The second run of a study is interrupted after its tables are written, while it draws its figures:
    it exits 130 in one line, and the folder holds the first run's files, byte for byte, and no staging folder."""
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    argv = ['study', '--systems', 'Rel', '--no-reverse', '-k', '1', '--queries', '2', '--samples', '1', '--labels', '2',
            '--out', str(tmp_path)]
    assert cli.main(argv) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.suffix in ('.csv', '.md', '.json')}
    capsys.readouterr()

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(pu.report.figures, 'draw_figures', interrupted)
    assert cli.main([*argv[:-2], '--seed', '5', '--out', str(tmp_path)]) == 130
    # Its 4 answers (another seed) beside the first run's 4.
    assert capsys.readouterr().err.splitlines()[-1] == (f'pyterrier-utility study: interrupted; 8 answers are kept in '
                                                        f'{tmp_path / "generations.sqlite"}, and the same command goes '
                                                        'on from them')
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name in before} == before
    assert not list(tmp_path.glob('.staging-*'))
