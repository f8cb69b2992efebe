"""Cooperative games over the documents of a context, and the estimators that split their value.

A game over a context of k documents is a value function ``v``: a coalition (a frozenset of
1-based context positions) -> a number, here the answer quality P of the reader's answer when the
prompt holds those documents only (:class:`~.transformer.ContextAttribution`). Each estimator gives
one attribution phi_i per position and, where it samples, a standard error:

- ``shapley``: the Shapley value, exactly, over all 2^k coalitions (Shapley, 1953);
- ``permutation``: the Shapley value estimated from random orders of the documents (Castro, Gomez
  and Tejada, 2009), each order's marginal contributions summing to v(all) - v(empty);
- ``kernelshap``: the Shapley value as the weighted least-squares fit of an additive game to
  coalitions drawn from the Shapley kernel (Lundberg and Lee, 2017), drawn in complementary pairs and
  with v(all) - v(empty) held exactly as a constraint (Covert and Lee, 2021);
- ``tmc``: truncated Monte Carlo Shapley (Ghorbani and Zou, 2019): the orders of ``permutation``, each
  walked only until its prefix comes within :data:`TOLERANCE` of v(all), the later documents of that
  order given 0;
- ``contextcite``: ContextCite's surrogate (Cohen-Wang, Shah, Georgiev and Madry, 2024): random
  ablations, each document kept with probability 1/2, and a Lasso fit of v to which documents were
  kept; phi_i is document i's weight;
- ``loo``: leave-one-out, phi_i = v(all) - v(all less i);
- ``single``: each document alone, phi_i = v({i}) - v(empty) (eRAG's view of a document).

The Shapley values of ``shapley``, ``permutation`` and ``kernelshap`` are efficient
(:data:`EFFICIENT`): their sum is v(all) - v(empty), so divided by v(empty) they split the context
utility U among the documents. The others are not in general: ``loo`` and ``single`` sum to it only
when the game is additive (no document's effect depends on the others), ``tmc``'s orders to within
the tolerance, and ``contextcite``'s weights are a fit.

A sampling method's ``budget`` counts coalitions: v(empty) and v(all) among them, then
``permutation``'s and ``tmc``'s orders (k - 1 coalitions each, at most: ``tmc`` stops a walk early, and
an order may repeat another's prefix), ``kernelshap``'s and ``contextcite``'s draws until that many
distinct coalitions are drawn (all 2^k at most: ``kernelshap`` then reads every coalition with its
kernel weight, which gives the exact Shapley value).

The functions are pure and take any ``v``; :func:`coalitions` says, before anything is evaluated,
which coalitions an estimator will read, so that all of them can be answered in one call (for
``tmc``, given the values known so far: the next coalition of each walk not yet truncated).

Example::

    v = lambda s: {frozenset(): 0.5, frozenset({1}): 0.7, frozenset({2}): 0.6}.get(s, 0.9)
    estimate(v, 2, 'shapley').phi  # array([0.25, 0.15]): sums to 0.9 - 0.5
"""
import math
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional

import numpy as np

from ..._checks import check, check_int, check_number
from ..._messages import either
from ...vocabulary import ATTRIBUTION_METHODS

#: A coalition: the 1-based context positions of the documents in the prompt.
Coalition = FrozenSet[int]
#: A game: the value of each coalition.
Game = Callable[[Coalition], float]
#: The largest k exact Shapley values are computed for (2^10 = 1024 coalitions per context).
MAX_EXACT_K = 10
#: The methods that sample within a budget of coalitions.
SAMPLED = ('permutation', 'kernelshap', 'tmc', 'contextcite')
#: The methods whose phi sum to v(all) - v(empty) on every game.
EFFICIENT = ('shapley', 'permutation', 'kernelshap')
#: ``tmc``'s truncation: a walk stops once its prefix's value is within this fraction of
#: |v(all) - v(empty)| of v(all) (a fraction of the context's gain, so that adding a constant to the
#: game, as a higher P_0 does, does not change where walks stop).
TOLERANCE = 0.05
#: ContextCite's Lasso penalty (its ``lasso_alpha``), applied as there to standardised inclusion
#: indicators; here the values are standardised too, since P varies on a far smaller scale than the
#: log-probabilities ContextCite fits.
LASSO_ALPHA = 0.01
#: The most draws ``kernelshap`` and ``contextcite`` make per coalition of their budget (a budget near
#: 2^k may need many draws to find the last distinct coalitions).
DRAWS_PER_COALITION = 64


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


