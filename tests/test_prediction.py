"""The predictors against their papers' definitions computed here by hand, the meta-evaluation against
scipy and scikit-learn, and the predict command on a small study folder (nothing generated)."""
import json
import math
import pickle
import sqlite3

import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from scipy import stats
from support.backends import CountingBackend

import pyterrier_utility as pu
from pyterrier_utility.prediction import evaluation

P = pu.prediction

#: Two queries, given out of rank order; q1 has five documents, q2 two.
RANKING = pd.DataFrame({
    'qid': ['q1'] * 5 + ['q2'] * 2,
    'query': ['what is the lift of a wing'] * 5 + ['drag'] * 2,
    'docno': ['a', 'b', 'c', 'd', 'e', 'f', 'g'],
    'score': [4.0, 9.0, 6.0, 1.0, 5.0, 2.0, 3.0],
    'text': ['lift wing', 'the lift of a wing is large', 'drag and lift', 'flow', 'wing flow lift', 'drag',
             'drag flow'],
})
#: q1 in rank order: b 9, c 6, e 5, a 4, d 1.
Q1 = np.array([9.0, 6.0, 5.0, 4.0, 1.0])

TEXTS = ['the lift of a wing', 'lift and drag of a plate', 'drag drag drag', 'heat transfer', 'wing flutter']


@pytest.fixture(scope='module')
def statistics():
    return P.TermStatistics.from_texts(TEXTS, stopwords=['the', 'of', 'a', 'and'], name='five')


def value(frame, column, qid='q1'):
    values = frame.loc[frame['qid'] == qid, column]
    assert values.nunique(dropna=False) == 1  # one value per query, on every row of it
    return values.iloc[0]


def test_nqc_is_the_std_of_the_top_scores_over_the_corpus_score():
    out = P.NQC(k=3)(RANKING)
    assert value(out, 'nqc') == pytest.approx(math.sqrt(((9 - 20 / 3) ** 2 + (6 - 20 / 3) ** 2 + (5 - 20 / 3) ** 2) / 3)
                                              / (25 / 5))
    given = P.NQC(k=3, corpus_score=lambda query: -2.0)(RANKING)
    assert value(given, 'nqc') == pytest.approx(np.std([9, 6, 5]) / 2)
    assert list(out.columns) == list(RANKING.columns) + ['nqc'] and len(out) == len(RANKING)


def test_the_authors_nqc_is_the_variance_times_the_largest_bm25_idf_with_unknown_words_at_df_1(statistics):
    # 'what', 'is', 'the', 'of' and 'a' are not counted (stopwords) or absent: df = 1, as in the authors' code.
    n = 5
    dfs = {'what': 1, 'is': 1, 'the': 1, 'lift': 2, 'of': 1, 'a': 1, 'wing': 2}
    idf = max(math.log((n - df + 0.5) / (df + 0.5)) for df in dfs.values())
    out = P.AuthorsNQC(statistics, k=4)(RANKING)
    assert value(out, 'nqc_authors') == pytest.approx(np.var([9, 6, 5, 4]) * idf)
    assert value(out, 'nqc_authors', 'q2') == pytest.approx(np.var([3, 2]) * math.log((5 - 2 + 0.5) / (2 + 0.5)))


def test_wig_is_the_mean_gain_over_the_corpus_score_per_root_query_word():
    out = P.WIG(k=2)(RANKING)
    assert value(out, 'wig') == pytest.approx(((9 - 5) + (6 - 5)) / 2 / math.sqrt(7))
    assert value(out, 'wig', 'q2') == pytest.approx(((3 - 2.5) + (2 - 2.5)) / 2)  # its whole ranking: no gain


