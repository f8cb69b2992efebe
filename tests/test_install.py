"""The pip route of the install page works: the sdist and wheel build and pass ``twine check``, and the
wheel installed into a fresh virtualenv (torch's CPU build first, pyterrier-rag's torchvision and
torchaudio out after) imports the package and runs a one-query study; where torchvision stays in, the
command and a notebook's first use of the package say so in one line with the fix."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / 'pyterrier_utility' / 'pt_docs' / 'install.md'


def run(*command, **kwargs):
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f'{command}: {done.stdout[-2000:]}{done.stderr[-3000:]}'
    return done


def test_the_page_and_the_metadata_agree_on_python_and_torch():
    import tomllib
    project = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']
    floor = project['requires-python'].removeprefix('>=')
    assert f'Python {floor} or newer' in PAGE.read_text() and f'Python {floor}' in (ROOT / 'README.md').read_text()
    lines = (ROOT / 'requirements-torch.txt').read_text().splitlines()
    torch = next(line for line in lines if line.startswith('torch'))
    assert torch == 'torch==2.13.*' and 'torch==2.13.0' in PAGE.read_text()
    assert f'Programming Language :: Python :: {floor}' in project['classifiers']


@pytest.mark.slow
@pytest.mark.server
def test_the_wheel_installs_by_the_cpu_route_and_runs_a_study(tmp_path):
    page = PAGE.read_text()
    for line in ("pip install './pyterrier-utility[offline]'", 'pip uninstall -y torchvision torchaudio',
                 'pyterrier-utility study --queries 1 -k 1 --systems Rel --samples 1'):
        assert line in page  # the route tested here is the page's
    dist = tmp_path / 'dist'
    run(sys.executable, '-m', 'build', '--outdir', dist, ROOT)
    wheel, = dist.glob('pyterrier_utility-*-py3-none-any.whl')
    sdist, = dist.glob('pyterrier_utility-*.tar.gz')
    run(sys.executable, '-m', 'twine', 'check', '--strict', wheel, sdist)
    venv = tmp_path / 'venv'
    run(sys.executable, '-m', 'venv', venv)
    # No byte-compiling at install (Python compiles what the study imports): the page's route, without the
    # minutes of compiling every module of torch and its neighbours that nothing here imports.
    pip = [venv / 'bin' / 'python', '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-compile']
    run(*pip, 'torch==2.13.0')  # the CPU wheel at hand on these machines
    run(*pip, f'{wheel}[offline]')
    installed = run(venv / 'bin' / 'python', '-m', 'pip', 'list', '--format=json').stdout
    versions = {p['name'].lower(): p['version'] for p in json.loads(installed)}
    assert re.fullmatch(r'2\.13\.0(\+cpu)?', versions['torch'])  # kept, not replaced by a CUDA build
    run(venv / 'bin' / 'python', '-m', 'pip', 'uninstall', '--quiet', '-y', 'torchvision', 'torchaudio')
    env = {k: v for k, v in os.environ.items() if not k.startswith(('PYTHON', 'VIRTUAL_ENV'))}
    out = tmp_path / 'study'
    done = run(venv / 'bin' / 'pyterrier-utility', 'study', '--queries', '1', '-k', '1', '--systems', 'Rel',
               '--samples', '1', '--out', out, cwd=tmp_path, env=env)
    assert '2 answers generated' in done.stdout
    settings = json.loads((out / 'settings.json').read_text())
    where = run(venv / 'bin' / 'python', '-c', 'import pyterrier_utility as pu; print(pu.__file__)',
                cwd=tmp_path, env=env)
    assert str(venv) in where.stdout
    assert settings['readers'] == ['gemma3-270m'] and (out / 'report.html').is_file()


def _mismatched_venv(tmp_path) -> Path:
    """A virtualenv seeing this one's packages (a .pth file), with PyPI's torchvision 0.29.1 in front: built
    for another torch than the CPU torch 2.13.0, as pip installs it for pyterrier-rag."""
    import sysconfig
    venv = tmp_path / 'venv'
    run(sys.executable, '-m', 'venv', '--without-pip', venv)
    own, = (venv / 'lib').glob('python3*/site-packages')
    (own / 'project.pth').write_text(sysconfig.get_paths()['purelib'] + '\n')
    done = subprocess.run([sys.executable, '-m', 'pip', '--python', str(venv / 'bin' / 'python'), 'install', '--quiet',
                           '--no-deps', '--disable-pip-version-check', 'torchvision==0.29.1'],
                          capture_output=True, text=True)
    if done.returncode and 'No matching distribution found' in done.stderr:
        pytest.skip('the torchvision 0.29.1 wheel is not at hand (no index or wheel folder offers it)')
    assert done.returncode == 0, done.stderr[-3000:]
    return venv


@pytest.mark.slow
def test_a_torchvision_that_does_not_load_beside_torch_is_named_in_one_line_with_the_fix(tmp_path):
    venv = _mismatched_venv(tmp_path)
    python = venv / 'bin' / 'python'
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # this checkout's package, in front of any installed one
    trap = subprocess.run([python, '-c', 'import torch, torchvision'], capture_output=True, text=True, env=env)
    assert trap.returncode and 'operator torchvision::nms does not exist' in trap.stderr  # the trap is real here
    torch = run(python, '-c', 'import torch; print(torch.__version__)', env=env).stdout.strip()
    line = (f'torchvision 0.29.1 does not load beside torch {torch} (RuntimeError: operator torchvision::nms does not '
            'exist), and transformers cannot import its models without it; nothing here needs torchvision or '
            'torchaudio: pip uninstall -y torchvision torchaudio (the install page, on a CPU machine)')
    assert 'pip uninstall -y torchvision torchaudio' in PAGE.read_text()
    study = subprocess.run([python, '-m', 'pyterrier_utility.cli', 'study', '--queries', '1', '-k', '1', '--systems',
                            'Rel', '--samples', '1', '--out', tmp_path / 'study'], capture_output=True, text=True,
                           env=env, cwd=tmp_path)
    assert (study.returncode, study.stdout, study.stderr) == (2, '', f'pyterrier-utility study: error: {line}\n')
    notebook = subprocess.run([python, '-c', 'import pyterrier_utility as pu\npu.Reader'], capture_output=True,
                              text=True, env=env, cwd=tmp_path)
    assert notebook.stderr.splitlines()[-1] == f'pyterrier_utility.errors.PackageError: {line}'
    assert notebook.stderr.count('Traceback') == 1  # not chained to the 30 frames of the import that failed
