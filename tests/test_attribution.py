"""Attribution of U to the documents of a context: the estimators against their definitions and the
Shapley axioms on hand-made games, the transformer on a backend whose answers say which documents
their prompt held, and the ``attribute`` command's files."""
import contextlib
import itertools
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from support.backends import CountingBackend, EchoBackend
from support.simulated_server import SimulatedServer, simulated_answer

import pyterrier_utility as pu
from pyterrier_utility.errors import FrameError, SettingError
from pyterrier_utility.methods.attribution import ContextAttribution, games, utility_qrels, write_trec_qrels
from pyterrier_utility.methods.attribution.quality import held_out, quality_table
from pyterrier_utility.study.output import LOCK

METHODS = ('shapley', 'permutation', 'loo', 'single')


def interacting(s):
    """Positions 1 and 2 help only together (0.3), 3 helps alone (0.1), 4 hurts (-0.05), 5 does nothing."""
    return 0.5 + 0.3 * (1 in s and 2 in s) + 0.1 * (3 in s) - 0.05 * (4 in s)


def random_game(k, seed):
    rng = np.random.default_rng(seed)
    table = {frozenset(c): float(rng.normal())
             for n in range(k + 1) for c in itertools.combinations(range(1, k + 1), n)}
    return table.__getitem__


def by_orders(v, k):
    """The Shapley value by its definition: each player's marginal contribution averaged over all k! orders."""
    phi = np.zeros(k)
    for order in itertools.permutations(range(1, k + 1)):
        before = set()
        for i in order:
            phi[i - 1] += v(frozenset(before | {i})) - v(frozenset(before))
            before.add(i)
    return phi / math.factorial(k)


def run(v, k, method, **kw):
    if method == 'permutation':
        kw.setdefault('budget', 2 + 50 * (k - 1))
    return games.estimate(v, k, method, **kw)


# The estimators on hand-made games.

@pytest.mark.parametrize('k', [1, 2, 3, 4, 5])
def test_exact_shapley_is_the_average_over_all_orders(k):
    for seed in range(3):
        v = random_game(k, seed)
        assert np.allclose(games.shapley(v, k).phi, by_orders(v, k), atol=1e-12, rtol=0)


def test_the_interacting_game_has_its_known_values():
    assert np.allclose(games.shapley(interacting, 5).phi, [0.15, 0.15, 0.1, -0.05, 0], atol=1e-12)
    assert np.allclose(games.loo(interacting, 5).phi, [0.3, 0.3, 0.1, -0.05, 0], atol=1e-12)
    assert np.allclose(games.single(interacting, 5).phi, [0, 0, 0.1, -0.05, 0], atol=1e-12)


@pytest.mark.parametrize('method', ['shapley', 'permutation'])
def test_shapley_values_exact_or_sampled_are_efficient_on_any_game(method):
    for k in (1, 2, 4, 6):
        for seed in range(3):
            v = random_game(k, seed)
            phi = run(v, k, method, seed=seed).phi
            assert abs(phi.sum() - (v(games.everyone(k)) - v(frozenset()))) < 1e-9


@pytest.mark.parametrize('method', METHODS)
def test_every_method_is_efficient_on_an_additive_game(method):
    weights = [0.2, -0.1, 0.05, 0.0]
    additive = lambda s: 0.4 + sum(weights[i - 1] for i in s)  # noqa: E731
    phi = run(additive, 4, method).phi
    assert np.allclose(phi, weights, atol=1e-12) and abs(phi.sum() - sum(weights)) < 1e-9


def test_leave_one_out_and_single_are_not_efficient_when_documents_interact():
    gain = interacting(games.everyone(5)) - interacting(frozenset())  # 0.35
    assert games.loo(interacting, 5).phi.sum() == pytest.approx(0.65)
    assert games.single(interacting, 5).phi.sum() == pytest.approx(0.05)
    assert games.shapley(interacting, 5).phi.sum() == pytest.approx(gain, abs=1e-12)


def test_symmetric_players_get_the_same_value():
    phi = games.shapley(interacting, 5).phi
    assert phi[0] == pytest.approx(phi[1], abs=1e-15)
    swapped = lambda s: interacting(frozenset({1: 2, 2: 1}.get(i, i) for i in s))  # noqa: E731
    assert np.allclose(games.shapley(swapped, 5).phi, phi, atol=1e-15)


@pytest.mark.parametrize('method', METHODS)
def test_a_null_player_gets_zero(method):
    assert run(interacting, 5, method).phi[4] == 0


@pytest.mark.parametrize('method', METHODS)
def test_the_value_of_a_sum_of_games_is_the_sum_of_their_values(method):
    v, w = random_game(4, 1), random_game(4, 2)
    both = lambda s: v(s) + w(s)  # noqa: E731
    # Permutation sampling with one seed draws the same orders for every game: linear too.
    assert np.allclose(run(both, 4, method, seed=3).phi, run(v, 4, method, seed=3).phi + run(w, 4, method, seed=3).phi,
                       atol=1e-12)


def test_leave_one_out_and_single_are_their_definitions():
    v, k = random_game(4, 5), 4
    full = frozenset({1, 2, 3, 4})
    assert games.loo(v, k).phi.tolist() == [v(full) - v(full - {i}) for i in range(1, 5)]
    assert games.single(v, k).phi.tolist() == [v(frozenset({i})) - v(frozenset()) for i in range(1, 5)]


def test_permutation_sampling_converges_to_the_exact_values():
    v, k = random_game(5, 7), 5
    exact = games.shapley(v, k).phi
    errors = {}
    for budget in (2 + 4 * 4, 2 + 4 * 4000):  # 4 orders, 4000 orders
        found = games.permutation(v, k, budget, seed=11)
        errors[budget] = np.abs(found.phi - exact).max()
        assert (np.abs(found.phi - exact) < 5 * found.stderr + 1e-12).all()
    assert errors[16002] < errors[18] / 10
    assert errors[16002] < 0.05


def test_the_budget_pays_for_whole_orders():
    assert games.permutations_for(40, 4) == 12  # v(empty), v(all), then 3 prefixes per order
    assert games.permutations_for(2, 1) == 1
    with pytest.raises(SettingError, match='less than one order'):
        games.permutations_for(4, 4)
    assert games.permutation(interacting, 1, 2).stderr.tolist() == [0.0]
    assert np.isnan(games.permutation(interacting, 3, 4).stderr).all()  # one order: no spread