def test_smv_is_the_score_weighted_log_deviation_over_the_corpus_score():
    mean = (9 + 6 + 5) / 3
    expected = (9 * abs(math.log(9 / mean)) + 6 * abs(math.log(6 / mean)) + 5 * abs(math.log(5 / mean))) / 3 / 5
    assert value(P.SMV(k=3)(RANKING), 'smv') == pytest.approx(expected)
    negative = RANKING.assign(score=RANKING['score'] - 3)  # q2's top score is 0: its log is undefined
    with pytest.warns(pu.errors.UtilityWarning, match='qid q2'):
        assert np.isnan(value(P.SMV(k=2)(negative), 'smv', 'q2'))


def test_the_max_score_is_the_top_ranked_documents():
    out = P.MaxScore()(RANKING)
    assert value(out, 'max_score') == 9.0 and value(out, 'max_score', 'q2') == 3.0


def test_idf_and_scq_from_the_collections_counts(statistics):
    assert statistics.df == {'lift': 2, 'wing': 2, 'drag': 2, 'plate': 1, 'heat': 1, 'transfer': 1, 'flutter': 1}
    assert statistics.cf['drag'] == 4 and statistics.n_docs == 5
    pipeline = P.MaxIDF(statistics) >> P.MeanIDF(statistics) >> P.SCQ(statistics, 'max') >> P.SCQ(statistics, 'sum')
    out = pipeline(RANKING)
    assert value(out, 'max_idf') == pytest.approx(math.log(5 / 2))  # lift, wing: df 2; the others unknown
    assert value(out, 'mean_idf') == pytest.approx(math.log(5 / 2))
    scq = {t: (1 + math.log(cf)) * math.log(1 + 5 / 2) for t, cf in (('lift', 2), ('wing', 2))}
    assert value(out, 'max_scq') == pytest.approx(max(scq.values()))
    assert value(out, 'sum_scq') == pytest.approx(sum(scq.values()))
    assert value(out, 'max_scq', 'q2') == pytest.approx((1 + math.log(4)) * math.log(1 + 5 / 2))
    with pytest.warns(pu.errors.UtilityWarning, match='no query term occurs in the collection, max_idf is NaN: qid q3'):
        none = P.MaxIDF(statistics)(pd.DataFrame({'qid': ['q3'], 'query': ['the of']}))
    assert np.isnan(none['max_idf'].iloc[0])


class FixedEncoder:
    """A bi-encoder of fixed vectors: the query's and each text's, given."""

    def __init__(self, vectors):
        self.vectors = vectors

    def __repr__(self):
        return f'FixedEncoder({len(self.vectors)} texts)'

    def query_encoder(self):
        return pt.apply.generic(lambda f: f.assign(query_vec=[np.array(self.vectors[q]) for q in f['query']]))

    def doc_encoder(self):
        return pt.apply.generic(lambda f: f.assign(doc_vec=[np.array(self.vectors[t]) for t in f['text']]))


VECTORS = {'drag flow': [0.5, 1.0, 1.0], 'drag': [1.0, 0.5, 0.0],
           'what is the lift of a wing': [0.0, 1.0, 1.0], 'the lift of a wing is large': [1.0, 2.0, 0.5],
           'drag and lift': [2.0, 0.5, 1.5], 'wing flow lift': [0.5, 0.5, 3.0], 'lift wing': [1.5, 1.0, 1.0],
           'flow': [0.2, 0.1, 0.3]}


def test_spatial_is_minus_the_log_volume_of_the_box_of_query_and_top_documents():
    out = P.Spatial(k=2, encoder=FixedEncoder(VECTORS))(RANKING)
    points = np.array([[0.0, 1.0, 1.0], [1.0, 2.0, 0.5], [2.0, 0.5, 1.5]])  # the query, b, c
    volume = np.prod(points.max(axis=0) - points.min(axis=0))
    assert value(out, 'spatial') == pytest.approx(-math.log(volume))


