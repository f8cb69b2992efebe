"""The package's warnings reach the user as one plain line, in the program's voice."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
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


def test_an_unknown_dataset_ends_the_command_in_one_line_with_the_names_it_takes(tmp_path, capsys):
    from pyterrier_utility import cli
    with pytest.raises(SystemExit, match='2'):
        cli.main(['study', '--dataset', 'irds:msmarco-passage/trec-dl-2019/judgd', '--out', str(tmp_path)])
    err = capsys.readouterr().err.strip()
    assert err == ("pyterrier-utility study: error: unknown dataset 'irds:msmarco-passage/trec-dl-2019/judgd' (did you "
                   "mean 'irds:msmarco-passage/trec-dl-2019/judged'?): give cranfield (embedded), a folder with "
                   'docs.tsv, topics.tsv and qrels (--dataset DIR), or a PyTerrier / ir_datasets id such as '
                   'irds:msmarco-passage/trec-dl-2019/judged')


def _cranfield():
    dataset = pu.datasets.cranfield()
    return dataset.get_qrels(), dataset.texts


@pytest.mark.parametrize('build', [lambda: pu.BertScore('minlm'),
                                   lambda: pu.FBertScorer(*_cranfield(), model_type='minlm')])
def test_a_mistyped_bertscore_model_is_answered_with_the_nearest_name(build):
    with pytest.raises(pu.errors.SettingError, match="unknown model_type 'minlm': did you mean 'minilm'"):
        build()


def test_an_unlisted_bertscore_model_needs_its_layer_and_wrong_values_are_named():
    with pytest.raises(pu.errors.SettingError, match="model_type 'my/own-encoder' is not a model bert_score lists: "
                                                     'give num_layers'):
        pu.BertScore('my/own-encoder')
    with pytest.raises(pu.errors.SettingError, match='BertScore: model_type must be a model name or a path, got int 3'):
        pu.BertScore(3)
    with pytest.raises(pu.errors.SettingError, match='BertScore: num_layers must be an integer >= 1'):
        pu.BertScore('roberta-large', num_layers=0)


def test_an_oracle_cut_deeper_than_a_query_has_documents_names_the_query_once():
    qrels = pd.DataFrame({'qid': ['q1'] * 2 + ['q2'] * 3, 'docno': ['a', 'b', 'c', 'd', 'e'], 'label': [2] * 5})
    topics = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['x', 'y']})
    with pytest.warns(UtilityWarning) as caught:
        out = (pu.OracleSampler(qrels, dict.fromkeys('abcde', 't')) % 3)(topics)
    assert out.groupby('qid').size().to_dict() == {'q1': 2, 'q2': 3}  # all it has: the paper's Rel
    assert [str(w.message) for w in caught] == [
        "OracleSampler(Rel, label>=2, mode='sampled', num_results=3, seed=0) gives fewer than k=3 relevant "
        'documents (all it has) to some queries: qid q1']
    with pytest.raises(pu.errors.SettingError, match='OracleSampler %: k must be an integer >= 1, got 0'):
        pu.OracleSampler(qrels, {}) % 0