def test_coalitions_are_those_the_estimator_reads():
    assert games.coalitions(2, 'shapley') == [frozenset(), frozenset({1}), frozenset({2}), frozenset({1, 2})]
    assert games.coalitions(3, 'loo') == [frozenset({1, 2}), frozenset({1, 3}), frozenset({2, 3}),
                                         frozenset({1, 2, 3})]
    assert games.coalitions(2, 'single') == [frozenset(), frozenset({1}), frozenset({2})]
    sampled = games.coalitions(4, 'permutation', budget=20, seed=0)
    assert frozenset() in sampled and frozenset({1, 2, 3, 4}) in sampled and len(sampled) <= 20
    table = {c: 1.0 for c in sampled}
    games.estimate(table.__getitem__, 4, 'permutation', budget=20, seed=0)  # reads nothing else
    assert [games.coalition_name(c) for c in games.coalitions(2, 'shapley')] == ['', '1', '2', '1 2']
    assert games.parse_coalition('1 3') == frozenset({1, 3}) and games.parse_coalition(float('nan')) == frozenset()


def test_bad_settings_are_refused_with_what_to_do():
    with pytest.raises(SettingError, match="k=11.*a sampling method .'permutation' or 'kernelshap'"):
        games.estimate(interacting, 11, 'shapley')
    for method in games.SAMPLED:
        with pytest.raises(SettingError, match=f"'{method}' needs a budget"):
            games.estimate(interacting, 3, method)
    with pytest.raises(SettingError, match="budget applies to the sampling methods .'permutation' or 'kernelshap' or "
                                           "'tmc' or 'contextcite'. only, not 'loo'"):
        games.estimate(interacting, 3, 'loo', budget=10)
    with pytest.raises(SettingError, match="method must be 'shapley' or 'permutation' or 'kernelshap' or 'tmc' or "
                                           "'contextcite' or 'loo' or 'single'"):
        games.estimate(interacting, 3, 'banzhaf')
    with pytest.raises(SettingError, match="kernelshap: a budget of 3 coalitions leaves no draw of 2"):
        games.estimate(interacting, 3, 'kernelshap', budget=3)
    with pytest.raises(SettingError, match="tmc: a budget of 3 .* less than one order of k=3"):
        games.estimate(interacting, 3, 'tmc', budget=3)
    with pytest.raises(SettingError, match="tolerance must be a number >= 0, got -0.1"):
        games.estimate(interacting, 3, 'tmc', budget=8, tolerance=-0.1)


# The field's estimators on synthetic games of four documents with known Shapley values.

#: Name -> (game, its Shapley values): additive; documents 1 and 2 identical (redundant: they share
#: the credit); 1 and 2 helping only together (complementary); 3 lowering P (a distractor).
SYNTHETIC = {
    'additive': (lambda s: 0.5 + 0.1 * (1 in s) + 0.05 * (2 in s) - 0.02 * (3 in s) + 0.2 * (4 in s),
                 [0.1, 0.05, -0.02, 0.2]),
    'redundant': (lambda s: 0.5 + 0.2 * (1 in s or 2 in s) + 0.1 * (3 in s), [0.1, 0.1, 0.1, 0.0]),
    'complementary': (lambda s: 0.5 + 0.3 * (1 in s and 2 in s) + 0.05 * (3 in s), [0.15, 0.15, 0.05, 0.0]),
    'distractor': (lambda s: 0.5 + 0.1 * (1 in s) + 0.1 * (2 in s) - 0.15 * (3 in s), [0.1, 0.1, -0.15, 0.0]),
}
#: Per sampling method: (budget, largest error allowed on an additive game, on one whose documents
#: interact). Orders give an additive game's values exactly; paired Kernel SHAP is exact on games of
#: pairwise interactions from 12 of the 16 coalitions; ContextCite's Lasso shrinks its weights a little,
#: and on interacting documents fits the Banzhaf values (here equal to Shapley's) from random draws.
BUDGETS = {'permutation': (2 + 3 * 400, 1e-12, 0.03), 'tmc': (2 + 3 * 400, 1e-12, 0.03),
           'kernelshap': (12, 1e-9, 1e-9), 'contextcite': (16, 0.01, 0.07)}


@pytest.mark.parametrize('game', SYNTHETIC)
def test_the_synthetic_games_have_their_closed_form_shapley_values(game):
    v, expected = SYNTHETIC[game]
    assert np.allclose(by_orders(v, 4), expected, atol=1e-12)
    assert np.allclose(games.estimate(v, 4, 'shapley').phi, expected, atol=1e-12)


@pytest.mark.parametrize('method', list(BUDGETS))
@pytest.mark.parametrize('game', SYNTHETIC)
def test_each_estimator_meets_the_closed_form_values_within_its_tolerance_at_its_budget(method, game):
    v, expected = SYNTHETIC[game]
    budget, additive, interacting_ = BUDGETS[method]
    phi = games.estimate(v, 4, method, budget=budget, seed=0).phi
    tolerance = additive if game in ('additive', 'distractor') else interacting_
    assert np.abs(phi - expected).max() <= tolerance
    assert np.sign(phi[2]) == np.sign(expected[2])  # the distractor hurts, document 3 of the others helps


@pytest.mark.parametrize('game', SYNTHETIC)
def test_kernel_shap_over_every_coalition_is_the_exact_shapley_value(game):
    v, expected = SYNTHETIC[game]
    assert np.allclose(games.estimate(v, 4, 'kernelshap', budget=16).phi, expected, atol=1e-12)
    for k, seed in ((3, 0), (5, 1), (6, 2)):
        exact = games.estimate(random_game(k, seed), k, 'shapley').phi
        assert np.allclose(games.estimate(random_game(k, seed), k, 'kernelshap', budget=2 ** k).phi, exact, atol=1e-12)


def test_kernel_shap_draws_coalition_sizes_from_the_shapley_kernel():
    k, sizes = 10, []

    def v(s):
        sizes.append(len(s))
        return 0.0
    for seed in range(20):
        games.kernelshap(v, k, 100, seed)
    drawn = np.array(sizes)
    drawn = drawn[(drawn > 0) & (drawn < k)]
    weight = np.array([(k - 1) / (s * (k - s)) for s in range(1, k)])
    for s in (1, 5):
        assert np.mean(drawn == s) == pytest.approx(weight[s - 1] / weight.sum(), abs=0.02)


