import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pyterrier.measures import nDCG

import pyterrier_utility as pu

QRELS = pd.DataFrame([('q1', 'd1', 2), ('q1', 'd2', 0), ('q2', 'd4', 1), ('q3', 'd9', 2)],
                     columns=['qid', 'docno', 'label'])


def run_with(values):
    rows = []
    for qid, (fbert, fb0, u) in values.items():
        for rank, docno in enumerate(['d1', 'd2']):
            rows.append({'qid': qid, 'query': qid, 'docno': docno, 'score': 2.0 - rank, 'rank': rank,
                         'qanswer': 'a', 'quality': fbert, 'quality_0shot': fb0, 'utility': u})
    return pd.DataFrame(rows)


def test_measures_in_experiment_read_columns_with_one_mean_everywhere():
    run = run_with({'q1': (0.6, 0.4, 0.5), 'q2': (0.3, 0.5, -0.4), 'q3': (np.nan, 0.5, np.nan)})
    topics = pd.DataFrame({'qid': ['q1', 'q2', 'q3'], 'query': ['q1', 'q2', 'q3']})
    system = pt.Transformer.from_df(run)
    answerable = pu.datasets.answerable_topics(topics, QRELS, labels=1)
    assert list(answerable['qid']) == ['q1', 'q2', 'q3']
    res = pt.Experiment([system], topics[topics.qid != 'q3'], QRELS,
                        [nDCG @ 2, pu.FBERT, pu.FBERT0, pu.Utility], names=['s'])
    assert res['FBERT'][0] == pytest.approx(0.45)
    assert res['FBERT0'][0] == pytest.approx(0.45)
    assert res['Utility'][0] == pytest.approx(0.05)
    with_nan = pt.Experiment([system], topics, QRELS, [pu.Utility], names=['s'])
    assert np.isnan(with_nan['Utility'][0])  # pt.Experiment's own mean: visible, not silently skipped
    import ir_measures
    agg = ir_measures.calc_aggregate([pu.Utility],
                                     pt.model.to_ir_measures(QRELS.rename(columns={'label': 'relevance'})),
                                     pt.model.to_ir_measures(run))
    assert np.isnan(agg[pu.Utility])  # the same mean as pt.Experiment's
    answerable = (pt.model.to_ir_measures(QRELS[QRELS.qid != 'q3'].rename(columns={'label': 'relevance'})),
                  pt.model.to_ir_measures(run[run.qid != 'q3']))
    agg = ir_measures.calc_aggregate([pu.Utility, pu.FBERT], *answerable)
    assert agg[pu.Utility] == pytest.approx(res['Utility'][0]) and agg[pu.FBERT] == pytest.approx(res['FBERT'][0])
    two = QRELS[QRELS.qid != 'q3'].rename(columns={'label': 'relevance'})
    expected_ndcg = ir_measures.calc_aggregate([ir_measures.nDCG @ 2], pt.model.to_ir_measures(two),
                                               pt.model.to_ir_measures(run[run.qid != 'q3']))[ir_measures.nDCG @ 2]
    assert res['nDCG@2'][0] == pytest.approx(expected_ndcg)
    per_query = pt.Experiment([system], topics, QRELS, [pu.Utility], perquery=True)
    assert per_query.set_index('qid')['value'].to_dict() == pytest.approx({'q1': 0.5, 'q2': -0.4, 'q3': np.nan},
                                                                           nan_ok=True)


def test_pt_experiment_reuses_saved_runs_with_save_format_pickle_not_trec(cranfield, minilm, tmp_path):
    """TREC run files keep qid, docno, rank and score: the evaluators' columns need ``save_format=pickle``."""
    import pickle

    from support.backends import CountingBackend
    qrels = cranfield.get_qrels()
    topics = pu.datasets.answerable_topics(cranfield.get_topics().head(3), qrels)
    backend = CountingBackend()
    reader = pu.Reader(backend)
    system = pu.OracleSampler(qrels, cranfield.texts) % 2 >> reader >> pu.UtilityEvaluator(
        reader, pu.FBertScorer(qrels, cranfield.texts, model_type=minilm))

    def experiment(fmt, folder):
        folder.mkdir(exist_ok=True)
        return pt.Experiment([system], topics, qrels, [pu.FBERT, pu.Utility], names=['Rel'], save_dir=str(folder),
                             save_mode='reuse', save_format=fmt)
    first = experiment(pickle, tmp_path / 'pickled')
    generated = len(backend.calls)
    pd.testing.assert_frame_equal(experiment(pickle, tmp_path / 'pickled'), first)
    assert len(backend.calls) == generated  # read back, nothing generated
    experiment('trec', tmp_path / 'trec')
    with pytest.raises(KeyError, match='quality|utility'):
        experiment('trec', tmp_path / 'trec')
