"""The output folder: one run at a time, one run's files."""
import json
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
from support.backends import CountingBackend

import pyterrier_utility as pu
from pyterrier_utility import cli
from pyterrier_utility.errors import SettingError
from pyterrier_utility.study.output import LOCK, STAGING

ARGV = ['study', '--queries', '2', '--systems', 'Rel', 'NRel', '--samples', '1']


@pytest.fixture
def fake_reader(monkeypatch):
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())


@pytest.mark.slow
def test_a_second_run_into_the_same_folder_leaves_only_its_own_files(tmp_path, fake_reader):
    assert cli.main(ARGV + ['-k', '1', '2', '--fig4-k', '2', '--samples', '2', '--out', str(tmp_path)]) == 0
    assert (tmp_path / 'fig4_ndcg_vs_utility_k2.png').exists()
    assert cli.main(ARGV + ['-k', '1', '--seed', '7', '--out', str(tmp_path)]) == 0
    settings = json.loads((tmp_path / 'settings.json').read_text())
    assert settings['ks'] == [1] and settings['seed'] == 7 and settings['samples'] == 1
    assert set(pd.read_csv(tmp_path / 'per_query.csv')['k']) == {1}
    assert set(pd.read_csv(tmp_path / 'answers.csv')['sample']) == {0}
    assert sorted(p.name for p in tmp_path.glob('fig4*')) == ['fig4_ndcg_vs_utility_k1.pdf',
                                                                'fig4_ndcg_vs_utility_k1.png']
    assert not list(tmp_path.glob('.staging-*')) and not (tmp_path / LOCK).exists()


def test_a_folder_being_written_by_another_process_is_refused_naming_it(tmp_path, fake_reader, capsys):
    other = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        (tmp_path / LOCK).write_text(str(other.pid))
        with pytest.raises(SystemExit) as e:
            cli.main(ARGV + ['-k', '1', '--out', str(tmp_path)])
        assert e.value.code == 2
        assert f'is being written by process {other.pid}' in capsys.readouterr().err
        assert not (tmp_path / 'per_query.csv').exists()
    finally:
        other.kill()
        other.wait()
    # The lock of a process that died is taken over.
    assert cli.main(ARGV + ['-k', '1', '--out', str(tmp_path)]) == 0
    assert (tmp_path / 'per_query.csv').exists() and not (tmp_path / LOCK).exists()


@pytest.mark.slow
def test_the_report_is_titled_after_the_study_folder_not_the_staging_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend(logprobs=True))
    out = tmp_path / 'lift-study'
    with pytest.warns(UserWarning, match='answers reached max_new_tokens'):
        assert cli.main(ARGV + ['-k', '1', '--samples', '2', '--out', str(out)]) == 0
    page = (out / 'report.html').read_text()
    assert '<title>Context utility study: lift-study</title>' in page and '.staging' not in page
    # Beside Table 1, the printed summary says how many answers were cut (the odd seeds here).
    answers = pd.read_csv(out / 'answers.csv')
    cut = int(answers['truncated'].sum())
    assert cut == (answers['sample'] == 1).sum() > 0
    printed = capsys.readouterr().out
    table1 = (out / 'table1_paper.md').read_text()
    assert f'{table1}\n{len(answers)} answers, {cut} ({cut / len(answers):.0%}) cut at max_new_tokens ' \
           f'({json.loads((out / "settings.json").read_text())["decoding"]["max_new_tokens"]}; answers.csv says ' \
           'which, in its truncated column)\n' in printed
    assert f'{len(answers)} answers, {cut} ({cut / len(answers):.0%}) cut at max_new_tokens</p>' in page
    # One sample (seed 0, never cut by the counting backend): nothing to warn about.
    assert cli.main(ARGV + ['-k', '1', '--out', str(out), '--title', 'Lift, 2 queries']) == 0
    assert '<title>Lift, 2 queries</title>' in (out / 'report.html').read_text()
    assert json.loads((out / 'settings.json').read_text())['title'] == 'Lift, 2 queries'