def _members(mask: int, k: int) -> Coalition:
    return frozenset(i + 1 for i in range(k) if mask >> i & 1)


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
                                       f'per context; above k={MAX_EXACT_K} use a sampling method '
                                       f'({either(SAMPLED)}) with a budget')
    members = [_members(mask, k) for mask in range(2 ** k)]
    values = np.array([v(s) for s in members], dtype=float)
    weight = [math.factorial(s) * math.factorial(k - s - 1) / math.factorial(k) for s in range(k)]
    phi = np.zeros(k)
    for mask, s in enumerate(members):
        for i in range(k):
            if not mask >> i & 1:
                phi[i] += weight[len(s)] * (values[mask | 1 << i] - values[mask])
    return _exact(phi)


def permutations_for(budget: int, k: int, method: str = 'permutation') -> int:
    """How many random orders a ``budget`` of coalition evaluations pays for: v(empty) and v(all)
    once, then k - 1 per order (its proper non-empty prefixes); one order for k = 1, the only one."""
    check(budget >= k + 1, method, f'a budget of {budget} coalition evaluations is less than one order of '
                                   f'k={k} documents needs ({k + 1}: v(empty), v(all) and {k - 1} prefixes)')
    return 1 if k == 1 else (budget - 2) // (k - 1)


def _over_orders(contributions: np.ndarray) -> Estimate:
    """phi as the mean of the orders' marginal contributions (rows), and its standard error: the
    standard deviation over the orders divided by the square root of their number (NaN from one order)."""
    orders, k = contributions.shape
    if k == 1:  # its only order gives the exact value
        return Estimate(contributions[0], np.zeros(1))
    stderr = (contributions.std(axis=0, ddof=1) / math.sqrt(orders) if orders > 1 else np.full(k, np.nan))
    return Estimate(contributions.mean(axis=0), stderr)


def permutation(v: Game, k: int, budget: int, seed: int = 0) -> Estimate:
    """The Shapley value estimated from random orders: for each of :func:`permutations_for` orders
    drawn uniformly (``numpy.random.default_rng(seed)``), each document's marginal contribution
    v(before it and it) - v(before it); phi_i is the mean over the orders, with its standard error.
    Each order's contributions sum to v(all) - v(empty), so phi does too, whatever the draws."""
    return tmc(v, k, budget, seed, tolerance=None)


def tmc(v: Game, k: int, budget: int, seed: int = 0, tolerance: Optional[float] = TOLERANCE) -> Estimate:
    """Truncated Monte Carlo Shapley: the orders of :func:`permutation` (the same draws for the same
    seed), each walked from its first document until its prefix S has |v(all) - v(S)| <=
    ``tolerance`` x |v(all) - v(empty)|; the documents after the truncation get 0 in that order. Each
    order's contributions then sum to v(S) - v(empty), within the tolerance of v(all) - v(empty).
    ``tolerance=None`` walks every order whole (:func:`permutation`). A walk that meets a NaN value
    stops there, its order's contributions NaN (:func:`coalitions` asks for the values walk by walk)."""
    method = 'permutation' if tolerance is None else 'tmc'
    orders = permutations_for(budget, k, method)
    rng = np.random.default_rng(seed)
    empty, full = v(frozenset()), v(everyone(k))
    near = None if tolerance is None else tolerance * abs(full - empty)
    contributions = np.zeros((orders, k))
    for row in range(orders):
        before, members = empty, set()
        for j, i in enumerate(rng.permutation(k) + 1):
            members.add(int(i))
            after = full if j == k - 1 else v(frozenset(members))
            if math.isnan(after):
                contributions[row] = np.nan
                break
            contributions[row, i - 1] = after - before
            before = after
            if near is not None and abs(full - after) <= near:
                break  # truncated: the later documents of this order get 0
    return _over_orders(contributions)


