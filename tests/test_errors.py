"""The package's warnings reach the user as one plain line, in the program's voice."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pyterrier_utility as pu
from pyterrier_utility.errors import UtilityWarning

ROOT = Path(__file__).resolve().parents[1]


def _stderr(code: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / 'tests')]))
    done = subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=True)
    return done.stderr


def test_a_warning_of_the_package_is_one_plain_line_and_others_keep_their_form():
    err = _stderr('import warnings\n'
                  'from pyterrier_utility._util import warn\n'
                  "warn('3 of 6 answers reached max_new_tokens')\n"
                  "warnings.warn('not ours')\n")
    lines = err.splitlines()
    assert lines[0] == 'pyterrier-utility: 3 of 6 answers reached max_new_tokens'
    assert lines[1] == '<string>:4: UserWarning: not ours'


def test_the_package_warning_is_still_a_user_warning_to_filters_and_pytest():
    with pytest.warns(UserWarning, match='^cut$') as caught:
        from pyterrier_utility._util import warn
        warn('cut')
    assert caught[0].category is UtilityWarning and caught[0].filename == __file__
    pu.errors.plain_warnings()  # a second installation wraps nothing twice
    import warnings
    assert warnings.formatwarning('cut', UtilityWarning, 'x.py', 1) == 'pyterrier-utility: cut\n'


@pytest.mark.slow
def test_a_tiny_study_whose_answers_are_cut_says_so_in_one_plain_line(tmp_path):
    # The counting backend cuts the answers of odd seeds at max_new_tokens.
    err = _stderr('import sys\n'
                  'from support.backends import CountingBackend\n'
                  'import pyterrier_utility as pu\n'
                  'from pyterrier_utility import cli\n'
                  'pu.backends.get_backend = lambda spec, **kw: CountingBackend(logprobs=True)\n'
                  "cli.main(['study', '--queries', '1', '--systems', 'Rel', 'NRel', '-k', '1', '--samples', '2', "
                  "'--out', sys.argv[1]])\n", str(tmp_path / 'study'))
    said = [line for line in err.splitlines() if 'reached max_new_tokens' in line]
    assert said == ['pyterrier-utility: 3 of 6 answers reached max_new_tokens; raise --max-new-tokens '
                    "(Reader(max_new_tokens=...) or the decoding's) (answers.csv says which, in its truncated column)"]
    assert not re.search(r'\.py:\d+: \w*Warning', err) and 'cli.main(' not in err
