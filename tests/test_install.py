"""The pip route of the install page works: the sdist and wheel build and pass ``twine check``, and the
wheel installed into a fresh virtualenv (torch's CPU build first, pyterrier-rag's torchvision and
torchaudio out after) imports the package and runs a one-query study."""
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
    pip = [venv / 'bin' / 'python', '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check']
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