@pytest.mark.parametrize('method', ['permutation', 'kernelshap'])
@pytest.mark.parametrize('budget', [6, 9, 14, 40])
def test_the_efficient_sampling_methods_sum_to_the_gain_at_any_budget(method, budget):
    v = random_game(5, 3)
    phi = games.estimate(v, 5, method, budget=budget, seed=budget).phi
    assert phi.sum() == pytest.approx(v(games.everyone(5)) - v(frozenset()), abs=1e-12)


def test_tmc_stops_a_walk_within_the_tolerance_of_the_whole_context_and_gives_the_rest_zero():
    # Document 1 carries the gain; 2 adds 0.001, under 5% of it: an order's walk ends at document 1.
    def v(s):
        return 0.5 + 0.2 * (1 in s) + 0.001 * (2 in s)
    budget, seed = 2 + 2 * 50, 4
    rng = np.random.default_rng(seed)
    orders = [list(rng.permutation(3) + 1) for _ in range(games.permutations_for(budget, 3))]
    before_1 = np.mean([o.index(2) < o.index(1) for o in orders])
    phi = games.estimate(v, 3, 'tmc', budget=budget, seed=seed).phi
    assert np.allclose(phi, [0.2, 0.001 * before_1, 0.0], atol=1e-12)
    assert 0.2 < before_1 < 0.8  # the truncation changed phi_2 (exact: 0.001)
    untruncated = games.estimate(v, 3, 'permutation', budget=budget, seed=seed).phi
    assert np.allclose(untruncated, [0.2, 0.001, 0.0], atol=1e-12)
    # Its sum is within the tolerance of the gain; it reads fewer coalitions than whole walks.
    assert abs(phi.sum() - 0.201) <= games.TOLERANCE * 0.201
    tmc_read, whole_read = [], []
    games.estimate(lambda s: tmc_read.append(s) or v(s), 3, 'tmc', budget=budget, seed=seed)
    games.estimate(lambda s: whole_read.append(s) or v(s), 3, 'permutation', budget=budget, seed=seed)
    assert len(tmc_read) < len(whole_read) and set(tmc_read) <= set(whole_read)


def test_tmc_asks_for_its_coalitions_walk_by_walk():
    v, _ = SYNTHETIC['complementary']
    known: dict = {}
    rounds = 0
    while True:
        asked = games.coalitions(4, 'tmc', budget=11, seed=2, known=known)
        if not asked:
            break
        rounds += 1
        known.update({s: v(s) for s in asked})
    read = set()
    phi = games.estimate(lambda s: read.add(s) or v(s), 4, 'tmc', budget=11, seed=2).phi
    assert set(known) == read and 1 < rounds <= 4  # v(empty), v(all) and first prefixes; then one step a round
    assert np.array_equal(games.estimate(known.__getitem__, 4, 'tmc', budget=11, seed=2).phi, phi)


def test_contextcite_is_sklearns_lasso_fitted_here_on_its_ablations_at_contextcites_alpha():
    """phi are the weights of the Lasso fitted here on the coalitions ContextCite read, at ContextCite's
    published ``lasso_alpha`` (0.01), on standardised inclusions and values, returned to the game's scale."""
    from sklearn.linear_model import Lasso
    weights = [0.3, -0.1, 0.05, 0.2, 0.02, 0.15]
    read = []

    def v(s):
        read.append(s)
        return sum(weights[i - 1] for i in s) + 0.1 * ({1, 2} <= s) - 0.05 * ({3, 4} <= s)
    phi = games.contextcite(v, 6, 40, seed=3).phi
    rows = read[2:]  # after v(empty) and v(all), the ablations in the order fitted
    z = np.array([[i in s for i in range(1, 7)] for s in rows], dtype=float)
    y = np.array([v(s) for s in rows])
    fit = Lasso(alpha=0.01).fit((z - z.mean(axis=0)) / z.std(axis=0), (y - y.mean()) / y.std())
    np.testing.assert_allclose(phi, fit.coef_ * y.std() / z.std(axis=0), rtol=1e-9, atol=1e-12)
    assert np.count_nonzero(phi) == 6  # an alpha that zeroed a weight would hide a change of alpha


def test_held_out_coalitions_are_neither_empty_nor_the_whole_context():
    for seed in range(20):
        drawn = held_out(3, 6, seed)
        assert sorted(map(sorted, drawn)) == [[1], [1, 2], [1, 3], [2], [2, 3], [3]]


def test_quality_table_is_the_lds_error_and_rank_correlation_of_each_method_against_exact_shapley():
    """One context of three documents: Shapley and leave-one-out phi; four held-out coalitions. Each
    figure recomputed here, the rank correlations with scipy."""
    from scipy import stats
    cell = dict(labels='label>=2', system='BM25', k=3, qid='q1')
    exact, loo = [0.3, 0.1, 0.2], [0.25, 0.05, 0.3]
    attribution = pd.DataFrame([dict(cell, method=m, position=i + 1, phi=phi[i])
                                for m, phi in (('shapley', exact), ('loo', loo)) for i in range(3)])
    values = {'': 0.1, '1 2 3': 0.7, '1': 0.35, '2 3': 0.4, '1 3': 0.55, '2': 0.15, '1 2': 0.45, '3': 0.3}
    held = ['1', '2 3', '1 3', '2']
    read_by_loo = ('', '1 2 3', '1 2')
    coalitions = pd.DataFrame([dict(cell, coalition=c, value=v, held_out=c in held,
                                    methods='' if c in held else 'shapley' + ' loo' * (c in read_by_loo))
                               for c, v in values.items()])
    table = quality_table(attribution, coalitions).set_index('method')
    for method, phi in (('shapley', exact), ('loo', loo)):
        predicted = [0.1 + sum(phi[int(i) - 1] for i in c.split()) for c in held]
        row = table.loc[method]
        assert row['lds'] == pytest.approx(stats.spearmanr(predicted, [values[c] for c in held])[0], abs=1e-12)
        assert row['spearman'] == pytest.approx(stats.spearmanr(phi, exact)[0], abs=1e-12)
        assert row['mae'] == pytest.approx(np.abs(np.subtract(phi, exact)).mean(), abs=1e-12)
        assert row['held_out'] == 4
    assert table.loc['loo', 'spearman'] == pytest.approx(0.5) and table.loc['loo', 'top1'] == False  # noqa: E712
    assert table.loc['shapley', 'coalitions'] == 4 and table.loc['loo', 'coalitions'] == 3
    from pyterrier.validate import InputValidationError
    with pytest.raises(InputValidationError, match=r"quality_table coalitions: input has no column 'value'"):
        quality_table(attribution, coalitions.drop(columns='value'))
    with pytest.raises(InputValidationError, match=r"quality_table attribution: input has no column 'phi'"):
        quality_table(attribution.drop(columns='phi'), coalitions)
    with pytest.raises(InputValidationError, match=r"quality_summary: input has no column 'lds'"):
        pu.methods.attribution.quality_summary(table.reset_index().drop(columns='lds'))


