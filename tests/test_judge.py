"""The LLM judge as a quality (judge-docs, judge-gold): pyterrier-rag's pointwise LLMasJudge prompt, a
grade of 1 to 10 parsed from each reply or NaN with a warning naming the queries, the replies in the
generation cache; with the offline Gemma, a study's judge built again generates nothing."""
import json

import numpy as np
import pandas as pd
import pytest
from pyterrier_rag.backend import Backend, BackendOutput
from support.folders import DOCS, TOPICS
from support.grades import independent_grade

from pyterrier_utility import GenerationCache
from pyterrier_utility.errors import SettingError
from pyterrier_utility.scoring.judge import JUDGE_PROMPT, JudgeScorer, parse_grade


@pytest.mark.parametrize('reply, grade', [
    ('7]]', 7.0), (' 10 ]]\nThe answer is right.', 10.0), ('1', 1.0), ('3]] because it is short', 3.0),
    ('', np.nan), ('good', np.nan), ('11]]', np.nan), ('0]]', np.nan), ('7]] or [[8]]', np.nan),
    ('7.5]]', np.nan), ('seven]]', np.nan), ('7 8', np.nan)])
def test_a_grade_is_one_integer_of_the_scale_or_nan(reply, grade):
    assert parse_grade(reply) == grade or (np.isnan(grade) and np.isnan(parse_grade(reply)))


class GradingBackend(Backend):
    """A greedy judge replying to each answer as :data:`REPLIES` says, counting its prompts."""
    deterministic = True

    def __init__(self):
        super().__init__('grading')
        self.calls = []

    def generate(self, inps, **kw):
        self.calls.extend(inps)
        return [BackendOutput(text=REPLIES[p.split("[The Start of Assistant's Answer]\n")[1].split('\n')[0]])
                for p in inps]


#: A reply per answer: a grade, or one of the malformed replies (no number, out of the scale, empty, two).
REPLIES = {'lift': '8]]', 'pressure': '9]]\n', 'no idea': 'bad', 'mach one': '12]]', 'waves': '', 'shock': '4]] [[5]]'}


def test_each_malformed_reply_is_nan_with_a_warning_naming_its_query_and_each_answer_is_asked_once(tmp_path):
    backend = GradingBackend()
    scorer = JudgeScorer(GenerationCache(backend, tmp_path / 'judge.sqlite'), TOPICS,
                         {'q1': ['lift is caused by pressure'], 'q2': ['shocks form at mach one', 'waves']})
    qids = ['q1', 'q1', 'q1', 'q2', 'q2', 'q2', 'q1', 'q3']
    answers = ['lift', 'pressure', 'no idea', 'mach one', 'waves', 'shock', 'lift', 'lift']
    with pytest.warns(UserWarning) as caught:
        grades, best = scorer.score_with_reference(qids, answers)
    assert grades.tolist()[:2] == [8.0, 9.0] and grades[6] == 8.0 and np.isnan(grades[[2, 3, 4, 5, 7]]).all()
    assert best == [None] * 8
    assert sorted(str(w.message) for w in caught) == [
        'Judge is NaN (no references): qid q3', 'the judge gave no grade of 1 to 10: Judge is NaN: qid q1, q2']
    # One prompt per distinct (query, answer), pyterrier-rag's pointwise prompt filled in.
    asked = JUDGE_PROMPT.format(query='when do shock waves form', references='shocks form at mach one\nwaves',
                                answer='mach one')
    assert len(backend.calls) == 6 and asked in backend.calls
    assert backend.calls[0].startswith('[Instruction]\nPlease act as an impartial judge and evaluate the quality')
    assert backend.calls[0].endswith("[The End of Assistant's Answer]\n\nRating: [[")
    again = JudgeScorer(GenerationCache(GradingBackend(), tmp_path / 'judge.sqlite'), TOPICS,
                        {'q1': ['lift is caused by pressure']})
    with pytest.warns(UserWarning):
        assert again.score_with_reference(['q1', 'q1'], ['lift', 'no idea'])[0][0] == 8.0
    assert again.verdict.backend.calls == [] and again.verdict.cache.generated == 0


def test_a_sampling_judge_of_pyterrier_rag_is_refused():
    class Sampling(GradingBackend):
        deterministic = False
    with pytest.raises(SettingError, match='JudgeScorer: .* samples and cannot be copied to decode greedily'):
        JudgeScorer(Sampling(), TOPICS, {})