def test_a_pair_ratio_is_the_authors_head_over_tail_of_the_similarity_times_score_products():
    out = P.APairRatio(k=5, encoder=FixedEncoder(VECTORS))(RANKING)
    docs = [[1.0, 2.0, 0.5], [2.0, 0.5, 1.5], [0.5, 0.5, 3.0], [1.5, 1.0, 1.0], [0.2, 0.1, 0.3]]  # b c e a d
    scores = [9.0, 6.0, 5.0, 4.0, 1.0]

    def cos(u, v):
        return sum(a * b for a, b in zip(u, v)) / math.sqrt(sum(a * a for a in u) * sum(b * b for b in v))
    # The authors' product: entry (i, j) = sum over m of cos(d_i, d_m) * s_m * s_j.
    weighted = [[sum(cos(docs[i], docs[m]) * scores[m] * scores[j] for m in range(5)) for j in range(5)]
                for i in range(5)]
    head = weighted[0][0]  # ceil(0.1 * 5) = 1 document
    tail = [weighted[i][j] for i in range(1, 5) for j in range(1, 5)]  # from int(0.2 * 5) = 1 on
    assert value(out, 'a_pair_ratio') == pytest.approx(head / (sum(tail) / len(tail)))


def test_a_spatial_predictor_sharing_embeddings_encodes_no_text_again():
    encoder = FixedEncoder(VECTORS)
    a_pair = P.APairRatio(k=5, encoder=encoder)
    a_pair(RANKING)
    spatial = P.Spatial(k=2).sharing(a_pair)
    # Only the queries can be encoded now: a document not already encoded would fail with a KeyError.
    spatial.encoder = FixedEncoder({q: VECTORS[q] for q in RANKING['query']})
    spatial._model = spatial.encoder
    assert value(spatial(RANKING), 'spatial', 'q1') == pytest.approx(
        value(P.Spatial(k=2, encoder=encoder)(RANKING), 'spatial', 'q1'))


def test_readability_is_textstats_formula_over_the_context_joined():
    import textstat
    P.readability.use_local_cmudict()
    for formula, function in P.READABILITY.items():
        out = P.Readability(formula, k=2)(RANKING)
        expected = getattr(textstat, function)('the lift of a wing is large drag and lift')
        assert value(out, formula) == pytest.approx(expected), formula


def test_context_measures_against_a_hand_count():
    qrels = pd.DataFrame({'qid': ['q1', 'q1', 'q1'], 'docno': ['c', 'a', 'z'], 'label': [1, 1, 1]})
    measured = RANKING
    for name in ('P@3', 'AP@5', 'RR@5'):
        measured = P.ContextMeasure(qrels, name)(measured)
    # q1 ranks b c e a d: relevant at 2 and 4, 'z' never retrieved (3 relevant in all).
    assert value(measured, 'P@3') == pytest.approx(1 / 3)
    assert value(measured, 'AP@5') == pytest.approx((1 / 2 + 2 / 4) / 3)
    assert value(measured, 'RR@5') == pytest.approx(1 / 2)
    assert value(measured, 'P@3', 'q2') == 0.0
    # A document given twice counts once, at its first position: 'x' first, then the relevant 'r'.
    twice = pd.DataFrame({'qid': ['q3'] * 3, 'docno': ['x', 'r', 'x'], 'score': [3.0, 2.0, 1.0]})
    judged = pd.DataFrame({'qid': ['q3'], 'docno': ['r'], 'label': [1]})
    assert value(P.ContextMeasure(judged, 'RR@3')(twice), 'RR@3', 'q3') == 0.5


def test_answer_confidence_is_the_mean_of_the_answers_mean_logprob():
    answers = pd.DataFrame({'qid': ['q1', 'q1', 'q1', 'q2'], 'qanswer': ['a', 'b', 'c', 'd'],
                            'mean_logprob': [-0.5, -1.5, -4.0, -2.0]})
    out = P.AnswerConfidence()(answers)
    assert value(out, 'answer_confidence') == -2.0 and value(out, 'answer_confidence', 'q2') == -2.0
    assert 'confidence_0shot' in P.AnswerConfidence('confidence_0shot')(answers).columns