def test_contextcite_draws_each_document_with_probability_one_half_and_is_not_efficient():
    read = []

    def v(s):
        read.append(s)
        return SYNTHETIC['complementary'][0](s)
    for seed in range(10):
        games.contextcite(v, 8, 64, seed)
    drawn = [s for s in read if s not in (frozenset(), games.everyone(8))]
    assert np.mean([len(s) for s in drawn]) / 8 == pytest.approx(0.5, abs=0.02)
    phi = games.estimate(SYNTHETIC['complementary'][0], 4, 'contextcite', budget=16).phi
    assert phi.sum() != pytest.approx(0.35, abs=1e-3)
    assert set(games.EFFICIENT) == {'shapley', 'permutation', 'kernelshap'}


# The transformer on a backend whose answers name their documents, and a scorer of known values.

#: Per query, the game over document texts; the answer quality is its value plus 0.01 x the seed.
GAMES = {'q1': lambda s: 0.4 + 0.2 * ('a' in s) + 0.3 * ('a' in s and 'b' in s) - 0.1 * ('c' in s),
         'q2': lambda s: 0.5 + 0.1 * ('d' in s) + 0.1 * ('e' in s)}


class GameScorer:
    """Scores an echoed answer ('a c #1') by its query's game over the texts in it, plus 0.01 x its seed."""
    measure, references = 'GAME', 'the games'

    def score_with_reference(self, qids, answers):
        values = [GAMES[q](frozenset(a.split('#')[0].split())) + 0.01 * int(a.split('#')[1]) for q, a in
                  zip(qids, answers)]
        return np.array(values), [None] * len(values)


TOPICS = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['what is lift', 'what is drag']})
#: Out of rank order, as a retriever may give them: the positions follow rank.
RANKING = pd.DataFrame({'qid': ['q1', 'q1', 'q1', 'q2', 'q2'], 'query': ['what is lift'] * 3 + ['what is drag'] * 2,
                        'docno': ['d2', 'd1', 'd3', 'd4', 'd5'], 'text': ['b', 'a', 'c', 'd', 'e'],
                        'rank': [1, 0, 2, 0, 1], 'score': [2.0, 3.0, 1.0, 2.0, 1.0]})
QRELS = pd.DataFrame({'qid': ['q1', 'q2'], 'docno': ['d1', 'd4'], 'label': [2, 2]})


def reader(backend=None, samples=2):
    return pu.Reader(backend or EchoBackend(), n_samples=samples)


def test_shapley_shares_of_a_known_game_split_the_utility():
    out = ContextAttribution(reader(), GameScorer())(RANKING)
    assert out[['qid', 'docno', 'position']].values.tolist() == [['q1', 'd1', 1], ['q1', 'd2', 2], ['q1', 'd3', 3],
                                                                 ['q2', 'd4', 1], ['q2', 'd5', 2]]
    p_0 = {'q1': 0.405, 'q2': 0.505}  # the game's empty value, plus 0.01 x the mean seed (0, 1)
    assert np.allclose(out['phi'], [0.35, 0.15, -0.1, 0.1, 0.1], atol=1e-12)
    assert np.allclose(out['phi_utility'], out['phi'] / out['qid'].map(p_0), atol=1e-12)
    assert (out['method'] == 'shapley').all() and out['stderr'].isna().all()
    for qid, rows in out.groupby('qid'):
        assert rows['quality_0shot'].iloc[0] == pytest.approx(p_0[qid], abs=1e-12)
        assert rows['phi_utility'].sum() == pytest.approx(rows['utility'].iloc[0], abs=1e-9)


@pytest.mark.parametrize('method, expected', [('loo', [0.5, 0.3, -0.1, 0.1, 0.1]),
                                              ('single', [0.2, 0.0, -0.1, 0.1, 0.1])])
def test_leave_one_out_and_single_on_a_known_game(method, expected):
    out = ContextAttribution(reader(samples=1), GameScorer(), method=method)(RANKING)
    assert np.allclose(out['phi'], expected, atol=1e-12)


def test_permutation_sampling_in_the_transformer_is_efficient_with_a_standard_error():
    out = ContextAttribution(reader(samples=1), GameScorer(), method='permutation', budget=12, seed=1)(RANKING)
    for _, rows in out.groupby('qid'):
        assert rows['phi'].sum() == pytest.approx(rows['quality'].iloc[0] - rows['quality_0shot'].iloc[0], abs=1e-9)
    assert out['stderr'].notna().all() and (out['method'] == 'permutation').all()


@pytest.mark.parametrize('method, budget', [('kernelshap', 6), ('tmc', 8), ('contextcite', 6)])
def test_the_sampling_methods_in_the_transformer_give_the_estimator_on_the_coalitions_generated(method, budget):
    attribution = ContextAttribution(reader(samples=1), GameScorer(), method=method, budget=budget, seed=3)
    out, values = attribution.evaluate(RANKING)
    for qid, rows in out.groupby('qid'):
        own = values[values['qid'] == qid]
        table = {games.parse_coalition(c): float(v) for c, v in zip(own['coalition'], own['value'])}
        k = len(rows)
        read = set()
        expected = games.estimate(lambda c: read.add(c) or table[c], k, method, budget, seed=3).phi
        assert set(table) == read | {frozenset(), games.everyone(k)}  # what the estimator read, no more
        assert np.array_equal(rows.sort_values('position')['phi'].to_numpy(), expected)
    assert (out['efficient'] == (method == 'kernelshap')).all()


