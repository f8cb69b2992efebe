"""The study's vocabulary and file schema are written once: no module but ``vocabulary`` and ``schema``
spells out one of their lists."""
import ast
import sys
from pathlib import Path

import pytest

from pyterrier_utility import schema, vocabulary

PACKAGE = Path(vocabulary.__file__).parent
#: Literals that equal a vocabulary list and stay where they are, each with its reason:
#: (module path relative to the package, the literal's strings in order) -> why.
ALLOWED = {
    ('report/html.py', ('labels', 'system', 'k')):
        "the correlation tables' grouping key (label set, system, k), not a file's column list",
    ('study/sweep.py', ('per_query', 'answers', 'token_logprobs', 'contexts', 'scores', 'queries')):
        "the frames passed to StudyResults by its attributes' names, each built where it is named",
    ('study/systems.py', ('Rel', 'NRel')):
        'default_systems builds each oracle under its name: the transformers, not a choice list',
}


def _words(value):
    """The strings of a vocabulary value that is a list of names: a tuple of strings, or a dict's keys."""
    items = list(value) if isinstance(value, (tuple, dict)) else []
    return tuple(items) if len(items) >= 2 and all(isinstance(x, str) for x in items) else None


def _vocabulary():
    """name -> words of every list the vocabulary and the schema hold (a column list's runs of 3 or more
    too)."""
    lists = {name: _words(value) for module in (vocabulary, schema) for name, value in vars(module).items()
             if not name.startswith('_')}
    lists = {name: words for name, words in lists.items() if words}
    runs = {}
    for name, words in lists.items():
        if 'COLUMNS' in name or name == 'CELL':
            for n in range(3, len(words)):
                for start in range(len(words) - n + 1):
                    runs[f'{name}[{start}:{start + n}]'] = words[start:start + n]
    return lists, runs


def _literals(tree):
    """Every tuple, list or set literal of two or more strings, and the keys of every dict literal
    with two or more string keys, with its line."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        if len(items) >= 2 and all(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in items):
            yield node.lineno, tuple(x.value for x in items)


def repeated():
    """``module:line`` -> the vocabulary list a literal outside the vocabulary spells out again."""
    lists, runs = _vocabulary()
    by_set = {frozenset(words): name for name, words in lists.items()}
    by_run: dict = {}
    for name, words in runs.items():  # a run in several column lists is named after the first
        by_run.setdefault(words, name)
    found = {}
    for path in sorted(PACKAGE.rglob('*.py')):
        module = path.relative_to(PACKAGE).as_posix()
        if module in ('vocabulary.py', 'schema.py'):
            continue
        for line, words in _literals(ast.parse(path.read_text(), str(path))):
            name = by_set.get(frozenset(words)) or by_run.get(words)
            if name and (module, words) not in ALLOWED:
                found[f'{module}:{line}'] = f'{name} {words}'
    return found


def test_no_list_of_the_vocabulary_is_written_elsewhere():
    assert repeated() == {}


def test_the_check_sees_a_list_written_again(tmp_path, monkeypatch):
    copy = tmp_path / 'pyterrier_utility'
    copy.mkdir()
    (copy / 'vocabulary.py').write_text(Path(vocabulary.__file__).read_text())
    (copy / 'schema.py').write_text(Path(schema.__file__).read_text())
    (copy / 'cli.py').write_text("choices = ['completions', 'chat']\nkeys = ('labels', 'system', 'k')\n"
                                 "named = {'dense': 1, 'monot5': 2}\nother = ('a', 'b')\n")
    monkeypatch.setattr(sys.modules[__name__], 'PACKAGE', copy)
    assert repeated() == {'cli.py:1': "ENDPOINTS ('completions', 'chat')",
                          'cli.py:2': "PER_QUERY_COLUMNS[0:3] ('labels', 'system', 'k')",
                          'cli.py:3': "RERANKERS ('dense', 'monot5')"}


@pytest.mark.parametrize('name', ['ORDERING_NAMES', 'SYSTEMS', 'CORRECTIONS', 'QUALITY_NEEDS'])
def test_the_lists_hold_distinct_names(name):
    words = getattr(vocabulary, name)
    assert len(set(words)) == len(words)


def test_the_named_values_follow_the_vocabulary():
    from pyterrier_utility.prompt_formats import PROMPT_FORMATS
    from pyterrier_utility.rerankers import RERANKERS
    from pyterrier_utility.study import sweep
    assert tuple(PROMPT_FORMATS) == vocabulary.PROMPT_FORMAT_NAMES
    assert tuple(RERANKERS) == vocabulary.RERANKERS
    assert tuple(sweep.ORDERINGS) == vocabulary.ORDERING_NAMES