@pytest.mark.parametrize('predictor', [P.NQC(k=3), P.WIG(k=2), P.SMV(k=3), P.MaxScore(), P.SCQ(
    P.TermStatistics.from_texts(TEXTS)), P.Readability('ari'), P.Spatial(k=2, encoder=FixedEncoder(VECTORS))])
def test_predictors_print_pickle_and_compose(predictor):
    assert ' object at 0x' not in repr(predictor)
    attributes = pt.inspect.transformer_attributes(predictor)  # raises for an argument not kept under its name
    assert all(a.value is not pt.inspect.TransformerAttribute.MISSING for a in attributes)
    clone = pickle.loads(pickle.dumps(predictor))
    pd.testing.assert_frame_equal(clone(RANKING), predictor(RANKING))
    pipeline = pt.Transformer.from_df(RANKING) >> predictor
    assert predictor.column in pipeline(RANKING[['qid', 'query']].drop_duplicates()).columns


def test_correlations_equal_scipys_and_the_bootstrap_is_its_seeds():
    rng = np.random.default_rng(7)
    x = rng.normal(size=30)
    y = x + rng.normal(size=30)
    x[4] = np.nan  # left out of every coefficient
    found = evaluation.correlate(x, y, n_resamples=300, seed=3)
    keep = np.isfinite(x)
    for method, function in (('pearson', stats.pearsonr), ('spearman', stats.spearmanr),
                             ('kendall', stats.kendalltau)):
        r, p = function(x[keep], y[keep])
        assert found[method] == pytest.approx(r) and found[f'{method}_p'] == pytest.approx(p)
        assert found[f'{method}_low'] < r < found[f'{method}_high']
    assert found['n'] == 29
    assert evaluation.correlate(x, y, n_resamples=300, seed=3) == found
    assert evaluation.correlate(x, y, n_resamples=300, seed=4)['spearman_low'] != found['spearman_low']


def test_each_resamples_coefficient_equals_scipys_on_that_resample():
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 5, 25).astype(float), rng.normal(size=25)  # ties in x
    pick = evaluation.resamples(25, 50, seed=2)
    for method, function in (('pearson', stats.pearsonr), ('spearman', stats.spearmanr),
                             ('kendall', stats.kendalltau)):
        expected = [function(x[row], y[row])[0] for row in pick]
        assert np.allclose(evaluation.coefficients(x, y, pick, method), expected)
    low, high = evaluation.bootstrap_interval(x, y, 'kendall', n_resamples=50, seed=2)
    taus = [stats.kendalltau(x[row], y[row])[0] for row in pick]
    assert (low, high) == pytest.approx((np.percentile(taus, 2.5), np.percentile(taus, 97.5)))


def test_the_out_of_fold_regression_equals_a_fit_on_the_other_folds():
    from sklearn.model_selection import KFold
    rng = np.random.default_rng(0)
    features = pd.DataFrame({'a': rng.normal(size=20), 'b': rng.normal(size=20)})
    target = 2 * features['a'] - features['b'] + rng.normal(size=20)
    target.iloc[3] = np.nan  # left out
    predicted = evaluation.out_of_fold(features, target, folds=4, seed=5)
    kept = features.drop(index=3)
    y = target.drop(index=3).to_numpy()
    expected = pd.Series(np.nan, index=kept.index)
    for train, test in KFold(4, shuffle=True, random_state=5).split(kept):
        design = np.column_stack([np.ones(len(train)), kept.to_numpy()[train]])
        coefficients = np.linalg.lstsq(design, y[train], rcond=None)[0]
        expected.iloc[test] = np.column_stack([np.ones(len(test)), kept.to_numpy()[test]]) @ coefficients
    assert list(predicted.index) == list(kept.index)
    assert np.allclose(predicted, expected)


def test_system_tau_orders_the_cells_by_their_means():
    frame = pd.DataFrame({'system': ['A', 'A', 'B', 'B', 'C', 'C'], 'k': [1] * 6,
                          'nqc': [1, 3, 2, 2, 5, np.nan], 'utility': [0.125, 0.25, 0.5, 0.25, 0.25, 0.75]})
    found = evaluation.system_tau(frame, 'nqc', 'utility')
    tau, p = stats.kendalltau([2, 2, 5], [0.1875, 0.375, 0.5])  # the cells' means, NaN left out
    assert found == {'tau': pytest.approx(tau), 'p': pytest.approx(p), 'n': 3}


