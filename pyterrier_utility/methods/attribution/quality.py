"""How good an attribution is, on the same coalitions for every method: how well its phi predict the
values of held-out coalitions, and how far they are from the exact Shapley values.

A method's phi predict the value of a coalition S additively, v(empty) + sum of phi_i over i in S.
Its linear datamodeling score (LDS; Park et al., 2023, as ContextCite uses it) on a context is the
Spearman correlation between those predictions and the values generated, over held-out coalitions
drawn as ContextCite draws ablations (each document kept with probability 1/2). Where the exact
Shapley values are known (``attribute --evaluate`` computes them up to
:data:`~pyterrier_utility.vocabulary.MAX_REFERENCE_K`), also the mean absolute error of phi against
them, their rank correlation, and whether the top document is the same.

Example::

    quality_table(pd.read_csv('attribution.csv'), pd.read_csv('coalitions.csv', keep_default_na=False))
"""
import warnings
from typing import List, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from ..._checks import check_int
from ..._frames import validate_columns
from ...schema import CELL, QUALITY_COLUMNS
from . import games


def held_out(k: int, n: int, seed: int = 0) -> List[games.Coalition]:
    """``n`` distinct coalitions of k documents (as many as there are, 2^k - 2, if fewer), each document
    kept with probability 1/2, neither the empty one nor the whole context (which every method reads);
    drawn from their own stream of ``seed`` (``numpy.random.default_rng((seed, 1))``), apart from the
    methods' draws."""
    check_int('attribution', 'evaluate', n, 1)
    rng = np.random.default_rng((seed, 1))
    target = min(n, 2 ** k - 2)
    drawn: dict = {}
    while len(drawn) < target:
        members = frozenset(int(i) + 1 for i in np.flatnonzero(rng.random(k) < 0.5))
        if 0 < len(members) < k:
            drawn[members] = None
    return list(drawn)


def lds(phi: np.ndarray, empty: float, values: Mapping[games.Coalition, float]) -> float:
    """The Spearman correlation between the values ``phi`` predict for the coalitions of ``values``
    (``empty`` + the sum of their members' phi) and ``values``; NaN where either is constant."""
    predicted = [empty + sum(phi[i - 1] for i in s) for s in values]
    return _spearman(predicted, list(values.values()))


def _spearman(a, b) -> float:
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float('nan')
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return float(stats.spearmanr(a, b)[0])


def quality_table(attribution: pd.DataFrame, coalitions: pd.DataFrame) -> pd.DataFrame:
    """One row per context (``labels``, system, k, qid) and method of ``attribution`` (``attribution.csv``'s
    rows): ``coalitions`` (how many the method read for it, from ``coalitions.csv``'s ``methods``), its
    ``lds`` over the context's held-out coalitions (``held_out`` true) and their number, and, where the
    exact Shapley values of the context are among the rows (method ``shapley``), ``mae``, ``spearman``
    (phi against exact) and ``top1`` (the same document has the largest phi). The ``shapley`` rows are
    included, against themselves."""
    keys = ['labels', *CELL]
    validate_columns('quality_table attribution', attribution, [*keys, 'method', 'position', 'phi'])
    validate_columns('quality_table coalitions', coalitions, [*keys, 'coalition', 'value', 'held_out', 'methods'])
    frame = coalitions.assign(_coalition=coalitions['coalition'].map(games.parse_coalition))
    held = frame[frame['held_out'].astype(str) == 'True']
    by_context = {key: rows for key, rows in frame.groupby(keys, sort=False)}
    held_by = {key: dict(zip(rows['_coalition'], rows['value'].astype(float))) for key, rows in
               held.groupby(keys, sort=False)}
    exact = {key: rows.sort_values('position')['phi'].to_numpy(float) for key, rows in
             attribution[attribution['method'] == 'shapley'].groupby(keys, sort=False)}
    out = []
    for (method, *key), rows in attribution.groupby(['method', *keys], sort=False):
        key = tuple(key)
        phi = rows.sort_values('position')['phi'].to_numpy(float)
        context = by_context[key]
        empty = float(context.loc[context['_coalition'] == frozenset(), 'value'].iloc[0])
        read = context['methods'].astype(str).str.split().map(lambda m: method in m)
        row = dict(zip(keys, key), method=method, coalitions=int(read.sum()),
                   efficient=method in games.EFFICIENT, held_out=len(held_by.get(key, {})),
                   lds=lds(phi, empty, held_by[key]) if key in held_by else float('nan'))
        if key in exact:
            reference = exact[key]
            row.update(mae=float(np.abs(phi - reference).mean()), spearman=_spearman(phi, reference),
                       top1=bool(np.argmax(phi) == np.argmax(reference)))
        else:
            row.update(mae=float('nan'), spearman=float('nan'), top1=None)
        out.append(row)
    return pd.DataFrame(out, columns=list(QUALITY_COLUMNS))


def quality_summary(quality: pd.DataFrame) -> pd.DataFrame:
    """:func:`quality_table`'s rows averaged over the queries, per label set, system, k and method (NaN
    skipped; ``top1`` as the share of contexts that agree), in the order of the rows."""
    keys = ['labels', *CELL[:2], 'method']
    values = ['coalitions', 'lds', 'mae', 'spearman', 'top1']
    validate_columns('quality_summary', quality, [*keys, *values])
    frame = quality.assign(top1=quality['top1'].map({True: 1.0, False: 0.0, 'True': 1.0, 'False': 0.0}))
    return frame.groupby(keys, sort=False)[values].mean().reset_index()