@pytest.mark.parametrize('command', ['study', 'experiment'])
def test_an_out_under_a_file_is_refused_naming_it_before_anything_is_built(tmp_path, monkeypatch, capsys, command):
    built = []
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: built.append(spec) or CountingBackend())
    (tmp_path / 'file').write_text('x')
    with pytest.raises(SystemExit) as e:
        cli.main([command, '--queries', '2', '--systems', 'Rel', '-k', '1', '--out', str(tmp_path / 'file' / 'sub')])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == (f'pyterrier-utility {command}: error: --out {tmp_path / "file" / "sub"} cannot be written: '
                   'Not a directory\n')
    assert built == []


def test_a_report_into_an_out_under_a_file_is_refused_naming_it(tmp_path, fake_reader, capsys):
    assert cli.main(ARGV + ['-k', '1', '--out', str(tmp_path / 'study')]) == 0
    (tmp_path / 'file').write_text('x')
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        cli.main(['report', str(tmp_path / 'study'), '--out', str(tmp_path / 'file' / 'sub')])
    assert e.value.code == 2
    assert capsys.readouterr().err == (f'pyterrier-utility report: error: --out {tmp_path / "file" / "sub"} cannot '
                                       'be written: Not a directory\n')


@pytest.mark.parametrize('folder,said', [
    ('nosuch', '{path} does not exist: give a study folder (the --out of pyterrier-utility study)'),
    ('file.txt', '{path} is a file, not a study folder (the --out of pyterrier-utility study)'),
    ('other', '{path} is not a study folder: it holds no per_query.csv'),
    ('attributed', '{path} is not a study folder: it holds no per_query.csv (an attribution alone: run the study '
                   'into it too)')])
def test_a_report_of_what_is_not_a_study_folder_ends_in_one_line_naming_it(tmp_path, capsys, folder, said):
    (tmp_path / 'file.txt').write_text('x')
    (tmp_path / 'other').mkdir()
    (tmp_path / 'other' / 'notes.txt').write_text('x')
    (tmp_path / 'attributed').mkdir()
    (tmp_path / 'attributed' / 'attribution.csv').write_text('labels,system\n')
    with pytest.raises(SystemExit) as e:
        cli.main(['report', str(tmp_path / folder), '--out', str(tmp_path / 'report')])
    assert e.value.code == 2
    path = tmp_path / folder
    assert capsys.readouterr().err == f'pyterrier-utility report: error: {said.format(path=path)}\n'
    with pytest.raises(SettingError, match=f'^{re.escape(said.format(path=path))}$'):
        pu.study.read_study(path)
    assert not (tmp_path / 'report').exists()


@pytest.mark.skipif(os.geteuid() == 0, reason='root writes into a read-only folder: permissions are not enforced')
def test_a_read_only_out_is_refused_naming_it(tmp_path, fake_reader, capsys):
    (tmp_path / 'ro').mkdir(mode=0o500)
    with pytest.raises(SystemExit) as e:
        cli.main(ARGV + ['-k', '1', '--out', str(tmp_path / 'ro' / 'sub')])
    assert e.value.code == 2
    assert f'error: --out {tmp_path / "ro" / "sub"} cannot be written: Permission denied\n' in capsys.readouterr().err


def test_the_staging_folder_of_a_run_killed_while_writing_is_removed_by_the_next(tmp_path, fake_reader):
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    alive = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
    try:
        for pid in (dead.pid, alive.pid):  # what a run killed while moving its tables into place leaves
            (tmp_path / f'{STAGING}{pid}').mkdir()
            (tmp_path / f'{STAGING}{pid}' / 'table1.csv').write_text('half')
        assert cli.main(ARGV + ['-k', '1', '--out', str(tmp_path)]) == 0
        assert [p.name for p in tmp_path.glob(f'{STAGING}*')] == [f'{STAGING}{alive.pid}']
    finally:
        alive.kill()
        alive.wait()
    assert pd.read_csv(tmp_path / 'table1.csv')['k'].tolist()