@pytest.mark.slow
def test_cli_predict_writes_signals_and_prediction_and_generates_nothing(tmp_path, monkeypatch, capsys):
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend(logprobs=True))
    assert cli.main(['study', '--systems', 'BM25', 'Rel', '--no-reverse', '-k', '2', '3', '--queries', '6',
                     '--samples', '1', '--labels', '2', '--out', str(tmp_path)]) == 0
    with sqlite3.connect(tmp_path / 'generations.sqlite') as db:
        tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        before = {t: db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables}

    def refuse(spec, **kw):
        raise AssertionError(f'predict built a backend ({spec})')
    monkeypatch.setattr(pu.backends, 'get_backend', refuse)
    capsys.readouterr()
    assert cli.main(['predict', '--out', str(tmp_path), '--folds', '3', '--resamples', '50', '--apair-k', '5']) == 0
    printed = capsys.readouterr().out
    assert "Spearman's rho" in printed and '0 answers generated' in printed
    with sqlite3.connect(tmp_path / 'generations.sqlite') as db:
        assert {t: db.execute(f'SELECT COUNT(*) FROM "{t}"').fetchone()[0] for t in tables} == before
    signals = pd.read_csv(tmp_path / 'signals.csv', dtype={'qid': str})
    per_query = pd.read_csv(tmp_path / 'per_query.csv', dtype={'qid': str})
    assert list(signals.columns[:7]) == list(pu.schema.SIGNALS_COLUMNS)
    assert len(signals) == len(per_query) == 2 * 2 * 6
    joined = signals.merge(per_query, on=['labels', 'system', 'k', 'qid'])
    assert np.allclose(joined['gain'], joined['quality_y'] - joined['quality_0shot'], equal_nan=True)
    bm25 = signals[signals['system'] == 'BM25']
    assert bm25[['nqc', 'nqc_authors', 'wig', 'smv', 'max_score', 'a_pair_ratio', 'spatial', 'flesch',
                 'answer_confidence', 'confidence_0shot', 'max_idf']].notna().all().all()
    assert signals.loc[signals['system'] == 'Rel', 'nqc'].isna().all()  # an oracle has no retrieval scores
    # The study's own answers' confidence, recomputed here from answers.csv.
    answers = pd.read_csv(tmp_path / 'answers.csv', dtype={'qid': str})
    expected = answers[answers['system'] == 'BM25'].groupby(['k', 'qid'])['mean_logprob'].mean()
    assert np.allclose(bm25.set_index(['k', 'qid'])['answer_confidence'].sort_index(), expected.sort_index())
    prediction = pd.read_csv(tmp_path / 'prediction.csv')
    assert list(prediction.columns) == list(pu.schema.PREDICTION_COLUMNS)
    assert set(prediction['level']) == {'query', 'system'}
    row = prediction[(prediction['level'] == 'query') & (prediction['system'] == 'BM25') & (prediction['k'] == 3)
                     & (prediction['signal'] == 'flesch') & (prediction['target'] == 'utility')].iloc[0]
    cell = bm25[bm25['k'] == 3]
    rho, p = stats.spearmanr(cell['flesch'], cell['utility'])
    assert row['spearman'] == pytest.approx(rho) and row['spearman_p'] == pytest.approx(p) and row['n'] == 6
    assert 'combined' in set(prediction['signal'])
    rel = prediction[prediction['system'] == 'Rel']  # the score signals left out of the oracle's rows
    assert not {'nqc', 'max_score', 'a_pair_ratio'} & set(rel['signal']) and 'combined' in set(rel['signal'])
    settings = json.loads((tmp_path / 'settings.json').read_text())
    assert settings['command'] == 'study' and settings['prediction']['folds'] == 3
    assert settings['prediction']['combined'] == [
        {'systems': ['BM25'], 'signals': list(pu.vocabulary.PREDICTION_COMBINATION)},
        {'systems': ['Rel'], 'signals': ['spatial', 'answer_confidence']}]
    assert 'nqc_authors' in settings['prediction']['signals']
    # The report gains the section and, among its figures, the heatmap.
    page = (tmp_path / 'report.html').read_text()
    assert 'id="prediction"' in page and 'fig6_prediction_rho.png' in page
    # UDCG needs the reader's model in this process: a reader it can only ask for answers is refused.
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend(logprobs=True))
    with pytest.raises(SystemExit):
        cli.main(['predict', '--out', str(tmp_path), '--udcg'])
    assert '--perplexity and --udcg need a reader whose model runs in process' in capsys.readouterr().err
    # A context the ranking run again no longer gives is refused, naming the system, query and k.
    contexts = pd.read_csv(tmp_path / 'contexts.csv', dtype=str, keep_default_na=False)
    first = contexts.index[(contexts['system'] == 'BM25') & (contexts['k'] == '2')][0]
    contexts.loc[first, 'docno'] = 'elsewhere'
    contexts.to_csv(tmp_path / 'contexts.csv', index=False)
    with pytest.raises(SystemExit):
        cli.main(['predict', '--out', str(tmp_path)])
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith(f"pyterrier-utility predict: error: BM25 qid {contexts.loc[first, 'qid']}: its ranking run "
                            'again (') and "is not the study's context at k=2 (['elsewhere'," in error