def test_tmc_in_the_transformer_asks_the_reader_round_by_round_and_stops_walks_early(monkeypatch):
    # q3: f carries the gain, g adds under 5% of it, h nothing: a walk ends once f is in.
    monkeypatch.setitem(GAMES, 'q3', lambda s: 0.5 + 0.2 * ('f' in s) + 0.001 * ('g' in s))
    ranking = pd.DataFrame({'qid': ['q3'] * 4, 'query': ['what is lift'] * 4, 'docno': ['d6', 'd7', 'd8', 'd9'],
                            'text': ['f', 'g', 'h', 'i'], 'rank': [0, 1, 2, 3]})
    r = reader(samples=1)
    rounds = []
    real = r.answer_frames
    monkeypatch.setattr(r, 'answer_frames', lambda frames, by: rounds.append(len(frames)) or real(frames, by=by))
    tmc = ContextAttribution(r, GameScorer(), method='tmc', budget=2 + 3 * 4, seed=0)
    out, values = tmc.evaluate(ranking)
    whole = ContextAttribution(reader(samples=1), GameScorer(), method='permutation', budget=2 + 3 * 4, seed=0)
    _, all_values = whole.evaluate(ranking)
    assert rounds.count(2) > 1 and len(values) < len(all_values)  # (0-shot, coalitions) a round
    table = {games.parse_coalition(c): v for c, v in zip(values['coalition'], values['value'])}
    expected = games.estimate(table.__getitem__, 4, 'tmc', 2 + 3 * 4, seed=0).phi
    assert np.array_equal(out.sort_values('position')['phi'].to_numpy(), expected)
    gain = out['quality'].iloc[0] - out['quality_0shot'].iloc[0]
    assert abs(out['phi'].sum() - gain) <= games.TOLERANCE * abs(gain)


def test_every_coalition_of_every_query_goes_to_the_reader_in_one_call(monkeypatch):
    backend = EchoBackend()
    r = reader(backend)
    calls = []
    real = r.answer
    monkeypatch.setattr(r, 'answer', lambda prompts: calls.append(list(prompts)) or real(prompts))
    attribution = ContextAttribution(r, GameScorer())
    values = attribution.coalition_values(RANKING)
    # q1: 8 coalitions, q2: 4; the two empty ones are the 0-shot prompts.
    assert len(calls[0]) == 12 and len(backend.calls) == 24  # 2 samples each
    assert all(p in calls[0] for later in calls[1:] for p in later)  # later calls find them answered
    assert values[values['qid'] == 'q1']['coalition'].tolist() == ['', '1', '2', '3', '1 2', '1 3', '2 3', '1 2 3']
    texts = {'': '', '1': 'a', '2': 'b', '3': 'c', '1 2': 'a b', '1 3': 'a c', '2 3': 'b c', '1 2 3': 'a b c'}
    expected = [GAMES['q1'](frozenset(texts[c].split())) + 0.005 for c in texts]
    assert np.allclose(values[values['qid'] == 'q1']['value'], expected, atol=1e-12)


def test_the_whole_and_empty_coalitions_are_the_pipelines_p_k_and_p_0(minilm):
    texts = {'d1': 'Lift is the upward force on a wing.', 'd2': 'Drag slows an aircraft down.',
             'd3': 'The boundary layer separates.', 'd4': 'Hypersonic flow heats the nose.',
             'd5': 'Heat transfer rises with Mach number.'}
    ranking = RANKING.assign(text=RANKING['docno'].map(texts))
    qrels = pd.DataFrame({'qid': ['q1', 'q1', 'q2'], 'docno': ['d1', 'd2', 'd4'], 'label': [2, 2, 2]})
    r = reader(CountingBackend())
    scorer = pu.FBertScorer(qrels, texts, model_type=minilm)
    pipeline = pt.Transformer.from_df(ranking) >> r >> pu.UtilityEvaluator(r, scorer)
    expected = pipeline(TOPICS).drop_duplicates('qid').set_index('qid')
    out = ContextAttribution(r, scorer)(ranking).drop_duplicates('qid').set_index('qid')
    for column in ('quality', 'quality_0shot', 'utility'):
        assert np.allclose(out[column], expected.loc[out.index, column], atol=1e-9, rtol=0)


def test_in_pt_experiment_the_shares_sum_to_the_utility_measure_beside_ndcg():
    r = reader()
    ranked = pt.Transformer.from_df(RANKING)
    attributed = ranked >> ContextAttribution(r, GameScorer())
    evaluated = ranked >> r >> pu.UtilityEvaluator(r, GameScorer())
    measures = [ir_measures.nDCG @ 3, pu.FBERT, pu.FBERT0, pu.Utility]
    found = pt.Experiment([attributed, evaluated], TOPICS, QRELS, measures, names=['attributed', 'evaluated'],
                          perquery=True)
    wide = found.pivot_table(index=['qid', 'measure'], columns='name', values='value')
    assert np.allclose(wide['attributed'], wide['evaluated'], atol=1e-9, rtol=0)
    shares = attributed(TOPICS).groupby('qid')['phi_utility'].sum()
    utility = found[(found['name'] == 'attributed') & (found['measure'] == 'Utility')].set_index('qid')['value']
    assert np.allclose(shares[utility.index], utility, atol=1e-9, rtol=0)


def test_the_transformer_checks_its_input_and_settings():
    from pyterrier.validate import InputValidationError
    with pytest.raises(InputValidationError, match="no column 'text'"):
        ContextAttribution(reader(samples=1), GameScorer())(RANKING.drop(columns=['text']))
    with pytest.raises(SettingError, match='needs a budget'):
        ContextAttribution(reader(samples=1), GameScorer(), method='permutation')
    with pytest.raises(SettingError, match='must be a pyterrier_utility.Reader'):
        ContextAttribution(object(), GameScorer())
    empty = ContextAttribution(reader(samples=1), GameScorer())(RANKING.head(0))
    assert empty.empty and {'position', 'phi', 'phi_utility', 'method', 'stderr'} <= set(empty.columns)


# Utility qrels.

def test_utility_qrels_grade_by_the_mean_share_and_read_back_with_ir_measures(tmp_path):
    rows = pd.DataFrame({'qid': ['1', '1', '1', '1', '2', '2'], 'docno': ['a', 'b', 'c', 'a', 'd', 'e'],
                         'phi_utility': [0.3, 0.05, -0.2, 0.1, 0.0, float('nan')]})
    qrels = utility_qrels(rows)  # a: mean 0.2 -> 2; b: 0.05 -> 1; c, d -> 0; e unknown: left out
    assert qrels.values.tolist() == [['1', 'a', 2], ['1', 'b', 1], ['1', 'c', 0], ['2', 'd', 0]]
    write_trec_qrels(qrels, tmp_path / 'utility.qrels')
    read = [(q.query_id, q.doc_id, q.relevance) for q in ir_measures.read_trec_qrels(str(tmp_path / 'utility.qrels'))]
    assert read == [('1', 'a', 2), ('1', 'b', 1), ('1', 'c', 0), ('2', 'd', 0)]
    assert utility_qrels(rows, threshold=0.25)['label'].tolist() == [1, 1, 0, 0]