def _draws(k: int, budget: int, seed: int, draw: Callable[[np.random.Generator], List[Coalition]],
           method: str, group: int = 1) -> List[Coalition]:
    """Coalitions from ``draw`` (``group`` at a time: a pair for ``kernelshap``) until they and
    v(empty) and v(all) are ``budget`` distinct coalitions (all 2^k at most) or a group more would pass
    it, a group that would pass it left out; stops after :data:`DRAWS_PER_COALITION` x budget groups
    whatever it found."""
    check(budget >= 2 + group, method, f'a budget of {budget} coalitions leaves no draw of {group} besides '
                                       'v(empty) and v(all)')
    rng = np.random.default_rng(seed)
    seen = {frozenset(), everyone(k)}
    target = min(budget, 2 ** k)
    drawn: List[Coalition] = []
    for _ in range(DRAWS_PER_COALITION * budget):
        if len(seen) > target - group:
            break
        group_drawn = draw(rng)
        if len(seen | set(group_drawn)) > target:
            continue
        seen.update(group_drawn)
        drawn.extend(group_drawn)
    return drawn


def _kernel_sizes(k: int) -> np.ndarray:
    """The Shapley kernel's probability of each coalition size 1 .. k - 1: proportional to
    (k - 1) / (s (k - s)), the kernel weight of one coalition of size s times C(k, s) of them."""
    sizes = np.arange(1, k)
    weight = (k - 1) / (sizes * (k - sizes))
    return weight / weight.sum()


def kernelshap(v: Game, k: int, budget: int, seed: int = 0) -> Estimate:
    """Kernel SHAP: phi minimising sum over drawn S of (v(S) - v(empty) - sum_{i in S} phi_i)^2 under
    sum phi = v(all) - v(empty), the coalitions drawn from the Shapley kernel (a size with
    probability :func:`_kernel_sizes`, then uniformly among the coalitions of that size) in pairs of
    a coalition and its complement (paired sampling), until ``budget`` distinct coalitions with
    v(empty) and v(all) (:func:`_draws`). With a budget of all 2^k, every coalition is read with its
    kernel weight instead, and the fit is the exact Shapley value. Efficient whatever the draws."""
    empty, full = v(frozenset()), v(everyone(k))
    gain = full - empty
    if k == 1:
        return _exact(np.array([gain]))
    if budget >= 2 ** k:
        rows = [_members(mask, k) for mask in range(1, 2 ** k - 1)]
        weights = np.array([(k - 1) / (math.comb(k, len(s)) * len(s) * (k - len(s))) for s in rows])
    else:
        p = _kernel_sizes(k)

        def pair(rng: np.random.Generator) -> List[Coalition]:
            size = int(rng.choice(np.arange(1, k), p=p))
            members = frozenset(int(i) + 1 for i in rng.choice(k, size, replace=False))
            return [members, everyone(k) - members]
        rows = _draws(k, budget, seed, pair, 'kernelshap', group=2)
        weights = np.ones(len(rows))
    z = np.array([[i + 1 in s for i in range(k)] for s in rows], dtype=float)
    y = np.array([v(s) for s in rows], dtype=float) - empty
    # phi = gain / k + B u, B an orthonormal basis of the sums-to-zero directions: the constraint holds
    # exactly, and u is an unconstrained weighted least-squares fit; with fewer coalitions than documents
    # the fit is underdetermined, and u the least-norm solution (directions the draws say nothing about,
    # within rounding, are left at 0).
    basis = np.linalg.svd(np.eye(k) - 1.0 / k)[0][:, :k - 1]
    root = np.sqrt(weights)[:, None]
    u = np.linalg.lstsq(root * (z @ basis), root[:, 0] * (y - z.sum(axis=1) * gain / k), rcond=1e-10)[0]
    return _exact(gain / k + basis @ u)