@pytest.mark.slow
def test_context_perplexity_equals_a_forward_pass_per_prefix_of_the_readers_model(gemma):
    import torch

    def by_prefixes(text):  # each token's probability from a forward pass over the tokens before it alone
        ids = gemma.tokenizer(text).input_ids
        with torch.no_grad():
            logprobs = [torch.log_softmax(gemma.model(torch.tensor([ids[:i]])).logits[0, -1].float(), -1)[ids[i]]
                        for i in range(1, len(ids))]
        return math.exp(-float(sum(logprobs)) / len(logprobs))
    top = ['the lift of a wing is large', 'drag and lift', 'wing flow lift']  # q1's top 3
    each = [by_prefixes(t) for t in top]
    mean = P.perplexity.ContextPerplexity(gemma, 'mean', k=3)
    out = mean(RANKING)
    assert value(out, 'mean_perplexity') == pytest.approx(np.mean(each), rel=2e-2)
    for agg, expected in (('max', max(each)), ('min', min(each)), ('whole', by_prefixes('\n\n'.join(top)))):
        found = P.perplexity.ContextPerplexity(gemma, agg, k=3).sharing(mean)(RANKING)
        assert value(found, f'{agg}_perplexity') == pytest.approx(expected, rel=2e-2), agg


#: The reader's probability of NO-RESPONSE from each document of RANKING alone.
NO_RESPONSE = {'a': 0.2, 'b': 0.9, 'c': 0.05, 'd': 0.5, 'e': 0.7, 'f': 0.3, 'g': 0.4}


