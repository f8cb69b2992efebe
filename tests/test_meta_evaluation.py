"""The predict command's meta-evaluation against scipy and scikit-learn on hand-made cells: a signal left
out of the systems it does not apply to, each system's combination, the cells with too few queries
named; and the command over a study of the oracles alone (nothing generated)."""
import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from support.backends import CountingBackend

import pyterrier_utility as pu
from pyterrier_utility.prediction import evaluation
from pyterrier_utility.study import meta_evaluation as meta

P = pu.prediction


def _signals(systems=('BM25', 'Rel'), queries=6, labels=('label>=2',), ks=(2,)):
    """signals.csv's rows for hand-made cells: ``max_score`` only where the system is not an oracle."""
    rng = np.random.default_rng(3)
    rows = [dict(labels=label, system=system, k=k, qid=f'q{q}', utility=rng.normal(), gain=rng.normal(),
                 quality=rng.uniform(), spatial=rng.normal(), max_score=np.nan if system == 'Rel' else rng.normal())
            for label in labels for system in systems for k in ks for q in range(queries)]
    return pd.DataFrame(rows)


ORACLE = {'Rel': {'max_score': 'an oracle'}}


def test_a_signal_left_out_of_a_system_has_no_row_of_it_and_the_default_combination_is_each_systems():
    signals = _signals()
    settings = P.PredictionParameters(folds=3, n_resamples=20)
    combined = meta.combinations(['BM25', 'Rel'], ['spatial', 'max_score'], settings, ORACLE)
    assert combined == {'BM25': ['max_score', 'spatial'], 'Rel': ['spatial']}  # PREDICTION_COMBINATION's order
    with pytest.warns(pu.errors.UtilityWarning, match=r'cells of label>=2 for spatial \(2 cells\); label>=2 for '
                      r'max_score \(1 cell\): it needs 3 cells$'):
        found = meta.meta_evaluate(signals, ['spatial', 'max_score'], settings, ORACLE, combined)
    rows = found[found['level'] == 'query']
    assert set(zip(rows['system'], rows['signal'])) == {('BM25', 'spatial'), ('BM25', 'max_score'),
                                                        ('BM25', 'combined'), ('Rel', 'spatial'), ('Rel', 'combined')}
    bm25 = signals[signals['system'] == 'BM25']
    row = rows[(rows['system'] == 'BM25') & (rows['signal'] == 'max_score') & (rows['target'] == 'gain')].iloc[0]
    assert row['spearman'] == pytest.approx(stats.spearmanr(bm25['max_score'], bm25['gain'])[0]) and row['n'] == 6
    rel = signals[signals['system'] == 'Rel']
    expected = evaluation.out_of_fold(rel[['spatial']], rel['utility'], folds=3, seed=0)
    row = rows[(rows['system'] == 'Rel') & (rows['signal'] == 'combined') & (rows['target'] == 'utility')].iloc[0]
    assert row['pearson'] == pytest.approx(stats.pearsonr(expected, rel.loc[expected.index, 'utility'])[0])
    tau = found[(found['level'] == 'system') & (found['signal'] == 'max_score')]
    assert set(tau['n']) == {1}  # over BM25's one cell: Rel's is not counted as a NaN mean
    assert str(found['k'].dtype) == 'Int64' and str(found['n'].dtype) == 'Int64'
    assert found.to_csv(index=False).splitlines()[1].startswith('label>=2,query,BM25,2,spatial,utility,6,')


