"""The package imports its names when first used, so the command line can parse before PyTerrier
and torch load."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pyterrier_utility as pu

ROOT = Path(__file__).resolve().parents[1]


def _loaded_after(code: str) -> dict:
    probe = (f'import sys, json\n{code}\n'
             "print(json.dumps({m: m in sys.modules for m in ('torch', 'pyterrier', 'pyterrier_rag', "
             "'matplotlib', 'pyterrier_utility.reader')}))")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_package_loads_no_model_library():
    assert _loaded_after('import pyterrier_utility') == {
        'torch': False, 'pyterrier': False, 'pyterrier_rag': False, 'matplotlib': False,
        'pyterrier_utility.reader': False}


def test_a_name_is_imported_when_first_used():
    loaded = _loaded_after('import pyterrier_utility as pu; pu.Reader')
    assert loaded['pyterrier_utility.reader'] and loaded['pyterrier_rag']
    assert not loaded['matplotlib']


def test_every_public_name_resolves_to_its_module_object():
    from pyterrier_utility.reader import Reader
    from pyterrier_utility.study.sweep import run_study
    assert pu.Reader is Reader and pu.study.run_study is run_study
    assert all(getattr(pu, name) is not None for name in pu.__all__)
    assert all(getattr(pu.study, name) is not None for name in pu.study.__all__)
    assert set(pu.__all__) <= set(dir(pu))


def test_every_public_submodule_is_an_attribute_of_the_package_in_a_fresh_interpreter():
    # As the docs and the notebook use them (pu.methods.reteval.failure_cases) without importing the module first.
    modules = sorted(p.stem if p.is_file() else p.name for p in (ROOT / 'pyterrier_utility').iterdir()
                     if not p.name.startswith('_') and p.stem != 'cli'
                     and (p.suffix == '.py' or (p / '__init__.py').exists()))
    probe = ('import pyterrier_utility as pu, types\n'
             f'assert all(isinstance(getattr(pu, m), types.ModuleType) for m in {modules!r})')
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, '-c', probe], env=env, cwd=ROOT, check=True)
    assert set(modules) <= set(pu.__all__)


def test_an_unknown_name_is_an_attribute_error():
    import pytest
    with pytest.raises(AttributeError, match="'pyterrier_utility' has no attribute 'Nope'"):
        pu.Nope


def test_the_command_line_parses_its_help_before_any_model_library_loads():
    loaded = _loaded_after('from pyterrier_utility import cli\n'
                           'try:\n    cli.main(["study", "--help"])\nexcept SystemExit:\n    pass')
    assert loaded == {'torch': False, 'pyterrier': False, 'pyterrier_rag': False, 'matplotlib': False,
                      'pyterrier_utility.reader': False}


def test_a_module_has_one_path_and_nothing_touches_the_import_system():
    probe = '''
import importlib, sys
before = list(sys.meta_path)
import pyterrier_utility as pu
for old in ('bertscore', 'cosmix', 'reteval', 'order'):
    try:
        importlib.import_module('pyterrier_utility.' + old)
    except ModuleNotFoundError:
        pass
    else:
        raise AssertionError(old + ' still imports')
    assert not hasattr(pu, old), old
assert 'reteval' in dir(pu.methods) and 'bertscore' in dir(pu.scoring)
assert sys.meta_path == before
'''
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, '-c', probe], env=env, cwd=ROOT, check=True)


def test_no_module_of_the_package_mentions_the_meta_path():
    assert [p.name for p in (ROOT / 'pyterrier_utility').rglob('*.py') if 'meta_path' in p.read_text()] == []


def test_every_public_name_has_an_entry_in_the_api_reference():
    import re
    text = (ROOT / 'pyterrier_utility' / 'pt_docs' / 'reference.rst').read_text()
    documented = set(re.findall(r'^\.\. auto\w+:: pyterrier_utility\.([\w.]+)$', text, flags=re.M))
    missing = [name for name in pu.__all__
               if name not in documented and f'{pu._NAMES.get(name)}.{name}' not in documented]
    assert missing == []


def test_a_lazy_import_failing_in_torchvision_is_one_package_error_and_any_other_failure_passes_unchanged(tmp_path):
    # A stand-in torchvision that fails to load as PyPI's does beside the CPU torch; the real one is
    # tested in a virtualenv built that way (test_install.py).
    (tmp_path / 'torchvision').mkdir()
    (tmp_path / 'torchvision' / '__init__.py').write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n')
    (tmp_path / 'lazily').mkdir()
    (tmp_path / 'lazily' / '__init__.py').write_text(
        "from pyterrier_utility._lazy import lazy_module\n"
        "__getattr__, __dir__ = lazy_module(globals(), {'Model': 'models'}, ('other',))\n")
    (tmp_path / 'lazily' / 'models.py').write_text(
        'try:\n    import torchvision\nexcept RuntimeError as e:\n'
        '    raise ModuleNotFoundError("Could not import module \'LlamaForCausalLM\'") from e\n')
    (tmp_path / 'lazily' / 'other.py').write_text('raise ValueError("a fault of its own")\n')
    probe = ('import lazily, importlib.metadata as m\n'
             'for name in ("Model", "other"):\n'
             '    try:\n        getattr(lazily, name)\n'
             '    except Exception as e:\n'
             '        print(type(e).__name__, e.__cause__, e.__suppress_context__, e, sep=" | ")\n'
             'print(m.version("torch"))\n')
    env = dict(os.environ, PYTHONPATH=f'{tmp_path}{os.pathsep}{ROOT}')
    out = subprocess.run([sys.executable, '-c', probe], capture_output=True, text=True, env=env, cwd=tmp_path,
                         check=True).stdout.splitlines()
    torch = out[2]
    assert out[:2] == [
        f'PackageError | None | True | torchvision (version unknown) does not load beside torch {torch} (RuntimeError: '
        'operator torchvision::nms does not exist), and transformers cannot import its models without it; nothing '
        'here needs torchvision or torchaudio: pip uninstall -y torchvision torchaudio (the install page, on a CPU '
        'machine)',
        'ValueError | None | False | a fault of its own']
    assert issubclass(pu.errors.PackageError, (pu.errors.UtilityError, ImportError))