def test_udcg_is_the_sigmoid_of_the_mean_of_relevant_utility_and_irrelevant_distraction():
    # q1 ranks b c e a d; c (label 2) and a (label 1) relevant, e judged 0, b and d unjudged.
    qrels = pd.DataFrame({'qid': ['q1', 'q1', 'q1', 'q1'], 'docno': ['c', 'a', 'e', 'z'], 'label': [2, 1, 0, 1]})
    scored = RANKING.assign(no_response=RANKING['docno'].map(NO_RESPONSE))

    def formula(docs, relevant, gamma=1 / 3):  # UDCG with its published weights: +1 relevant, -gamma irrelevant
        gains = [(1 - NO_RESPONSE[d]) if d in relevant else -gamma * (1 - NO_RESPONSE[d]) for d in docs]
        return 1 / (1 + math.exp(-sum(gains) / len(gains)))
    out = P.UDCG(qrels)(scored)
    assert value(out, 'udcg') == pytest.approx(formula('bcead', 'ca'))
    assert value(out, 'udcg', 'q2') == pytest.approx(formula('gf', ''))  # no relevant document: below 1/2
    assert value(P.UDCG(qrels, k=3)(scored), 'udcg') == pytest.approx(formula('bce', 'ca'))
    assert value(P.UDCG(qrels, relevant_weight=2.0, irrelevant_weight=-1.0)(scored), 'udcg') == pytest.approx(
        1 / (1 + math.exp(-(2 * 0.95 + 2 * 0.8 - 0.1 - 0.3 - 0.5) / 5)))
    # Every position weighs the same: the documents in the reverse order give the same value.
    reverse = scored.assign(score=-scored['score'])
    assert value(P.UDCG(qrels)(reverse), 'udcg') == pytest.approx(value(out, 'udcg'))
    assert list(out.columns) == list(scored.columns) + ['udcg'] and len(out) == len(scored)
    with pytest.warns(pu.errors.UtilityWarning, match='no document or no probability, udcg is NaN: qid q2'):
        missing = P.UDCG(qrels)(scored.assign(no_response=scored['no_response'].where(scored['docno'] != 'g')))
    assert np.isnan(value(missing, 'udcg', 'q2'))


def test_udcg_prints_pickles_and_composes():
    qrels = pd.DataFrame({'qid': ['q1'], 'docno': ['c'], 'label': [1]})
    predictor = P.UDCG(qrels, k=3)
    assert repr(predictor) == ('UDCG(qrels=<1 judgements>, relevant_weight=1.0, '
                               'irrelevant_weight=-0.3333333333333333, k=3)')
    attributes = pt.inspect.transformer_attributes(predictor)
    assert all(a.value is not pt.inspect.TransformerAttribute.MISSING for a in attributes)
    scored = RANKING.assign(no_response=RANKING['docno'].map(NO_RESPONSE))
    pd.testing.assert_frame_equal(pickle.loads(pickle.dumps(predictor))(scored), predictor(scored))
    pipeline = pt.Transformer.from_df(scored) >> predictor
    assert 'udcg' in pipeline(RANKING[['qid', 'query']].drop_duplicates()).columns


def test_the_predict_commands_udcg_follows_each_label_set():
    from pyterrier_utility.study.prediction import context_measures
    contexts = pd.DataFrame({'system': ['BM25'] * 2, 'k': [2, 2], 'qid': ['1', '1'], 'position': [2, 1],
                             'docno': ['y', 'x'], 'no_response': [0.6, 0.2]})
    qrels = pd.DataFrame({'qid': ['1', '1'], 'docno': ['x', 'y'], 'label': [1, 2]})
    cells = pd.DataFrame({'labels': ['label>=1', 'label>=2'], 'system': ['BM25'] * 2, 'k': [2, 2]})
    found = context_measures(contexts, qrels, cells).set_index('labels')['udcg']
    assert found['label>=1'] == pytest.approx(1 / (1 + math.exp(-(0.8 + 0.4) / 2)))
    assert found['label>=2'] == pytest.approx(1 / (1 + math.exp(-(-0.8 / 3 + 0.4) / 2)))
    assert 'udcg' not in context_measures(contexts.drop(columns='no_response'), qrels, cells).columns


