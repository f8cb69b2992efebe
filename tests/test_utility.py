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
    assert q1['quality'].iloc[0] == pytest.approx(0.7)
    assert q1['quality_0shot'].iloc[0] == pytest.approx(0.4)
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
    assert (out['quality_0shot'] == 0).all()


def test_single_sample_keeps_plain_answer(counting_backend, results):
    reader = Reader(counting_backend)
    table = {'first doc (seed 0, 3 contexts)': 0.6, 'drag doc (seed 0, 1 contexts)': 0.3,
             'no context (seed 0, 0 contexts)': 0.3}
    out = UtilityEvaluator(reader, TableScorer(table))(reader(results))
    assert list(out.columns) == list(results.columns) + ['qanswer', 'logprob', 'mean_logprob', 'tokens', 'truncated',
                                                        'quality', 'quality_0shot', 'utility']
    assert out[out.qid == 'q1']['qanswer'].iloc[0] == 'first doc (seed 0, 3 contexts)'
    assert out[out.qid == 'q1']['utility'].iloc[0] == pytest.approx(1.0)


def test_empty_input_gives_empty_typed_frame(counting_backend, results):
    reader = Reader(counting_backend)
    out = UtilityEvaluator(reader, TableScorer({}))(reader(results).iloc[:0])
    assert out.empty and {'quality', 'quality_0shot', 'utility'} <= set(out.columns)


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


def test_absolute_gain_is_p_k_minus_p_0_even_where_p_0_is_zero(counting_backend):
    np.testing.assert_allclose(utility([0.6, 0.4, 0.3], [0.4, 0.5, 0.0], gain='absolute'), [0.2, -0.1, 0.3])
    assert np.isnan(utility([np.nan, 0.5], [0.5, np.nan], gain='absolute')).all()
    from pyterrier_utility.errors import SettingError
    with pytest.raises(SettingError, match="gain must be 'relative' or 'absolute', got 'ratio'"):
        utility([0.5], [0.4], gain='ratio')
    with pytest.raises(SettingError, match="UtilityEvaluator: gain must be"):
        UtilityEvaluator(Reader(counting_backend), TableScorer({}), gain='ratio')


def test_the_evaluators_absolute_gain_reaches_the_utility_measure_of_pt_experiment(counting_backend, results):
    import warnings

    import pandas as pd
    import pyterrier as pt

    from pyterrier_utility import measures
    reader = Reader(counting_backend, n_samples=2)
    table = {'first doc (seed 0, 3 contexts)': 0.6, 'first doc (seed 1, 3 contexts)': 0.8,
             'drag doc (seed 0, 1 contexts)': 0.3, 'drag doc (seed 1, 1 contexts)': 0.3,
             'no context (seed 0, 0 contexts)': 0.0, 'no context (seed 1, 0 contexts)': 0.2}
    evaluator = UtilityEvaluator(reader, TableScorer(table), gain='absolute')
    assert repr(evaluator).endswith(", gain='absolute')")
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # P_0 of 0 on one sample is no NaN for the absolute gain
        out = evaluator(reader(results))
    by_qid = out.drop_duplicates('qid').set_index('qid')
    # q1: P_k = (0.6 + 0.8) / 2, P_0 = (0.0 + 0.2) / 2; q2: P_k = 0.3, P_0 = 0.1.
    assert by_qid.loc['q1', 'utility'] == pytest.approx(0.7 - 0.1)
    assert by_qid.loc['q2', 'utility'] == pytest.approx(0.3 - 0.1)
    topics = results[['qid', 'query']].drop_duplicates()
    qrels = pd.DataFrame({'qid': ['q1', 'q2'], 'docno': ['d1', 'd4'], 'label': [1, 1]})
    system = pt.Transformer.from_df(results)
    experiment = pt.Experiment([system >> reader >> evaluator], topics, qrels, [measures.Utility, measures.FBERT],
                               names=['A'], perquery=True)
    got = experiment.pivot(index='qid', columns='measure', values='value')
    assert got['Utility'].to_dict() == pytest.approx({'q1': 0.6, 'q2': 0.2})
    assert (got['Utility'] == got['FBERT'] - by_qid['quality_0shot']).all()
