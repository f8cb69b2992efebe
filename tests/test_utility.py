import numpy as np
import pytest

from pyterrier_utility import Reader, UtilityEvaluator
from pyterrier_utility.scoring.utility import utility


class TableScorer:
    """FBERT looked up from a table, to check the arithmetic exactly (an AnswerScorer)."""

    measure = 'FBERT'
    references = 'label>=2'

    def __init__(self, table):
        self.table = table

    def score_with_reference(self, qids, answers):
        return np.array([self.table[a] for a in answers], dtype=float), ['d'] * len(answers)


def test_the_table_scorer_is_an_answer_scorer():
    from pyterrier_utility.protocols import AnswerScorer
    assert isinstance(TableScorer({}), AnswerScorer)


def test_utility_formula():
    np.testing.assert_allclose(utility([0.6, 0.4], [0.4, 0.5]), [0.5, -0.2])
    out = utility([0.5, np.nan, 0.5], [0.0, 0.5, np.nan])
    assert np.isnan(out).all()


def test_evaluator_averages_samples_and_reuses_zero_shot(counting_backend, results):
    reader = Reader(counting_backend, n_samples=2)
    table = {
        'first doc (seed 0, 3 contexts)': 0.6, 'first doc (seed 1, 3 contexts)': 0.8,
        'drag doc (seed 0, 1 contexts)': 0.3, 'drag doc (seed 1, 1 contexts)': 0.3,
        'no context (seed 0, 0 contexts)': 0.5, 'no context (seed 1, 0 contexts)': 0.3,
    }
    evaluator = UtilityEvaluator(reader, TableScorer(table))
    out = evaluator(reader(results))
    q1 = out[out.qid == 'q1']
    assert list(q1['docno']) == ['d2', 'd1', 'd3']  # context rows kept, one per document
    assert q1['fbert'].iloc[0] == pytest.approx(0.7)
    assert q1['fbert_0shot'].iloc[0] == pytest.approx(0.4)
    assert q1['utility'].iloc[0] == pytest.approx(0.75)
    assert out[out.qid == 'q2']['utility'].iloc[0] == pytest.approx(-0.25)
    assert q1['qanswer'].iloc[0] == 'first doc (seed 0, 3 contexts)'
    assert q1['qanswers'].iloc[0] == ('first doc (seed 0, 3 contexts)', 'first doc (seed 1, 3 contexts)')
    assert 'sample' not in out.columns
    calls = len(counting_backend.calls)
    evaluator(reader(results))
    assert len(counting_backend.calls) == calls  # no generation the second time


def test_zero_shot_fbert_of_zero_gives_nan_and_warning(counting_backend, results):
    reader = Reader(counting_backend)
    table = {'first doc (seed 0, 3 contexts)': 0.6, 'drag doc (seed 0, 1 contexts)': 0.3,
             'no context (seed 0, 0 contexts)': 0.0}
    with pytest.warns(UserWarning, match='q1, q2'):
        out = UtilityEvaluator(reader, TableScorer(table))(reader(results))
    assert out['utility'].isna().all()
    assert (out['fbert_0shot'] == 0).all()


def test_single_sample_keeps_plain_answer(counting_backend, results):
    reader = Reader(counting_backend)
    table = {'first doc (seed 0, 3 contexts)': 0.6, 'drag doc (seed 0, 1 contexts)': 0.3,
             'no context (seed 0, 0 contexts)': 0.3}
    out = UtilityEvaluator(reader, TableScorer(table))(reader(results))
    assert list(out.columns) == list(results.columns) + ['qanswer', 'logprob', 'mean_logprob', 'tokens', 'truncated',
                                                        'fbert', 'fbert_0shot', 'utility']
    assert out[out.qid == 'q1']['qanswer'].iloc[0] == 'first doc (seed 0, 3 contexts)'
    assert out[out.qid == 'q1']['utility'].iloc[0] == pytest.approx(1.0)


def test_empty_input_gives_empty_typed_frame(counting_backend, results):
    reader = Reader(counting_backend)
    out = UtilityEvaluator(reader, TableScorer({}))(reader(results).iloc[:0])
    assert out.empty and {'fbert', 'fbert_0shot', 'utility'} <= set(out.columns)


def test_pyterrier_rag_answer_measures_read_the_evaluators_output(counting_backend, results):
    import ir_measures
    import pandas as pd
    from pyterrier_rag.measures import EM, F1
    reader = Reader(counting_backend, n_samples=2)
    table = {a: 0.5 for a in ['first doc (seed 0, 3 contexts)', 'first doc (seed 1, 3 contexts)',
                              'drag doc (seed 0, 1 contexts)', 'drag doc (seed 1, 1 contexts)',
                              'no context (seed 0, 0 contexts)', 'no context (seed 1, 0 contexts)']}
    out = UtilityEvaluator(reader, TableScorer(table))(reader(results))
    run = out.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})
    gold = pd.DataFrame({'query_id': ['q1', 'q2'], 'gold_answer': ['first doc seed 0 3 contexts', 'lift']})
    values = {(str(m.measure), m.query_id): m.value for m in ir_measures.iter_calc([EM, F1], gold, run)}
    assert values[('EM', 'q1')] == 1.0 and values[('EM', 'q2')] == 0.0  # sample 0's answer, as a string
    assert values[('F1', 'q2')] == 0.0
