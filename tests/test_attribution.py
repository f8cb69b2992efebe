"""Attribution of U to the documents of a context: the estimators against their definitions and the
Shapley axioms on hand-made games."""
import itertools
import math

import numpy as np
import pytest

from pyterrier_utility.errors import SettingError
from pyterrier_utility.methods.attribution import games

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
    with pytest.raises(SettingError, match="k=11.*method='permutation'"):
        games.estimate(interacting, 11, 'shapley')
    with pytest.raises(SettingError, match="'permutation' needs a budget"):
        games.estimate(interacting, 3, 'permutation')
    with pytest.raises(SettingError, match="budget applies to method 'permutation' only"):
        games.estimate(interacting, 3, 'loo', budget=10)
    with pytest.raises(SettingError, match="method must be 'shapley' or 'permutation' or 'loo' or 'single'"):
        games.estimate(interacting, 3, 'banzhaf')
