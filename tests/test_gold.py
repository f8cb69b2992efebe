"""GoldAnswerScorer: EM and token F1 equal pyterrier-rag's, BERTScore against gold answers equals
bert_score's, and gold answers read from every shape they come in."""
import numpy as np
import pandas as pd
import pytest
from bert_score import BERTScorer
from pyterrier_rag._measures import ems, f1_score

from pyterrier_utility import GoldAnswerScorer
from pyterrier_utility.errors import SettingError
from pyterrier_utility.gold import exact_match, gold_answers, normalize_answer, token_f1
from pyterrier_utility.models import minilm_path

GOLD = {'q1': ['Paris', 'the city of Paris'], 'q2': ['yes'], 'q3': ['Mach 2.5', 'two and a half']}
ANSWERS = [('q1', 'Paris.'), ('q1', 'It is the city of Paris, France'), ('q1', 'London'), ('q2', 'Yes!'),
           ('q2', 'no'), ('q3', 'about mach 2.5'), ('q3', 'An answer: two and a half times'), ('q3', ''),
           ('q1', 'The  PARIS')]


def test_normalisation_is_squads():
    assert normalize_answer('The  Cat, an  (apple)!') == 'cat apple'
    assert normalize_answer('A theory of a thing') == 'theory of thing'


def test_em_and_f1_equal_pyterrier_rag_and_hand_computed_values():
    qids, answers = zip(*ANSWERS)
    em = GoldAnswerScorer(GOLD, 'em')
    f1 = GoldAnswerScorer(GOLD, 'f1')
    with pytest.warns(UserWarning, match='empty answer scored EM 0: qid q3'):
        em_scores = em.score(qids, answers)
    with pytest.warns(UserWarning, match='empty answer scored F1 0: qid q3'):
        f1_scores = f1.score(qids, answers)
    assert em_scores.tolist() == [ems(a, GOLD[q]) for q, a in ANSWERS]
    assert f1_scores.tolist() == [max(f1_score(a, g) for g in GOLD[q]) for q, a in ANSWERS]
    assert em_scores.tolist() == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    # 'it is city of paris france' against 'city of paris': P 3/6, R 3/3 -> 2/3; 'about mach 25'
    # against 'mach 25': P 2/3, R 1 -> 0.8; 'answer two and half times' against 'two and half':
    # P 3/5, R 1 -> 0.75; 'no' against 'yes' is 0 by HotpotQA's rule.
    assert f1_scores.tolist() == pytest.approx([1.0, 2 / 3, 0.0, 1.0, 0.0, 0.8, 0.75, 0.0, 1.0], abs=1e-12)
    assert [token_f1('no', 'yes'), exact_match('An Apple', 'apple')] == [0.0, 1.0]


def test_queries_without_gold_answers_are_nan_with_a_warning():
    with pytest.warns(UserWarning, match=r'EM is NaN \(no gold answer\): qid q9'):
        scores, best = GoldAnswerScorer(GOLD, 'em').score_with_reference(['q1', 'q9'], ['Paris', 'Paris'])
    assert scores[0] == 1.0 and np.isnan(scores[1]) and best == [None, None]


def test_gold_answers_from_pyterrier_rag_answers_ir_datasets_topics_and_mappings():
    exploded = pd.DataFrame({'qid': [1, 1, 2], 'gold_answer': ['Paris', 'paris', 'Rome']})
    assert gold_answers(exploded) == {'1': ('Paris', 'paris'), '2': ('Rome',)}
    topics = pd.DataFrame({'qid': ['a', 'b', 'c'], 'query': ['x', 'y', 'z'],
                           'answers': [('Paris', 'Paris', ''), np.array(['Rome']), ()]})
    assert gold_answers(topics) == {'a': ('Paris',), 'b': ('Rome',)}
    assert gold_answers({'a': 'Paris', 'b': ['Rome', ' ']}) == {'a': ('Paris',), 'b': ('Rome',)}


def test_the_transformer_adds_its_column():
    frame = pd.DataFrame({'qid': ['q1', 'q2'], 'docno': ['d', 'e'], 'qanswer': ['Paris', 'maybe']})
    out = GoldAnswerScorer(GOLD, 'f1')(frame)
    assert list(out.columns) == ['qid', 'docno', 'qanswer', 'f1'] and out['f1'].tolist() == [1.0, 0.0]
    assert repr(GoldAnswerScorer(GOLD, 'em')) == "GoldAnswerScorer('em', 3 queries)"


def test_settings_of_another_measure_are_refused():
    for quality, options in (('exact', {}), ('em', dict(submeasure='P')), ('f1', dict(agg='mean')),
                             ('bertscore-gold', dict(agg='min'))):
        with pytest.raises(SettingError, match='GoldAnswerScorer'):
            GoldAnswerScorer(GOLD, quality, **options)


@pytest.mark.parametrize('submeasure, agg', [('F1', 'max'), ('P', 'mean')])
def test_bertscore_against_gold_answers_equals_bert_score(minilm, submeasure, agg):
    reference = BERTScorer(model_type=minilm_path(), num_layers=6)
    scorer = GoldAnswerScorer(GOLD, 'bertscore-gold', model_type=minilm, submeasure=submeasure, agg=agg)
    qids, answers = zip(*[(q, a) for q, a in ANSWERS if a])
    ours = scorer.score(qids, answers)
    for value, q, a in zip(ours, qids, answers):
        theirs = dict(zip(('P', 'R', 'F1'), reference.score([a] * len(GOLD[q]), GOLD[q])))[submeasure].numpy()
        assert value == pytest.approx(theirs.max() if agg == 'max' else theirs.mean(), abs=1e-5)
    assert scorer.measure == ('BERTScore' if agg == 'max' else 'BERTScore(P, mean)')