def test_the_attribution_table_says_where_the_utility_sits():
    rows = pd.DataFrame({'labels': ['l'] * 5, 'system': ['A', 'A', 'A', 'B', 'B'], 'k': [2, 2, 2, 1, 1],
                         'qid': ['1', '1', '2', '1', '2'], 'position': [1, 2, 1, 1, 1],
                         'phi': [0.2, -0.1, 0.4, 0.3, 0.1], 'phi_utility': [0.4, -0.2, 0.8, 0.6, 0.2],
                         'relevant': ['True', 'False', 'True', 'True', 'False']})
    table = pu.methods.attribution.attribution_table(rows)
    expected = pd.DataFrame({'labels': ['l', 'l'], 'system': ['A', 'B'], 'k': [2, 1], 'pos 1': [0.6, 0.4],
                             'pos 2': [-0.2, float('nan')], 'phi relevant': [0.3, 0.3], 'phi other': [-0.1, 0.1],
                             'negative': [1 / 3, 0.0]})
    pd.testing.assert_frame_equal(table, expected, check_exact=False, atol=1e-12)


# The command line.

def shapley_from_coalitions(coalitions):
    """(labels, system, k, qid) -> the Shapley values by all orders, from coalitions.csv alone."""
    out = {}
    for key, rows in coalitions.groupby(['labels', 'system', 'k', 'qid']):
        table = {games.parse_coalition(c): v for c, v in zip(rows['coalition'], rows['value'])}
        k = max(len(c) for c in table)
        out[key] = by_orders(table.__getitem__, k)
    return out


def test_cli_attribute_writes_four_files_that_agree_with_a_brute_force(tmp_path, monkeypatch):
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    assert cli.main(['attribute', '--systems', 'Rel', 'NRel', '-k', '2', '3', '--queries', '2', '--samples', '2',
                     '--labels', '2', '--out', str(tmp_path)]) == 0
    coalitions = pd.read_csv(tmp_path / 'coalitions.csv', dtype={'qid': str}, keep_default_na=False,
                             na_values={'value': ['']})
    attribution = pd.read_csv(tmp_path / 'attribution.csv', dtype={'qid': str, 'docno': str})
    assert list(coalitions.columns) == ['labels', 'system', 'k', 'qid', 'coalition', 'value', 'methods', 'held_out']
    assert list(attribution.columns) == ['labels', 'system', 'k', 'qid', 'position', 'docno', 'phi', 'phi_utility',
                                         'method', 'stderr', 'efficient', 'relevant']
    assert (coalitions['methods'] == 'shapley').all() and not coalitions['held_out'].any()
    assert attribution['efficient'].all()
    # Rel draws documents of label 2 and up, NRel the others: relevant under the label set 2, or not.
    assert attribution.groupby('system')['relevant'].agg(set).to_dict() == {'NRel': {False}, 'Rel': {True}}
    assert len(coalitions) == 2 * 2 * (4 + 8)  # systems x queries x coalitions at k = 2 and 3
    exact = shapley_from_coalitions(coalitions)
    tables = dict(list(coalitions.groupby(['labels', 'system', 'k', 'qid'])))
    for key, rows in attribution.groupby(['labels', 'system', 'k', 'qid']):
        assert np.allclose(rows.sort_values('position')['phi'], exact[key], atol=1e-6, rtol=0)
        gain = tables[key]['value'].iloc[-1] - tables[key]['value'].iloc[0]  # the whole context less the empty one
        assert rows['phi'].sum() == pytest.approx(gain, abs=1e-9)
    qrels = list(ir_measures.read_trec_qrels(str(tmp_path / 'utility.qrels')))
    assert qrels and {q.relevance for q in qrels} <= {0, 1, 2}
    settings = json.loads((tmp_path / 'settings.json').read_text())
    assert settings['command'] == 'attribute' and settings['attribution']['methods'] == ['shapley']
    assert not (tmp_path / 'attribution_quality.csv').exists()


def test_cli_attribute_judges_several_methods_on_held_out_coalitions_answering_each_coalition_once(tmp_path,
                                                                                                    monkeypatch):
    from scipy import stats

    from pyterrier_utility import cli
    backends = []

    def build(spec, **kw):
        backends.append(CountingBackend())
        return backends[-1]
    monkeypatch.setattr(pu.backends, 'get_backend', build)
    options = ['--systems', 'BM25', 'Rel', '-k', '3', '--queries', '3', '--samples', '1', '--labels', '2',
               '--out', str(tmp_path)]
    assert cli.main(['attribute', '--method', 'kernelshap', 'tmc', 'contextcite', 'loo', '--budget', '6',
                     '--evaluate', '4', *options]) == 0
    assert len(backends[0].calls) == len(set(backends[0].calls))  # no coalition generated twice
    coalitions = pd.read_csv(tmp_path / 'coalitions.csv', dtype={'qid': str}, keep_default_na=False,
                             na_values={'value': ['']})
    attribution = pd.read_csv(tmp_path / 'attribution.csv', dtype={'qid': str, 'docno': str})
    quality = pd.read_csv(tmp_path / 'attribution_quality.csv', dtype={'qid': str})
    assert set(attribution['method']) == {'kernelshap', 'tmc', 'contextcite', 'loo', 'shapley'}  # shapley: reference
    assert not coalitions.duplicated(['labels', 'system', 'k', 'qid', 'coalition']).any()
    assert len(quality) == 5 * 2 * 3
    keys = ['labels', 'system', 'k', 'qid']
    tables = {key: rows for key, rows in coalitions.groupby(keys)}
    for row in quality.itertuples():
        key = (row.labels, row.system, row.k, row.qid)
        context = tables[key]
        phi = attribution[(attribution[keys] == pd.Series(dict(zip(keys, key)))).all(axis=1)
                          & (attribution['method'] == row.method)].sort_values('position')['phi'].to_numpy()
        value = {games.parse_coalition(c): v for c, v in zip(context['coalition'], context['value'])}
        held = context[context['held_out']]
        assert len(held) == row.held_out == 4
        predicted = [value[frozenset()] + sum(phi[p - 1] for p in games.parse_coalition(c)) for c in held['coalition']]
        expected_lds = (stats.spearmanr(predicted, held['value'])[0]
                        if np.ptp(predicted) > 0 and np.ptp(held['value']) > 0 else np.nan)
        assert np.isclose(row.lds, expected_lds, equal_nan=True, atol=1e-12)
        exact = by_orders(value.__getitem__, 3)  # every coalition is there: the reference read them all
        assert row.mae == pytest.approx(np.abs(phi - exact).mean(), abs=1e-9)
        assert bool(row.top1) == (np.argmax(phi) == np.argmax(exact))
        read = context['methods'].fillna('').str.split().map(lambda m: row.method in m)
        assert row.coalitions == read.sum() and row.efficient == (row.method in games.EFFICIENT)
    # A second method later, into the same folder: its coalitions are all answered already.
    assert cli.main(['attribute', '--method', 'single', *options]) == 0
    assert backends[1].calls == []
    assert not (tmp_path / 'attribution_quality.csv').exists()