def contextcite(v: Game, k: int, budget: int, seed: int = 0) -> Estimate:
    """ContextCite's linear surrogate: ablations keeping each document with probability 1/2 (a draw
    at a time, :func:`_draws`), then a Lasso fit (penalty :data:`LASSO_ALPHA`, on standardised
    indicators and values, weights returned to the game's scale) of v(S) on which documents S keeps;
    phi_i is document i's weight. Not efficient: v(empty) + sum phi predicts v(all) only as far as
    the fit does. A document kept in every draw or in none gets 0."""
    from sklearn.linear_model import Lasso
    v(frozenset()), v(everyone(k))  # read by every method: P_0 and P_k

    def ablation(rng: np.random.Generator) -> List[Coalition]:
        return [frozenset(int(i) + 1 for i in np.flatnonzero(rng.random(k) < 0.5))]
    rows = _draws(k, budget, seed, ablation, 'contextcite')
    z = np.array([[i + 1 in s for i in range(k)] for s in rows], dtype=float)
    y = np.array([v(s) for s in rows], dtype=float)
    spread, scale = z.std(axis=0), y.std()
    if scale == 0:
        return _exact(np.zeros(k))
    varies = spread > 0
    phi = np.zeros(k)
    if varies.any():
        x = (z[:, varies] - z[:, varies].mean(axis=0)) / spread[varies]
        fit = Lasso(alpha=LASSO_ALPHA, fit_intercept=True, random_state=0).fit(x, (y - y.mean()) / scale)
        phi[varies] = fit.coef_ * scale / spread[varies]
    return _exact(phi)


def check_method(method: str, budget: Optional[int]) -> None:
    """A :class:`~pyterrier_utility.errors.SettingError` unless ``method`` is one of
    :data:`~pyterrier_utility.vocabulary.ATTRIBUTION_METHODS` and ``budget`` is given for the
    :data:`SAMPLED` methods (an integer >= 2) and for them only."""
    check(method in ATTRIBUTION_METHODS, 'attribution', f'method must be {either(ATTRIBUTION_METHODS)}, got {method!r}')
    if method in SAMPLED:
        check(budget is not None, 'attribution', f'method {method!r} needs a budget of coalition evaluations')
        check_int('attribution', 'budget', budget, 2)
    else:
        check(budget is None, 'attribution', f'a budget applies to the sampling methods ({either(SAMPLED)}) only, '
                                             f'not {method!r}')


def estimate(v: Game, k: int, method: str, budget: Optional[int] = None, seed: int = 0,
             tolerance: float = TOLERANCE) -> Estimate:
    """The attribution of the k positions of game ``v`` by ``method`` (one of
    :data:`~pyterrier_utility.vocabulary.ATTRIBUTION_METHODS`); ``budget`` and ``seed`` are those
    of the :data:`SAMPLED` methods, ``tolerance`` ``tmc``'s."""
    check_method(method, budget)
    check_int('attribution', 'k', k, 1)
    if method in SAMPLED:
        assert budget is not None  # checked above
        if method == 'tmc':
            return tmc(v, k, budget, seed, check_number('tmc', 'tolerance', tolerance, 0))
        return {'permutation': permutation, 'kernelshap': kernelshap, 'contextcite': contextcite}[method](
            v, k, budget, seed)
    return {'shapley': shapley, 'loo': loo, 'single': single}[method](v, k)


def coalitions(k: int, method: str, budget: Optional[int] = None, seed: int = 0, tolerance: float = TOLERANCE,
               known: Optional[Mapping[Coalition, float]] = None) -> List[Coalition]:
    """The coalitions :func:`estimate` reads for these arguments that ``known`` does not hold, each
    once, smallest first (then by positions): found by running the estimator on a game that records
    what it is asked. ``tmc`` depends on the values: given those ``known``, the next coalition of
    each order whose walk is not over (all of them once each walk has ended)."""
    known = known or {}
    asked: Dict[Coalition, float] = {}

    def record(s: Coalition) -> float:
        if s in known:
            return known[s]
        asked[s] = 0.0
        return math.nan if method == 'tmc' else 0.0
    estimate(record, k, method, budget, seed, tolerance)
    return sorted(asked, key=lambda s: (len(s), sorted(s)))


def coalition_name(coalition: Coalition) -> str:
    """A coalition as text: its positions ascending, space-separated ('' for the empty one)."""
    return ' '.join(map(str, sorted(coalition)))


def parse_coalition(text: str) -> Coalition:
    """The coalition :func:`coalition_name` wrote (NaN or '' for the empty one, as a CSV reads back)."""
    return frozenset(int(p) for p in text.split()) if isinstance(text, str) else frozenset()
