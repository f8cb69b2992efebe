"""What every predictor shares: a ranking in, the same rows out with one query-level column."""
from typing import Sequence

import numpy as np
import pandas as pd
import pyterrier as pt

from .._checks import check_int
from .._frames import validate_columns
from .._messages import warn_qids


class QueryPredictor(pt.Transformer):
    """A query-performance predictor: groups a ranking by ``qid`` (each group in rank order) and adds
    the column :attr:`column`, one value per query, to every row of the query.

    A subclass sets :attr:`column` (in its constructor where the name depends on its settings), the
    columns it reads (:attr:`needs`) and :meth:`predict`. A value that cannot be computed for a
    query is NaN, and one warning names those queries.
    """
    needs: Sequence[str] = ('qid', 'docno', 'score')
    column: str = ''
    #: Why a query's value is NaN, said in the warning that names them.
    undefined = 'undefined'

    def __init__(self):
        pass

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, self.needs)
        if inp.empty:
            return inp.assign(**{self.column: pd.Series(dtype=float)})
        ranked = inp if 'rank' in inp.columns or 'score' not in inp.columns else pt.model.add_ranks(inp.copy())
        if 'rank' in ranked.columns:
            ranked = ranked.sort_values(['qid', 'rank'], kind='stable')
        groups = ranked.groupby('qid', sort=False)
        values = {}
        for qid, group in pt.tqdm(groups, total=groups.ngroups, desc=type(self).__name__, unit='q',
                                  disable=not getattr(self, 'verbose', False)):
            values[qid] = float(self.predict(group))
        missing = [q for q, v in values.items() if not np.isfinite(v)]
        warn_qids(f'{self!r}: {self.undefined}, {self.column} is NaN', missing)
        return inp.assign(**{self.column: inp['qid'].map(values).astype(float)})

    def predict(self, ranking: pd.DataFrame) -> float:
        """The value for one query's ranking (its rows in rank order)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        args = ', '.join(f'{a.name}={a.value!r}' for a in pt.inspect.transformer_attributes(self))
        return f'{type(self).__name__}({args})'


def depth(owner: str, k: int) -> int:
    """``k`` checked as a depth (an integer >= 1)."""
    return check_int(owner, 'k', k, 1)
