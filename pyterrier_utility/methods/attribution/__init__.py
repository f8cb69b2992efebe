"""Which document carried the utility: per-document attribution of U.

:mod:`.games` holds the games over context positions and their estimators (exact and sampled
Shapley, leave-one-out, single documents).

Example::

    from pyterrier_utility.methods.attribution import games
    games.estimate(lambda s: 0.5 + 0.2 * (1 in s), 2, 'shapley').phi  # array([0.2, 0. ])
"""
from .games import MAX_EXACT_K, Estimate, coalition_name, coalitions, estimate, parse_coalition

__all__ = ['Estimate', 'MAX_EXACT_K', 'coalition_name', 'coalitions', 'estimate', 'parse_coalition']
