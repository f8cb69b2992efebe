"""Cooperative games over the documents of a context, and the estimators that split their value.

A game over a context of k documents is a value function ``v``: a coalition (a frozenset of
1-based context positions) -> a number, here the answer quality P of the reader's answer when the
prompt holds those documents only (:class:`~.transformer.ContextAttribution`). Each estimator gives
one attribution phi_i per position and, where it samples, a standard error:

- ``shapley``: the Shapley value, exactly, over all 2^k coalitions (Shapley, 1953);
- ``permutation``: the Shapley value estimated from random orders of the documents (Castro, Gomez
  and Tejada, 2009), each order's marginal contributions summing to v(all) - v(empty);
- ``loo``: leave-one-out, phi_i = v(all) - v(all less i);
- ``single``: each document alone, phi_i = v({i}) - v(empty) (eRAG's view of a document).

Shapley values (exact or sampled) are efficient: their sum is v(all) - v(empty), so divided by
v(empty) they split the context utility U among the documents. Leave-one-out and single are not
in general: they sum to v(all) - v(empty) only when the game is additive (no document's effect
depends on the others).

The functions are pure and take any ``v``; :func:`coalitions` says, before anything is evaluated,
which coalitions an estimator will read, so that all of them can be answered in one call.

Example::

    v = lambda s: {frozenset(): 0.5, frozenset({1}): 0.7, frozenset({2}): 0.6}.get(s, 0.9)
    estimate(v, 2, 'shapley').phi  # array([0.25, 0.15]): sums to 0.9 - 0.5
"""
import math
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, List, Optional

import numpy as np

from ..._checks import check, check_int
from ..._messages import either
from ...vocabulary import ATTRIBUTION_METHODS

#: A coalition: the 1-based context positions of the documents in the prompt.
Coalition = FrozenSet[int]
#: A game: the value of each coalition.
Game = Callable[[Coalition], float]
#: The largest k exact Shapley values are computed for (2^10 = 1024 coalitions per context).
MAX_EXACT_K = 10


@dataclass(frozen=True)
class Estimate:
    """The attribution of each position (``phi[i - 1]`` for position i) and its standard error
    (NaN where the method does not sample, or from a single sampled order)."""
    phi: np.ndarray
    stderr: np.ndarray


def _exact(phi: np.ndarray) -> Estimate:
    return Estimate(phi, np.full(len(phi), np.nan))


def everyone(k: int) -> Coalition:
    """The coalition of all k positions."""
    return frozenset(range(1, k + 1))


def loo(v: Game, k: int) -> Estimate:
    """Leave-one-out: phi_i = v(all) - v(all less i)."""
    full = everyone(k)
    top = v(full)
    return _exact(np.array([top - v(full - {i}) for i in range(1, k + 1)], dtype=float))


def single(v: Game, k: int) -> Estimate:
    """Each document alone: phi_i = v({i}) - v(empty)."""
    empty = v(frozenset())
    return _exact(np.array([v(frozenset({i})) - empty for i in range(1, k + 1)], dtype=float))


def shapley(v: Game, k: int) -> Estimate:
    """The exact Shapley value: phi_i = sum over S not holding i of |S|! (k - |S| - 1)! / k!
    (v(S + i) - v(S)), over all 2^k coalitions; refused above :data:`MAX_EXACT_K`."""
    check(k <= MAX_EXACT_K, 'shapley', f'exact Shapley values over k={k} documents need 2^{k} = {2 ** k} coalitions '
                                       f'per context; above k={MAX_EXACT_K} use method=\'permutation\' with a budget')
    members = [frozenset(i + 1 for i in range(k) if mask >> i & 1) for mask in range(2 ** k)]
    values = np.array([v(s) for s in members], dtype=float)
    weight = [math.factorial(s) * math.factorial(k - s - 1) / math.factorial(k) for s in range(k)]
    phi = np.zeros(k)
    for mask, s in enumerate(members):
        for i in range(k):
            if not mask >> i & 1:
                phi[i] += weight[len(s)] * (values[mask | 1 << i] - values[mask])
    return _exact(phi)