def test_cli_attribute_after_a_study_generates_only_the_missing_coalitions(tmp_path, monkeypatch):
    from pyterrier_utility import cli
    backends = []

    def build(spec, **kw):
        backends.append(CountingBackend())
        return backends[-1]
    monkeypatch.setattr(pu.backends, 'get_backend', build)
    options = ['--systems', 'Rel', '-k', '3', '--queries', '2', '--samples', '2', '--labels', '2',
               '--out', str(tmp_path)]
    assert cli.main(['study', '--no-reverse', *options]) == 0
    study_prompts = set(backends[0].calls)
    assert cli.main(['attribute', '--method', 'loo', *options]) == 0
    assert backends[1].calls and not set(backends[1].calls) & study_prompts
    assert len(set(backends[1].calls)) == 2 * 3  # per query the three contexts less one document
    per_query = pd.read_csv(tmp_path / 'per_query.csv', dtype={'qid': str}).set_index('qid')
    coalitions = pd.read_csv(tmp_path / 'coalitions.csv', dtype={'qid': str}, keep_default_na=False,
                             na_values={'value': ['']})
    for qid, rows in coalitions.groupby('qid'):
        p_0, p_k = rows.set_index('coalition')['value'][['', '1 2 3']]
        assert p_0 == pytest.approx(per_query.loc[qid, 'quality_0shot'], abs=1e-6)
        assert p_k == pytest.approx(per_query.loc[qid, 'quality'], abs=1e-6)
        assert (p_k - p_0) / p_0 == pytest.approx(per_query.loc[qid, 'utility'], abs=1e-6)
    # The study's page, written again, shows the attribution; the folder reads it back.
    assert 'id="attribution"' in (tmp_path / 'report.html').read_text()
    assert len(pu.study.read_study(tmp_path).attribution) == 2 * 3
    # Two methods: the page's table has a row for each.
    assert cli.main(['attribute', '--method', 'loo', 'single', *options]) == 0
    page = (tmp_path / 'report.html').read_text()
    table = page.split('class="attribution"')[1].split('</table>')[0]
    assert '<th>method</th>' in table and '<td>loo</td>' in table and '<td>single</td>' in table


def test_cli_attribute_refuses_a_budget_without_a_sampling_method(tmp_path, capsys):
    from pyterrier_utility import cli
    with pytest.raises(SystemExit):
        cli.main(['attribute', '--budget', '10', '--method', 'loo', 'shapley', '--out', str(tmp_path)])
    assert ("a budget applies to the sampling methods ('permutation' or 'kernelshap' or 'tmc' or 'contextcite') only, "
            "not 'loo'") in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(['attribute', '--method', 'loo', 'kernelshap', '--out', str(tmp_path)])
    assert "method 'kernelshap' needs a budget" in capsys.readouterr().err


def test_cli_attribute_attributes_a_context_shorter_than_k_over_its_documents_and_names_its_qids(tmp_path,
                                                                                                  monkeypatch):
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    run = tmp_path / 'short.trec'
    run.write_text('1 Q0 184 1 3.0 short\n1 Q0 29 2 2.0 short\n2 Q0 12 1 3.0 short\n2 Q0 51 2 2.0 short\n'
                   '2 Q0 102 3 1.0 short\n')
    with pytest.warns(UserWarning, match=r'^short at k=3: fewer than 3 documents, attributed over the documents each '
                                         r'context has .*: qid 1$'):
        assert cli.main(['attribute', '--systems', 'Rel', '--run', f'short={run}', '-k', '3', '--queries', '2',
                         '--samples', '1', '--labels', '2', '--out', str(tmp_path / 'out')]) == 0
    attribution = pd.read_csv(tmp_path / 'out' / 'attribution.csv', dtype={'qid': str, 'docno': str})
    short = attribution[attribution['system'] == 'short']
    assert short.groupby('qid')['docno'].agg(list).to_dict() == {'1': ['184', '29'], '2': ['12', '51', '102']}
    coalitions = pd.read_csv(tmp_path / 'out' / 'coalitions.csv', dtype={'qid': str}, keep_default_na=False,
                             na_values={'value': ['']})
    # Query 1's game is over its two documents: 4 coalitions, its Shapley values those of that game.
    own = coalitions[(coalitions['system'] == 'short') & (coalitions['qid'] == '1')]
    assert sorted(own['coalition']) == ['', '1', '1 2', '2']
    expected = by_orders({games.parse_coalition(c): v for c, v in zip(own['coalition'], own['value'])}.__getitem__, 2)
    assert np.allclose(short[short['qid'] == '1'].sort_values('position')['phi'], expected, atol=1e-6, rtol=0)


# Interrupted, and run twice at once: real processes against a simulated OpenAI-compatible server.

ATTRIBUTE = ['attribute', '--reader', 'openai:simulated', '--systems', 'Rel', '-k', '3', '--queries', '1',
             '--samples', '1', '--labels', '2']
ATTRIBUTION_OUTPUTS = ('attribution.csv', 'coalitions.csv', 'utility.qrels')


def attribute_process(url: str, out) -> subprocess.Popen:
    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen([sys.executable, '-m', 'pyterrier_utility.cli', *ATTRIBUTE, '--base-url', url,
                             '--out', str(out)], cwd=root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONPATH=str(root)))


def finished(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-3000:]
    return out