@pytest.mark.slow
def test_no_response_is_the_readers_next_token_probability_of_the_marker():
    import torch
    gemma = pu.backends.gemma3_270m(dtype='float32')  # the prefill's chunks and one forward pass agree closely
    marker = gemma.tokenizer.encode(' NO-RESPONSE', add_special_tokens=False)[0]  # a base model: after "Answer:"
    assert gemma.tokenizer.decode([marker]) == ' NO'

    def by_forward_pass(query, text):
        prompt = P.abstention.ABSTENTION_PROMPT.format(query=query, text=text)
        assert prompt.endswith(f'Document: {text}\nQuestion: {query}\nAnswer:') and 'NO-RESPONSE' in prompt
        with torch.no_grad():
            logits = gemma.model(torch.tensor([gemma.tokenizer(prompt).input_ids])).logits[0, -1].float()
        return float(torch.log_softmax(logits, -1)[marker])
    scorer = P.NoResponse(gemma)
    out = scorer(RANKING)
    for row in out.itertuples():
        assert math.log(row.no_response) == pytest.approx(by_forward_pass(row.query, row.text), abs=1e-3), row.docno
    assert len(scorer._probabilities) == len(RANKING)
    assert repr(scorer) == "NoResponse('gemma-3-270m-q4_k_m', verbose=False)"
    assert out['no_response'].between(0, 1).all() and list(out.columns) == list(RANKING.columns) + ['no_response']


def test_cli_predict_refuses_a_folder_that_is_not_a_finished_study_in_one_line(tmp_path, capsys):
    from pyterrier_utility import cli
    with pytest.raises(SystemExit) as stopped:
        cli.main(['predict', '--out', str(tmp_path)])
    assert stopped.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.count('\n') == 0 and f'{tmp_path} is not a study folder: it holds no per_query.csv' in error
    (tmp_path / 'per_query.csv').write_text('labels,system,k,qid,n_docs,ndcg,quality_0shot,quality,utility\n'
                                            'label>=2,BM25,1,1,1,0.5,0.5,0.6,0.2\n')
    with pytest.raises(SystemExit):
        cli.main(['predict', '--out', str(tmp_path)])
    assert 'answers.csv does not exist: predict reads a finished study folder' in capsys.readouterr().err



def test_the_catalogue_records_each_signal_with_its_settings(statistics):
    settings = P.PredictionParameters(depth=50, wig_k=7, apair_k=5)
    catalogue = P.Catalogue.of(statistics, settings, k=4, verbose=False)
    assert list(catalogue.definitions) == [
        'max_idf', 'mean_idf', 'max_scq', 'nqc', 'nqc_authors', 'wig', 'smv', 'max_score', 'a_pair_ratio', 'spatial',
        *(P.Readability(f).column for f in P.READABILITY), 'answer_confidence', 'confidence_0shot', 'nDCG@k', 'P@k',
        'AP@k', 'RR@k']
    assert catalogue.definitions['a_pair_ratio'].endswith(f'; {P.APairRatio(5, verbose=False)!r}')
    assert catalogue.definitions['wig'].endswith(f'; {P.WIG(7)!r}')
    assert catalogue.definitions['spatial'].endswith(f'; {P.Spatial(k=4)!r}')
    assert catalogue.no_response is None


@pytest.mark.slow
def test_study_signals_and_run_prediction_give_the_predict_commands_files(tmp_path, monkeypatch):
    from pyterrier_utility import cli
    from pyterrier_utility.study import prediction
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend(logprobs=True))
    assert cli.main(['study', '--systems', 'BM25', 'Rel', '--no-reverse', '-k', '2', '--queries', '4',
                     '--samples', '1', '--labels', '2', '--out', str(tmp_path)]) == 0
    assert cli.main(['predict', '--out', str(tmp_path), '--folds', '2', '--resamples', '20', '--apair-k', '3']) == 0
    settings = P.PredictionParameters(folds=2, n_resamples=20, apair_k=3)
    study = pu.study.read_study(tmp_path)
    found = prediction.study_signals(study, prediction.checked_config(study), settings)
    assert found.signals.to_csv(index=False) == (tmp_path / 'signals.csv').read_text()
    assert found.definitions == json.loads((tmp_path / 'settings.json').read_text())['prediction']['signals']
    assert found.prediction.empty and found.signals['nqc'].notna().sum() == 4
    assert prediction.run_prediction(tmp_path, settings).prediction.to_csv(index=False) == \
        (tmp_path / 'prediction.csv').read_text()
