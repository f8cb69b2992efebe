"""The package's warnings reach the user as one plain line, in the program's voice; its constructors refuse
what they cannot use, naming the parameter."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support.backends import CountingBackend

import pyterrier_utility as pu
from pyterrier_utility.errors import SettingError, UtilityWarning

ROOT = Path(__file__).resolve().parents[1]


def _stderr(code: str, *args: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / 'tests')]))
    done = subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, env=env, cwd=ROOT,
                          check=True)
    return done.stderr


def test_a_warning_of_the_package_is_one_plain_line_and_others_keep_their_form():
    err = _stderr('import warnings\n'
                  'from pyterrier_utility._messages import warn\n'
                  "warn('3 of 6 answers reached max_new_tokens')\n"
                  "warnings.warn('not ours')\n")
    lines = err.splitlines()
    assert lines[0] == 'pyterrier-utility: 3 of 6 answers reached max_new_tokens'
    assert lines[1] == '<string>:4: UserWarning: not ours'


def test_the_package_warning_is_still_a_user_warning_to_filters_and_pytest():
    with pytest.warns(UserWarning, match='^cut$') as caught:
        from pyterrier_utility._messages import warn
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
                  "'--replicas', '1', '--out', sys.argv[1]])\n", str(tmp_path / 'study'))
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
        out = (pu.OracleSampler(qrels, dict.fromkeys('abcde', 't')) % 3).compile()(topics)
    assert out.groupby('qid').size().to_dict() == {'q1': 2, 'q2': 3}  # all it has: the paper's Rel
    assert [str(w.message) for w in caught] == [
        "OracleSampler(Rel, label>=2, mode='sampled', num_results=3, seed=0) gives fewer than k=3 relevant "
        'documents (all it has) to some queries: qid q1']
    for k in (0, True):  # PyTerrier's % itself refuses a k that is no int
        said = f'OracleSampler % k: k must be an integer >= 1, got {k}'
        with pytest.raises(pu.errors.SettingError, match=re.escape(said)):
            (pu.OracleSampler(qrels, {}) % k).compile()


# Every public constructor refuses a wrong type or an out-of-range value when it is built, naming the
# parameter (Reader, FBertScorer and OracleSampler: their own tests).

QRELS = pd.DataFrame({'qid': ['1'], 'docno': ['d1'], 'label': [2]})
URL = 'http://127.0.0.1:9/v1'


def _reader():
    return pu.Reader(CountingBackend())


def _gold():
    return pu.GoldAnswerScorer({'1': 'lift'}, 'em')


CONSTRUCTORS = [
    (lambda: pu.ContextAttribution('gemma3-270m', _gold()), 'the reader must be a pyterrier_utility.Reader'),
    (lambda: pu.ContextAttribution(_reader(), 'minilm'), 'scorer must score answers'),
    (lambda: pu.ContextAttribution(_reader(), _gold(), method='shaply'), 'method must be'),
    (lambda: pu.ContextAttribution(_reader(), _gold(), budget=10), "a budget applies to the sampling methods"),
    (lambda: pu.ContextAttribution(_reader(), _gold(), method='permutation', budget='10'),
     "budget must be an integer >= 2, got '10'"),
    (lambda: pu.ContextAttribution(_reader(), _gold(), seed=-1), 'seed must be an integer >= 0, got -1'),
    (lambda: pu.ContextAttribution(_reader(), _gold(), seed=0.5), 'seed must be an integer >= 0, got 0.5'),
    (lambda: pu.UtilityEvaluator(None, _gold()), 'the reader must be a pyterrier_utility.Reader'),
    (lambda: pu.UtilityEvaluator(_reader(), None), 'scorer must score answers'),
    (lambda: pu.backends.CausalLMBackend(None, None, model_id='m', batch_size=0), 'batch_size must be an integer >= 1'),
    (lambda: pu.backends.CausalLMBackend(None, None, model_id='m', max_input_length='4096'),
     "max_input_length must be an integer >= 1, got '4096'"),
    (lambda: pu.backends.CausalLMBackend(None, None, model_id='m', prefix_cache_mb=-1), 'prefix_cache_mb must be'),
    (lambda: pu.backends.CausalLMBackend(None, None, model_id='m', min_chunk_tokens=0), 'min_chunk_tokens must be'),
    (lambda: pu.backends.CausalLMBackend(None, None, model_id='m', temperature=-1), 'temperature'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, timeout='60'), "timeout must be a number > 0, got '60'"),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, timeout=0), 'timeout must be a number > 0, got 0'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, backoff=-1), 'backoff must be a number >= 0, got -1'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, retry_deadline=float('nan')),
     'retry_deadline must be a number > 0, got nan'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, concurrency=0), 'concurrency must be an integer >= 1'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, max_retries='5'), 'max_retries must be an integer >= 0'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, max_input_length=0), 'max_input_length must be'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', URL, endpoint='chats'), 'endpoint must be'),
    (lambda: pu.backends.OpenAICompatibleBackend('m', 'ftp://h'), 'base_urls must be http(s) URLs'),
    (lambda: pu.backends.OpenAICompatibleBackend('', URL), 'model must be a non-empty string'),
    (lambda: pu.backends.LlamaCppServerBackend('m', URL, sampler_order=['top_k']), 'sampler_order must order all'),
    (lambda: pu.backends.LlamaCppServerBackend('m', URL, timeout=-5), 'timeout must be a number > 0, got -5'),
    (lambda: pu.backends.VLLMBackend('m', tensor_parallel_size=0), 'tensor_parallel_size must be an integer >= 1'),
    (lambda: pu.backends.VLLMBackend('m', batch_size='8'), 'batch_size must be an integer >= 1'),
    (lambda: pu.backends.VLLMBackend('m', max_input_length=-1), 'max_input_length must be an integer >= 1'),
    (lambda: pu.backends.RayBackend('gemma3-270m', replicas=0), 'replicas must be an integer >= 1, got 0'),
    (lambda: pu.backends.RayBackend('gemma3-270m', replicas='2'), "replicas must be an integer >= 1, got '2'"),
    (lambda: pu.backends.RayBackend('gemma3-270m', max_restarts=-1), 'max_restarts must be an integer >= 0'),
    (lambda: pu.backends.RayBackend('gemma3-270m', num_cpus='1'), "num_cpus must be a number > 0, got '1'"),
    (lambda: pu.backends.RayBackend('gemma3-270m', num_gpus=-1), 'num_gpus must be a number >= 0, got -1'),
    (lambda: pu.backends.RayBackend(42), 'backend must be a reader name or a function'),
    (lambda: pu.LLMRetEval('gemma3-270m', QRELS, {}, bertscore='minilm'), 'reader must be a pyterrier_utility.Reader'),
    (lambda: pu.LLMRetEval(_reader(), QRELS, {}, judge='gemma3-270m'), 'judge must be a pyterrier-rag Backend'),
    (lambda: pu.LLMRetEval(_reader(), QRELS, {}, bertscore=3), 'bertscore must be a model name'),
    (lambda: pu.LLMRetEval(_reader(), QRELS, {}, bertscore='minilm', threshold='0.8'), 'threshold must be a number'),
    (lambda: pu.LLMRetEval(_reader(), QRELS, {}, bertscore='minilm', gold_samples=0),
     'gold_samples must be an integer >= 1, got 0'),
    (lambda: pu.LLMRetEval(_reader(), QRELS, {}, bertscore='minilm', gold_temperature=-0.5),
     'gold_temperature must be a number >= 0, got -0.5'),
    (lambda: pu.LLMRetEval(_reader(), QRELS, {}, bertscore='minilm', k=0), 'k must be an integer >= 1, got 0'),
    (lambda: pu.LLMRetEval(_reader(), QRELS.to_dict(), {}, bertscore='minilm'), 'qrels must be a DataFrame'),
    (lambda: pu.ERAGLabeller('gemma3-270m', None, metric='em'), 'reader must be a pyterrier_utility.Reader'),
    (lambda: pu.ERAGLabeller(_reader(), _gold()), 'scorer must be an FBertScorer or None'),
    (lambda: pu.ERAGLabeller(_reader(), None, metric='bleu'), "metric must be 'fbert', 'em' or 'f1'"),
]


@pytest.mark.parametrize('build,said', CONSTRUCTORS, ids=[s for _, s in CONSTRUCTORS])
def test_a_constructor_given_a_wrong_type_or_value_refuses_it_naming_the_parameter(build, said):
    with pytest.raises(SettingError, match=re.escape(said)):
        build()