def permutations_for(budget: int, k: int) -> int:
    """How many random orders a ``budget`` of coalition evaluations pays for: v(empty) and v(all)
    once, then k - 1 per order (its proper non-empty prefixes); one order for k = 1, the only one."""
    check(budget >= k + 1, 'permutation', f'a budget of {budget} coalition evaluations is less than one order of '
                                          f'k={k} documents needs ({k + 1}: v(empty), v(all) and {k - 1} prefixes)')
    return 1 if k == 1 else (budget - 2) // (k - 1)


def permutation(v: Game, k: int, budget: int, seed: int = 0) -> Estimate:
    """The Shapley value estimated from random orders: for each of :func:`permutations_for` orders
    drawn uniformly (``numpy.random.default_rng(seed)``), each document's marginal contribution
    v(before it and it) - v(before it); phi_i is the mean over the orders and its standard error
    the standard deviation over them divided by the square root of their number (NaN from one
    order; 0 for k = 1, whose only order gives the exact value). Each order's contributions sum to
    v(all) - v(empty), so phi does too, whatever the draws."""
    orders = permutations_for(budget, k)
    rng = np.random.default_rng(seed)
    empty, full = v(frozenset()), v(everyone(k))
    contributions = np.empty((orders, k))
    for row in range(orders):
        before, members = empty, set()
        for j, i in enumerate(rng.permutation(k) + 1):
            members.add(int(i))
            after = full if j == k - 1 else v(frozenset(members))
            contributions[row, i - 1] = after - before
            before = after
    if k == 1:
        return Estimate(contributions[0], np.zeros(1))
    stderr = (contributions.std(axis=0, ddof=1) / math.sqrt(orders) if orders > 1 else np.full(k, np.nan))
    return Estimate(contributions.mean(axis=0), stderr)


def check_method(method: str, budget: Optional[int]) -> None:
    """A :class:`~pyterrier_utility.errors.SettingError` unless ``method`` is one of
    :data:`~pyterrier_utility.vocabulary.ATTRIBUTION_METHODS` and ``budget`` is given for
    ``permutation`` (an integer >= 2) and for it only."""
    check(method in ATTRIBUTION_METHODS, 'attribution', f'method must be {either(ATTRIBUTION_METHODS)}, got {method!r}')
    if method == 'permutation':
        check(budget is not None, 'attribution', "method 'permutation' needs a budget of coalition evaluations")
        check_int('attribution', 'budget', budget, 2)
    else:
        check(budget is None, 'attribution', f"a budget applies to method 'permutation' only, not {method!r}")


def estimate(v: Game, k: int, method: str, budget: Optional[int] = None, seed: int = 0) -> Estimate:
    """The attribution of the k positions of game ``v`` by ``method`` (one of
    :data:`~pyterrier_utility.vocabulary.ATTRIBUTION_METHODS`); ``budget`` and ``seed`` are those
    of ``permutation``."""
    check_method(method, budget)
    check_int('attribution', 'k', k, 1)
    if method == 'permutation':
        assert budget is not None  # checked above
        return permutation(v, k, budget, seed)
    return {'shapley': shapley, 'loo': loo, 'single': single}[method](v, k)


def coalitions(k: int, method: str, budget: Optional[int] = None, seed: int = 0) -> List[Coalition]:
    """The coalitions :func:`estimate` reads for these arguments, each once, smallest first (then by
    positions): found by running the estimator on a game that records what it is asked."""
    asked: Dict[Coalition, float] = {}

    def record(s: Coalition) -> float:
        asked[s] = 0.0
        return 0.0
    estimate(record, k, method, budget, seed)
    return sorted(asked, key=lambda s: (len(s), sorted(s)))


def coalition_name(coalition: Coalition) -> str:
    """A coalition as text: its positions ascending, space-separated ('' for the empty one)."""
    return ' '.join(map(str, sorted(coalition)))


def parse_coalition(text: str) -> Coalition:
    """The coalition :func:`coalition_name` wrote (NaN or '' for the empty one, as a CSV reads back)."""
    return frozenset(int(p) for p in text.split()) if isinstance(text, str) else frozenset()