def stored(out) -> int:
    """Answers in a folder's generation cache (0 before the file has its table)."""
    try:
        with contextlib.closing(sqlite3.connect(out / 'generations.sqlite')) as db:
            return db.execute('SELECT COUNT(*) FROM answers').fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.fixture(scope='module')
def attributed(tmp_path_factory):
    """A slow simulated server (one answer at a time, 0.5 s each) and an attribution through it,
    uninterrupted, during which a second attribution into its folder was started (the server holding
    the first's requests meanwhile): (server, the folder, the answers generated, the first's process
    id, the second's exit status and stderr)."""
    release = threading.Event()
    with SimulatedServer(latency=0.5, capacity=1, text=lambda prompt, seed: release.wait(300) and simulated_answer(
            prompt, seed)) as server:
        whole = tmp_path_factory.mktemp('whole')
        first = attribute_process(server.url, whole)
        deadline = time.time() + 300
        while not server.bodies and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
        second = attribute_process(server.url, whole)
        _, err = second.communicate(timeout=300)
        release.set()
        finished(first)
        yield server, whole, len(server.bodies), first.pid, second.returncode, err


@pytest.mark.slow
@pytest.mark.server
def test_a_second_attribution_into_the_same_folder_is_refused_in_one_line_and_the_first_ends_whole(attributed):
    server, whole, total, first, status, err = attributed
    assert status == 2
    assert err.strip().splitlines() == [f'pyterrier-utility attribute: error: --out {whole} is being written by '
                                        f'process {first} (lock {whole / LOCK}): wait for it to finish, or give '
                                        'another --out']
    assert total == 8  # the first's requests alone: one query, the 2^3 coalitions of k = 3
    settings = json.loads((whole / 'settings.json').read_text())
    assert settings['command'] == 'attribute' and settings['generated'] == total
    assert len(pd.read_csv(whole / 'coalitions.csv')) == total


@pytest.mark.slow
@pytest.mark.server
def test_an_attribution_killed_mid_run_keeps_every_answer_and_a_rerun_generates_only_the_rest(attributed, tmp_path):
    server, whole, total, *_ = attributed
    killed = tmp_path / 'killed'
    proc = attribute_process(server.url, killed)
    deadline = time.time() + 300
    while stored(killed) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, 'the attribution finished before it could be killed'
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = stored(killed)
    assert 3 <= kept < total  # each answer stored as it came back, not when the batch of 8 completed
    assert not (killed / 'attribution.csv').exists()
    before = len(server.bodies)
    said = finished(attribute_process(server.url, killed))
    assert len(server.bodies) - before == total - kept  # only the coalitions it lacked
    assert json.loads((killed / 'settings.json').read_text())['generated'] == total - kept
    assert f'; {total - kept} answers generated' in said
    for name in ATTRIBUTION_OUTPUTS:
        assert (killed / name).read_bytes() == (whole / name).read_bytes(), name


@pytest.mark.parametrize('column,value', [('docno', 'AB 12'), ('docno', 'AB\t12'), ('qid', 'q 1')])
def test_utility_qrels_are_not_written_for_an_id_holding_white_space(tmp_path, column, value):
    qrels = pd.DataFrame({'qid': ['1', '1'], 'docno': ['d1', 'd2'], 'label': [2, 0]})
    qrels.loc[1, column] = value
    with pytest.raises(FrameError, match=f'^write_trec_qrels: {column} {re.escape(repr(value))}.* holds white space, '
                                         'which TREC qrels'):
        write_trec_qrels(qrels, tmp_path / 'utility.qrels')
    assert not (tmp_path / 'utility.qrels').exists()


def test_cli_attribute_refuses_a_docno_holding_white_space_before_generating(tmp_path, monkeypatch, capsys):
    from pyterrier_utility import cli
    backend = CountingBackend()
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: backend)
    folder = tmp_path / 'collection'
    folder.mkdir()
    (folder / 'docs.tsv').write_text('D1\tthe wing stalls\nAB 12\tlift falls at high angles\nD3\tunrelated\n')
    (folder / 'topics.tsv').write_text('1\twhy does the wing stall\n')
    (folder / 'qrels').write_text('1 0 D1 2\n1 0 D3 0\n')
    # NRel would give the judged non-relevant D3, then the one unjudged document, 'AB 12': the collection
    # is refused as it is read, before anything is generated or written.
    with pytest.raises(SystemExit):
        cli.main(['attribute', '--dataset', str(folder), '--systems', 'NRel', '-k', '2', '--samples', '1',
                  '--labels', '2', '--out', str(tmp_path / 'out')])
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"pyterrier-utility attribute: error: {folder / 'docs.tsv'} line 2: docno 'AB 12' holds white space, where the "
        'BM25 index (PISA) and TREC runs and qrels cut it; give docnos without white space')
    assert backend.calls == [] and not (tmp_path / 'out' / 'utility.qrels').exists()


def test_the_sweep_gives_the_attribute_commands_files(tmp_path, monkeypatch):
    from pyterrier_utility import cli
    from pyterrier_utility.methods.attribution import sweep
    from pyterrier_utility.study import prepare, study_contexts
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    options = ['--method', 'kernelshap', 'loo', '--budget', '6', '--evaluate', '2', '--systems', 'Rel', 'NRel',
               '-k', '2', '3', '--queries', '2', '--samples', '1', '--labels', '2', '1', '--out', str(tmp_path)]
    assert cli.main(['attribute', *options]) == 0
    args = cli.parser().parse_args(['attribute', *options])
    prepared = prepare(cli.config_of(args, args.base), 'attribute')
    collection, reader = next(iter(prepared.collections.values())), next(iter(prepared.readers.values()))
    config = collection.config
    contexts = study_contexts(collection.topics, collection.qrels, prepared.systems(collection, reader), config.ks,
                              config.label_sets)
    found = sweep(contexts, reader, prepared.scorer_for(collection), collection.qrels, config.label_sets,
                  ['kernelshap', 'loo'], config.seed, budget=6, evaluate=2)
    for frame, name in ((found.coalitions, 'coalitions.csv'), (found.attribution, 'attribution.csv'),
                        (found.quality, 'attribution_quality.csv')):
        assert frame.to_csv(index=False) == (tmp_path / name).read_text()
    assert set(found.attribution['labels']) == {'label>=1', 'label>=2'}
    assert set(found.attribution['method']) == {'kernelshap', 'loo', 'shapley'}  # shapley: the reference
