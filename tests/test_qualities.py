"""Answer qualities, each described once (:mod:`pyterrier_utility.qualities`): a quality registered in
this file alone is a study choice end to end (the command line's choices and help, the config, the
study's P, Table 1's heading, the report, ``pt.Experiment``'s measures), with no BERTScore model loaded
for a quality that needs none."""
import json

import numpy as np
import pandas as pd
import pytest

from pyterrier_utility import qualities
from pyterrier_utility.errors import SettingError
from pyterrier_utility.qualities import Quality, register


def length(answer: str) -> float:
    """The toy quality, computed here: the answer's words, at most 10, over 10."""
    return min(len(answer.split()), 10) / 10


class LengthScorer:
    """The toy quality's scorer: P from the answer's words alone."""
    measure, references, quality = 'Length', 'the answer alone', 'length'
    built = 0

    @classmethod
    def for_quality(cls, quality, inputs):
        assert quality.name == 'length' and inputs.labels is None and inputs.bertscore is None
        cls.built += 1
        return cls()

    def score_with_reference(self, qids, answers):
        return np.array([length(a) for a in answers]), [None] * len(answers)


@pytest.fixture
def toy():
    """The toy quality, registered for one test."""
    quality = register(Quality('length', 'Length', "the answer's words, at most 10, over 10", scorer=LengthScorer))
    LengthScorer.built = 0
    yield quality
    del qualities.QUALITIES_BY_NAME['length']


@pytest.fixture
def no_bertscore(monkeypatch):
    """Every BERTScore model loaded is recorded, and refused."""
    from pyterrier_utility.scoring.bertscore import BertScore
    loaded = []

    def refuse(self, *args, **kwargs):
        loaded.append(args)
        raise RuntimeError('no BERTScore model may be loaded here')
    monkeypatch.setattr(BertScore, '__init__', refuse)
    return loaded


def test_a_quality_registered_here_is_a_study_choice_end_to_end(toy, small_folder, tmp_path, monkeypatch, no_bertscore):
    from support.backends import CountingBackend

    import pyterrier_utility as pu
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    study = cli.parser()._subparsers._group_actions[0].choices['study']
    option = next(a for a in study._actions if a.dest == 'quality')
    assert 'length' in option.choices and "length, the answer's words, at most 10, over 10" in option.help
    out = tmp_path / 'study'
    assert cli.main(['study', '--dataset', small_folder, '--quality', 'length', '--queries', '0', '-k', '1',
                     '--systems', 'Rel', '--labels', '2', '--samples', '1', '--out', str(out)]) == 0
    assert no_bertscore == [] and LengthScorer.built == 1  # one scorer for every label set
    assert json.loads((out / 'settings.json').read_text())['quality'] == 'length'
    per_query = pd.read_csv(out / 'per_query.csv', dtype={'qid': str}).set_index('qid')
    answers = pd.read_csv(out / 'answers.csv', dtype={'qid': str}, keep_default_na=False)
    # The fake reader's answers: 0-shot 'no context (seed 0, 0 contexts)' (6 words), Rel at k=1 q1's
    # 'the wing lift is caused by pressure (seed 0, 1 contexts)' (10 words).
    assert per_query['quality_0shot'].tolist() == [0.6, 0.6] and per_query.loc['q1', 'quality'] == 1.0
    for system, column in (('0-shot', 'quality_0shot'), ('Rel', 'quality')):
        rows = answers[answers['system'] == system].set_index('qid')['qanswer']
        assert per_query[column].tolist() == pytest.approx([length(rows[q]) for q in per_query.index])
    assert per_query['utility'].tolist() == pytest.approx(list((per_query['quality'] - 0.6) / 0.6))
    assert '| k | 0-shot Length | Rel |' in (out / 'table1.md').read_text()
    assert '0-shot: the mean Length of the answers without context' in (out / 'table1.tex').read_text()
    assert cli.main(['report', str(out), '--out', str(tmp_path / 'again'), '--html']) == 0
    page = (tmp_path / 'again' / 'report.html').read_text()
    assert '"quality":"Length"' in page and 'FBERT' not in page and 'FBERT' not in (out / 'table1.md').read_text()
    experiment = tmp_path / 'experiment'
    assert cli.main(['experiment', '--dataset', small_folder, '--quality', 'length', '-k', '1', '--systems', 'Rel',
                     '--labels', '2', '--out', str(experiment)]) == 0
    table = pd.read_csv(experiment / 'experiment.csv').set_index('name')
    assert table.loc['Rel', 'Length'] == pytest.approx(per_query['quality'].mean())
    assert table.loc['Rel', 'Length_0shot'] == pytest.approx(0.6) and no_bertscore == []


def test_the_evaluator_names_its_measures_for_its_scorers_quality(toy):
    from support.backends import CountingBackend

    import pyterrier_utility as pu
    reader = pu.Reader(CountingBackend())
    assert [str(m) for m in pu.UtilityEvaluator(reader, LengthScorer()).measures] == ['Length', 'Length_0shot',
                                                                                     'Utility']
    em = pu.UtilityEvaluator(reader, pu.GoldAnswerScorer({'q1': ['Paris']}, 'em')).measures
    assert [str(m) for m in em] == ['EM', 'EM_0shot', 'Utility']
    fbert = pu.measures.quality_measures('fbert-docs')
    assert fbert == (pu.FBERT, pu.FBERT0) and [str(m) for m in fbert] == ['FBERT', 'FBERT0']


def test_what_a_quality_needs_decides_bertscore_and_its_settings(toy):
    from pyterrier_utility.study import StudyConfig
    assert [StudyConfig(quality=name).bertscore_needed for name in qualities.quality_names()] == [
        True, False, False, True, False, False, False, False, False, False, False]
    with pytest.raises(SettingError, match="StudyConfig: submeasure and agg are those of BERTScore; quality 'length'"):
        StudyConfig(quality='length', submeasure='P')
    with pytest.raises(SettingError, match=r"StudyConfig: quality must be one of \['fbert-docs', 'em', 'f1', "
                                           r"'bertscore-gold', 'judge-docs', 'judge-gold', 'nuggets-vital-strict', "
                                           r"'nuggets-vital', "
                                           r"'nuggets-all-strict', 'nuggets-all', 'length'\], got 'lenght'"):
        StudyConfig(quality='lenght')


def test_a_quality_is_refused_a_name_a_measure_or_a_need_already_taken_or_unknown(toy):
    with pytest.raises(SettingError, match="the quality 'length' .* clashes with the quality 'length'"):
        register(Quality('length', 'Words', 'words'))
    with pytest.raises(SettingError, match="the quality 'exact' .* clashes with the quality 'em'"):
        register(Quality('exact', 'EM', 'exact match again'))
    with pytest.raises(SettingError, match=r"needs must come from \['documents', 'gold', 'bertscore', 'judge', "
                                           r"'nuggets'\], got \['claims'\]"):
        Quality('claims', 'Claims', 'claim recall', needs={'claims'})
    with pytest.raises(SettingError, match=r"unknown quality 'lenght' \(did you mean 'length'\?\)"):
        qualities.quality_of('lenght')
    with pytest.raises(SettingError, match="the quality 'bare' has no scorer"):
        Quality('bare', 'Bare', 'nothing').build(qualities.ScoringInputs(None, None))