def test_a_judge_is_given_only_to_a_quality_graded_by_one():
    from pyterrier_utility.study import StudyConfig
    assert StudyConfig(quality='judge-docs').judge_reader == 'gemma3-270m'
    assert StudyConfig(quality='judge-gold', judge='smollm2-135m').judge_reader == 'smollm2-135m'
    with pytest.raises(SettingError, match="StudyConfig: judge is the judge of a quality graded by one, not of "
                                           "quality 'fbert-docs'"):
        StudyConfig(judge='smollm2-135m')
    with pytest.raises(SettingError, match="unknown reader 'gemma'"):
        StudyConfig(quality='judge-docs', judge='gemma')


@pytest.mark.slow
def test_the_offline_gemma_judges_a_study_and_a_judge_built_again_generates_nothing(small_folder, tmp_path):
    from pyterrier_utility import backends, cli
    from pyterrier_utility.schema import GENERATIONS_FILE
    from pyterrier_utility.study.config_json import from_dict
    out = tmp_path / 'study'
    assert cli.main(['study', '--dataset', small_folder, '--quality', 'judge-docs', '--queries', '1', '-k', '1',
                     '--systems', 'Rel', '--labels', '2', '--samples', '1', '--max-new-tokens', '8',
                     '--out', str(out)]) == 0
    settings = json.loads((out / 'settings.json').read_text())
    assert (settings['quality'], settings['judge']) == ('judge-docs', None)
    answers = pd.read_csv(out / 'answers.csv', dtype={'qid': str}, keep_default_na=False).set_index('system')
    per_query = pd.read_csv(out / 'per_query.csv', dtype={'qid': str}).set_index('qid')
    assert '| k | 0-shot Judge | Rel |' in (out / 'table1.md').read_text()
    # The study's judge built again, as a re-run builds it, reads its replies from the study's cache,
    # generating none; each P is the grade its reply gives, read here.
    config = from_dict(settings)
    judge = JudgeScorer(GenerationCache(backends.get_backend('gemma3-270m', **config.backend_options('gemma3-270m')),
                                        out / GENERATIONS_FILE), TOPICS, {'q1': [DOCS['d1']]})
    replies = judge.verdict.replies([dict(query=TOPICS['q1'], references=DOCS['d1'], answer=answers.loc[s, 'qanswer'])
                                     for s in ('0-shot', 'Rel')])
    assert judge.verdict.cache.generated == 0
    assert [per_query.loc['q1', 'quality_0shot'], per_query.loc['q1', 'quality']] == pytest.approx(
        [independent_grade(r) for r in replies], nan_ok=True)


def test_the_study_judges_against_the_relevant_documents_or_the_gold_answers_with_its_judge(small_folder, tmp_path,
                                                                                            monkeypatch):
    from pathlib import Path

    import pyterrier_utility as pu
    from pyterrier_utility.study import StudyConfig, preparation
    (Path(small_folder) / 'answers.tsv').write_text('q1\tpressure\nq1\tlift\nq2\tmach one\n')
    built = {}
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: built.setdefault(spec, GradingBackend()))
    for quality, references in (('judge-docs', {'q1': 'the wing lift is caused by pressure',
                                                'q2': 'shock waves form at mach one'}),
                                ('judge-gold', {'q1': 'pressure\nlift', 'q2': 'mach one'})):
        config = StudyConfig(datasets=(small_folder,), queries=0, ks=(1,), samples=1, systems=('Rel',),
                             label_sets=(2,), quality=quality, judge='smollm2-135m', out=str(tmp_path / quality))
        prepared = preparation.prepare(config, 'study')
        # The judge: its own backend beside the reader's, in the folder's generation cache.
        assert prepared.judge.backend is built['smollm2-135m'] is not built['gemma3-270m']
        assert prepared.judge.path == tmp_path / quality / 'generations.sqlite' and prepared.bertscore is None
        collection = prepared.collections[small_folder]
        scorer = prepared.scorer_for(collection)(config.label_sets[0])
        assert isinstance(scorer, pu.JudgeScorer) and scorer.quality == quality
        assert {q: '\n'.join(texts) for q, texts in scorer.texts.items()} == references
        assert list(scorer.score_with_reference(['q1'], ['lift'])[0]) == [8.0]
        assert JUDGE_PROMPT.format(query=TOPICS['q1'], references=references['q1'], answer='lift') in \
            built['smollm2-135m'].calls
        built.clear()
