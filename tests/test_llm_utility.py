"""Each document's utility for a reader (DocumentUtility over utility_pool) and the reader's own utility
oracle (UtilityOracle), checked against the scorer's P computed directly."""
import numpy as np
import pandas as pd
import pytest
from support.backends import FirstContextBackend

from pyterrier_utility import DocumentUtility, ERAGLabeller, FBertScorer, Reader, UtilityOracle, utility_pool

TEXTS = {'d1': 'Paris is the capital of France', 'd2': 'the capital is London', 'd3': 'Rome, maybe',
         'd4': 'lift acts upward on a wing', 'd5': 'wings of birds', 'd6': 'Paris is the capital of France'}
QRELS = pd.DataFrame({'qid': ['q1', 'q1', 'q1', 'q2', 'q2'], 'docno': ['d1', 'd2', 'd6', 'd4', 'd5'],
                      'label': [2, 0, 1, 2, 0]})
TOPICS = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['capital of France?', 'what is lift?']})


def contexts(rows):
    frame = pd.DataFrame(rows, columns=['qid', 'docno', 'rank'])
    return frame.assign(system='s')


def test_the_pool_is_the_contexts_by_rank_then_the_judged_documents_each_once_and_capped():
    ctx = contexts([('q1', 'd3', 0), ('q1', 'd1', 1), ('q1', 'd2', 0), ('q2', 'd5', 0)])
    pool = utility_pool(TOPICS, ctx, QRELS, TEXTS)
    assert list(zip(pool['qid'], pool['docno'])) == [
        ('q1', 'd3'), ('q1', 'd2'), ('q1', 'd1'), ('q1', 'd6'), ('q2', 'd5'), ('q2', 'd4')]
    assert pool.loc[pool['docno'] == 'd3', 'label'].isna().all() and list(pool['label'][1:4]) == [0, 2, 1]
    assert pool['text'].tolist()[:2] == ['Rome, maybe', 'the capital is London']
    with pytest.warns(UserWarning, match=r'keeps 2 documents per query \(max_docs\): the rest are left out: qid q1$'):
        capped = utility_pool(TOPICS, ctx, QRELS, TEXTS, max_docs=2)
    assert capped.groupby('qid').size().tolist() == [2, 2]


def test_document_utility_is_p_alone_minus_p0_as_the_scorer_computes_them(minilm):
    backend = FirstContextBackend('I do not know')
    reader = Reader(backend)
    scorer = FBertScorer(QRELS, TEXTS, labels=2, model_type=minilm)
    pool = utility_pool(TOPICS, contexts([('q1', 'd3', 0)]), QRELS, TEXTS)
    out = DocumentUtility(reader, scorer)(pool)
    # Independently: each document's text is its answer (the echo), 'I do not know' without a context.
    p0 = dict(zip(['q1', 'q2'], scorer.score(['q1', 'q2'], ['I do not know'] * 2)))
    p_doc = scorer.score(list(out['qid']), list(out['text']))
    assert np.allclose(out['p_doc'], p_doc) and np.allclose(out['p0'], out['qid'].map(p0))
    assert np.allclose(out['gain'], p_doc - out['qid'].map(p0))
    assert np.allclose(out['relative_gain'], (p_doc - out['qid'].map(p0)) / out['qid'].map(p0))
    # The relevant document itself answers best; each distinct prompt was generated once: d1 and d6 hold
    # one text, so one prompt, and the two queries' 0-shot prompts are two more.
    best = out.loc[out.groupby('qid')['gain'].idxmax(), 'docno'].tolist()
    assert best[0] in ('d1', 'd6') and best[1] == 'd4'
    assert len(backend.calls) == len(set(backend.calls)) == len(pool) - 1 + 2
    # eRAG's labeller and the k=1 study answer from the same prompts: nothing is generated again.
    labels = ERAGLabeller(reader, scorer)(pool)
    assert np.allclose(labels['erag_label'], out['p_doc']) and len(backend.calls) == len(pool) + 1


def test_the_oracle_gives_the_documents_of_highest_positive_gain_ties_by_p_then_docno():
    utility = pd.DataFrame({
        'qid': ['q1'] * 5 + ['q2', 'q2'], 'docno': ['a', 'b', 'c', 'd', 'e', 'f', 'g'],
        'text': list('ABCDEFG'), 'p_doc': [0.5, 0.7, 0.7, 0.4, 0.9, 0.2, 0.3],
        'gain': [0.1, 0.3, 0.3, -0.1, 0.3, -0.2, 0.0]})
    oracle = UtilityOracle(utility, 'toy')
    with pytest.warns(UserWarning, match=r'no document of the pool has a positive gain for this reader: qid q2'):
        out = oracle(TOPICS)
    assert list(out['docno']) == ['e', 'b', 'c', 'a'] and list(out['rank']) == [0, 1, 2, 3]
    assert list(out['score']) == [0.3, 0.3, 0.3, 0.1] and repr(oracle).startswith('UtilityOracle(Util:toy')
    with pytest.warns(UserWarning) as seen:
        two = (oracle % 2).compile()(TOPICS)
    assert list(two['docno']) == ['e', 'b']
    assert not any('fewer than k' in str(w.message) for w in seen)
    with pytest.warns(UserWarning, match=r'fewer than k=5 documents \(all of positive gain\).*qid q1'):
        (oracle % 5).compile()(TOPICS)
    with pytest.warns(UserWarning, match=r'the pool was not measured for some queries: qid q3'):
        oracle(pd.DataFrame({'qid': ['q3'], 'query': ['x']}))