def test_a_combination_the_user_gave_is_refused_only_where_a_signal_applies_to_no_system():
    from pyterrier_utility.errors import SettingError
    both = {'Rel': dict(ORACLE['Rel']), 'NRel': {'max_score': 'an oracle'}}
    given = P.PredictionParameters(combine=('max_score', 'spatial'))
    assert meta.combinations(['BM25', 'Rel'], ['spatial', 'max_score'], given, ORACLE) == {
        'BM25': ['max_score', 'spatial'], 'Rel': ['spatial']}
    with pytest.raises(SettingError) as e:
        meta.combinations(['Rel', 'NRel'], ['spatial', 'max_score'], given, both)
    assert str(e.value) == ('combine (--combine) names max_score, which applies to no system of the study (Rel, NRel: '
                            'an oracle)')
    with pytest.raises(SettingError) as e:
        meta.combinations(['BM25'], ['spatial'], P.PredictionParameters(combine=('mean_perplexity',)), {})
    assert str(e.value) == ('combine (--combine) names mean_perplexity, which predict does not compute here (the '
                            'perplexity signals need --perplexity, udcg needs --udcg; computed: spatial)')
    # The default combination takes what exists: nothing for a system where none of its signals applies.
    assert meta.combinations(['Rel', 'NRel'], ['max_score'], P.PredictionParameters(), both) == {'Rel': [], 'NRel': []}
    record = meta.grouped(both, {'Rel': [], 'NRel': []})
    assert record == {'left_out': [{'systems': ['Rel', 'NRel'], 'signals': ['max_score'], 'reason': 'an oracle'}],
                      'combined': [{'systems': ['Rel', 'NRel'], 'signals': []}]}
    assert meta.notes(record) == ['max_score left out of Rel, NRel: an oracle',
                                  'combined: none for Rel, NRel (none of its signals applies)']


def test_too_few_queries_or_cells_for_a_coefficient_are_named_in_one_warning_each():
    signals = _signals(queries=2, labels=('label>=2', 'label>=3'))
    combined = {'BM25': ['max_score', 'spatial'], 'Rel': ['spatial']}
    with pytest.warns(pu.errors.UtilityWarning) as caught:
        found = meta.meta_evaluate(signals, ['spatial', 'max_score'], P.PredictionParameters(n_resamples=20), ORACLE,
                                   combined)
    assert [str(w.message) for w in caught] == [
        'no coefficient over the queries of label>=2 BM25 k=2 (2 queries); label>=2 Rel k=2 (2 queries); label>=3 '
        'BM25 k=2 (2 queries); label>=3 Rel k=2 (2 queries): a correlation needs 3 queries',
        "no Kendall's tau over the (system, k) cells of label>=2 for spatial (2 cells); label>=2 for max_score "
        "(1 cell); label>=3 for spatial (2 cells); label>=3 for max_score (1 cell): it needs 3 cells"]
    assert found['spearman'].isna().all() and set(found.loc[found['level'] == 'query', 'n']) == {2}
    assert meta.summary(found) == ("Spearman's rho with each target, label>=2: none in any cell (a coefficient needs "
                                   '3 queries, over which signal and target vary)')
    # A study of one system at one k: coefficients over its queries, no Kendall's tau over its one cell.
    one = _signals(systems=('BM25',), queries=4)
    with pytest.warns(pu.errors.UtilityWarning) as caught:
        found = meta.meta_evaluate(one, ['spatial', 'max_score'], P.PredictionParameters(folds=3, n_resamples=20), {},
                                   {'BM25': ['spatial']})
    assert [str(w.message) for w in caught] == [
        "no Kendall's tau over the (system, k) cells of label>=2 for every signal (1 cell): it needs 3 cells"]
    rho = found.set_index(['level', 'signal', 'target']).loc[('query', 'max_score', 'quality'), 'spearman']
    assert rho == pytest.approx(stats.spearmanr(one['max_score'], one['quality'])[0])


