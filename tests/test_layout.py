"""The documented layout (pyterrier_utility/pt_docs/layout.md) is the package's: every module is in
one room, and at import time a module imports only its own room and the rooms listed above it."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / 'pyterrier_utility'


def rooms():
    """The documented rooms, bottom first: each a set of file and folder names."""
    text = (PACKAGE / 'pt_docs' / 'layout.md').read_text()
    block = text.split('# The layout', 1)[1].split('```', 2)[1]
    found = []
    for line in block.strip().splitlines():
        names = re.split(r'\s{2,}', line.strip(), maxsplit=1)[0]
        if line.startswith(' '):  # a description going on
            continue
        found.append({n.strip().rstrip('/') for n in names.split(',')})
    return found


def room_of(module: str, listed) -> int:
    parts = module.split('.')[1:]
    head = parts[0] if parts else '__init__'
    for i, names in enumerate(listed):
        if head in names or head.removesuffix('.py') in {n.removesuffix('.py') for n in names}:
            return i
    raise AssertionError(f'{module} is in no room of the documented layout')


def modules():
    for path in sorted(PACKAGE.rglob('*.py')):
        parts = path.relative_to(ROOT).with_suffix('').parts
        if parts == ('pyterrier_utility', '__init__'):
            continue
        name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
        package = name if path.name == '__init__.py' else name.rsplit('.', 1)[0]
        yield path, name, package


def _module(name: str) -> str:
    """``name`` where it is a module or a subpackage of the package, else the package it is read from (a
    name imported from a package's face is that package's)."""
    path = ROOT.joinpath(*name.split('.'))
    return name if path.with_suffix('.py').exists() or (path / '__init__.py').exists() else name.rsplit('.', 1)[0]


def _imports(nodes, package: str):
    """The package modules the import statements among ``nodes`` name, relative or absolute."""
    for node in nodes:
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.split('.')[0] == PACKAGE.name)
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or '').split('.')[0] == PACKAGE.name):
            parts = package.split('.')
            base = parts[:len(parts) - (node.level - 1)] if node.level else []
            target = '.'.join(base + ([node.module] if node.module else []))
            yield target
            yield from (m for m in (_module(f'{target}.{a.name}') for a in node.names) if m != target)


def imported_at_import_time(path: Path, package: str):
    """The package modules ``path`` imports in its body (not inside functions)."""
    return _imports(ast.parse(path.read_text()).body, package)


def imported_anywhere(path: Path, package: str):
    """The package modules ``path`` imports, in its body or inside functions."""
    return _imports(ast.walk(ast.parse(path.read_text())), package)


def test_every_module_is_in_one_room_and_imports_only_rooms_below_it():
    listed = rooms()
    assert len(listed) >= 10, listed
    wrong = []
    for path, name, package in modules():
        mine = room_of(name, listed)
        for target in imported_at_import_time(path, package):
            if target != 'pyterrier_utility' and room_of(target, listed) > mine:
                wrong.append(f'{name} imports {target}')
    assert not wrong


def test_the_check_sees_an_import_from_a_room_listed_below(tmp_path):
    listed = rooms()
    assert room_of('pyterrier_utility.reader', listed) < room_of('pyterrier_utility.scoring.fbert', listed)
    upward = tmp_path / 'm.py'
    upward.write_text('from .scoring.fbert import FBertScorer\n\n\ndef f():\n    from .study import run\n')
    assert list(imported_at_import_time(upward, 'pyterrier_utility')) == ['pyterrier_utility.scoring.fbert']
    absolute = tmp_path / 'a.py'
    absolute.write_text('import pyterrier_utility.report.html\nfrom pyterrier_utility import report, Reader\n'
                        'from pyterrier_utility.scoring.fbert import FBertScorer\nimport pandas\n\n\n'
                        'def f():\n    from pyterrier_utility.report.html import write_report\n')
    assert list(imported_at_import_time(absolute, 'pyterrier_utility.contexts')) == [
        'pyterrier_utility.report.html', 'pyterrier_utility', 'pyterrier_utility.report',
        'pyterrier_utility.scoring.fbert']
    assert list(imported_anywhere(absolute, 'pyterrier_utility.contexts'))[-1] == 'pyterrier_utility.report.html'
    with pytest.raises(AssertionError, match='in no room'):
        room_of('pyterrier_utility.nowhere', listed)


def test_no_two_subpackages_import_each_other_even_inside_functions():
    """A subpackage (``experiment``, ``report``, ``backends``, ...) that imports another is never imported
    by it, at import time or when a function runs: the study never reaches up to its report."""
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / '__init__.py').exists()}
    edges = set()
    for path, name, package in modules():
        mine = name.split('.')[1] if name.count('.') else None
        for target in imported_anywhere(path, package):
            theirs = target.split('.')[1] if target.count('.') else None
            if mine in subpackages and theirs in subpackages and mine != theirs:
                edges.add((mine, theirs))
    assert sorted((a, b) for a, b in edges if (b, a) in edges) == []
