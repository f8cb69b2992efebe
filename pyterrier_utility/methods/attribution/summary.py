"""What an attribution shows, per context kind: where the utility sits (mean share of U by rank
position), whether the relevant documents carry it, and how many documents hurt."""
from typing import List

import pandas as pd

from ..._frames import validate_columns
from ...schema import CELL


def attribution_table(attribution: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, labels,) system, k (and method, where there are several) of attribution
    rows (``attribution.csv``, or :class:`~.transformer.ContextAttribution`'s output with ``system``
    and ``k``): the mean
    ``phi_utility`` at each position (``pos 1`` .. ``pos K``: does utility sit at rank 1, in the
    middle, at the end?), the mean ``phi`` of the relevant and of the other documents (with a
    ``relevant`` column of booleans or 'True'/'False'), and the share of documents with negative phi.
    Means skip NaN.

    Example::

        attribution_table(pd.read_csv('results/attribution/attribution.csv'))
    """
    validate_columns('attribution_table', attribution, [*CELL[:2], 'position', 'phi', 'phi_utility'])
    keys: List[str] = [c for c in ('dataset', 'labels') if c in attribution.columns] + list(CELL[:2]) + (
        ['method'] if 'method' in attribution.columns and attribution['method'].nunique() > 1 else [])
    frame = attribution[keys].astype(str).assign(k=attribution['k'].astype(int), position=attribution['position'],
                                                 phi=attribution['phi'], phi_utility=attribution['phi_utility'])
    index = pd.MultiIndex.from_frame(frame[keys].drop_duplicates())  # in the order of the rows
    table = frame.groupby(keys + ['position'])['phi_utility'].mean().unstack('position').reindex(index)
    table.columns = [f'pos {int(p)}' for p in table.columns]
    if 'relevant' in attribution.columns:
        kind = attribution['relevant'].astype(str).map({'True': 'phi relevant', 'False': 'phi other'})
        by_kind = frame.assign(kind=kind).groupby(keys + ['kind'])['phi'].mean().unstack('kind')
        table = table.join(by_kind.reindex(columns=['phi relevant', 'phi other']))
    table['negative'] = frame.assign(negative=frame['phi'] < 0).groupby(keys)['negative'].mean()
    return table.reset_index()