@pytest.mark.slow
def test_cli_predict_over_a_study_of_the_oracles_alone_leaves_the_score_signals_out_and_says_why(tmp_path,
                                                                                                   monkeypatch, capsys):
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend(logprobs=True))
    assert cli.main(['study', '--systems', 'Rel', 'NRel', '-k', '1', '--queries', '2', '--samples', '1',
                     '--labels', '2', '3', '--out', str(tmp_path)]) == 0
    capsys.readouterr()
    with pytest.warns(pu.errors.UtilityWarning) as caught:
        assert cli.main(['predict', '--out', str(tmp_path), '--resamples', '20', '--apair-k', '5']) == 0
    printed = capsys.readouterr()
    assert ("nqc, nqc_authors, wig, smv, max_score, a_pair_ratio left out of Rel, NRel: an oracle's documents are "
            'drawn from the judgements, with no retrieval score\ncombined: Rel, NRel over spatial, '
            'answer_confidence\n') in printed.err
    assert [str(w.message) for w in caught if w.category is pu.errors.UtilityWarning] == [
        'no coefficient over the queries of label>=2 Rel k=1 (2 queries); label>=2 NRel k=1 (2 queries); '
        'label>=3 Rel k=1 (2 queries); label>=3 NRel k=1 (2 queries): a correlation needs 3 queries',
        "no Kendall's tau over the (system, k) cells of label>=2 for every signal (2 cells); label>=3 for every signal "
        '(2 cells): it needs 3 cells']
    assert "Spearman's rho with each target, label>=2: none in any cell" in printed.out
    prediction = pd.read_csv(tmp_path / 'prediction.csv', dtype=str, keep_default_na=False)
    query = prediction[prediction['level'] == 'query']
    assert set(query['labels']) == {'label>=2', 'label>=3'} and set(query['k']) == {'1'} and set(query['n']) == {'2'}
    assert not {'nqc', 'max_score', 'a_pair_ratio'} & set(prediction['signal'])
    assert {'spatial', 'flesch', 'answer_confidence', 'combined'} <= set(query['signal'])
    assert set(prediction.loc[prediction['level'] == 'system', 'k']) == {''}
    signals = pd.read_csv(tmp_path / 'signals.csv', dtype=str, keep_default_na=False)
    assert set(signals['k']) == {'1'} and set(signals['max_score']) == {''}
    page = (tmp_path / 'report.html').read_text()  # the report says it too
    assert ('<p class="note">nqc, nqc_authors, wig, smv, max_score, a_pair_ratio left out of Rel, NRel: an '
            'oracle&#x27;s documents are drawn from the judgements, with no retrieval score</p><p class="note">'
            'combined: Rel, NRel over spatial, answer_confidence</p>') in page
    recorded = json.loads((tmp_path / 'settings.json').read_text())['prediction']
    assert recorded['combined'] == [{'systems': ['Rel', 'NRel'], 'signals': ['spatial', 'answer_confidence']}]
    assert recorded['left_out'] == [{'systems': ['Rel', 'NRel'], 'reason': "an oracle's documents are drawn from the "
                                     'judgements, with no retrieval score', 'signals': ['nqc', 'nqc_authors', 'wig',
                                                                                        'smv', 'max_score',
                                                                                        'a_pair_ratio']}]
    # A combination the user gave is refused where it names a signal no system has.
    with pytest.raises(SystemExit) as stopped:
        cli.main(['predict', '--out', str(tmp_path), '--combine', 'spatial', 'max_score'])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        'pyterrier-utility predict: error: combine (--combine) names max_score, which applies to no system of the '
        "study (Rel, NRel: an oracle's documents are drawn from the judgements, with no retrieval score)")
    # A reader that gave no log-probability: the confidences are left out of every system, and said why.
    answers = pd.read_csv(tmp_path / 'answers.csv', dtype=str, keep_default_na=False)
    answers.assign(mean_logprob='', logprob='').to_csv(tmp_path / 'answers.csv', index=False)
    with pytest.warns(pu.errors.UtilityWarning):
        assert cli.main(['predict', '--out', str(tmp_path), '--resamples', '20', '--apair-k', '5']) == 0
    printed = capsys.readouterr().err
    assert (f'answer_confidence, confidence_0shot left out of Rel, NRel: {tmp_path / "answers.csv"} has no '
            'mean_logprob: the reader gave no log-probability\ncombined: Rel, NRel over spatial\n') in printed
    assert 'answer_confidence' not in set(pd.read_csv(tmp_path / 'prediction.csv')['signal'])