def _two_readers(seed=0):
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(6):
        for d in range(8):
            base = rng.normal()
            rows.append((f'q{q}', f'd{d}', [0, 1, 2, 3][d % 4], base, base + rng.normal(scale=0.8)))
    frame = pd.DataFrame(rows, columns=['qid', 'docno', 'label', 'a', 'b'])
    return pd.concat([frame.assign(reader='a', gain=frame['a']), frame.assign(reader='b', gain=frame['b'])])


def test_agreement_is_scipys_rank_correlation_per_query_and_pooled_and_the_jaccard_of_positive_gains():
    from scipy.stats import kendalltau, spearmanr

    from pyterrier_utility.study.transfer import AGREEMENT, reader_agreement
    utility = _two_readers()
    out = reader_agreement(utility, n_resamples=200, seed=3).set_index('statistic')
    assert list(out.index) == list(AGREEMENT) and set(out['reader_a']) == {'a'} and set(out['reader_b']) == {'b'}
    a = utility[utility['reader'] == 'a'].set_index(['qid', 'docno'])['gain']
    b = utility[utility['reader'] == 'b'].set_index(['qid', 'docno'])['gain']
    per_query = [spearmanr(a[q], b[q])[0] for q in a.index.get_level_values(0).unique()]
    assert out.loc['spearman_per_query', 'value'] == pytest.approx(np.mean(per_query))
    kendall = [kendalltau(a[q], b[q])[0] for q in a.index.get_level_values(0).unique()]
    assert out.loc['kendall_per_query', 'value'] == pytest.approx(np.mean(kendall))
    assert out.loc['spearman_pooled', 'value'] == pytest.approx(spearmanr(a, b)[0])
    assert out.loc['kendall_pooled', 'value'] == pytest.approx(kendalltau(a, b)[0])
    jaccard = []
    for q in a.index.get_level_values(0).unique():
        ua, ub = set(a[q][a[q] > 0].index), set(b[q][b[q] > 0].index)
        if ua | ub:
            jaccard.append(len(ua & ub) / len(ua | ub))
    assert out.loc['jaccard', 'value'] == pytest.approx(np.mean(jaccard))
    assert (out['low'] <= out['value']).all() and (out['value'] <= out['high']).all()
    assert list(out['n']) == [6, 6, 48, 48, len(jaccard)]
    # Seeded: the same intervals again; a reader agrees with itself perfectly.
    assert reader_agreement(utility, n_resamples=200, seed=3).equals(out.reset_index()[reader_agreement(
        utility, n_resamples=200, seed=3).columns])
    self = reader_agreement(pd.concat([utility[utility['reader'] == 'a'],
                                       utility[utility['reader'] == 'a'].assign(reader='c')]), n_resamples=50)
    assert np.allclose(self['value'], 1.0)


def test_label_auc_is_sklearns_and_cell_order_tau_is_scipys():
    from scipy.stats import kendalltau
    from sklearn.metrics import roc_auc_score

    from pyterrier_utility.study.transfer import cell_order_tau, label_auc
    utility = _two_readers(1)
    utility.loc[utility['docno'] == 'd7', 'label'] = np.nan  # unjudged: left out
    out = label_auc(utility, labels=2).set_index('reader')
    for reader in ('a', 'b'):
        judged = utility[(utility['reader'] == reader) & utility['label'].notna()]
        assert out.loc[reader, 'auc'] == pytest.approx(roc_auc_score(judged['label'] >= 2, judged['gain']))
        assert (out.loc[reader, 'relevant'], out.loc[reader, 'nonrelevant']) == (
            int((judged['label'] >= 2).sum()), int((judged['label'] < 2).sum()))
    cells = pd.DataFrame({'reader': ['a'] * 4 + ['b'] * 4, 'system': ['BM25', 'BM25', 'Rel', 'Rel'] * 2,
                          'k': [1, 3] * 4, 'utility': [0.1, 0.2, 0.4, 0.3, 0.0, 0.3, 0.5, 0.1]})
    tau = cell_order_tau(cells).iloc[0]
    expected = kendalltau([0.1, 0.2, 0.4, 0.3], [0.0, 0.3, 0.5, 0.1])
    assert (tau['reader_a'], tau['reader_b'], tau['n']) == ('a', 'b', 4)
    assert tau['tau'] == pytest.approx(expected[0]) and tau['p'] == pytest.approx(expected[1])
