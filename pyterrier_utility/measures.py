"""ir_measures measures over the columns :class:`~pyterrier_utility.UtilityEvaluator` adds.

They make answer quality and context utility sit next to nDCG@k in ``pt.Experiment``. Each reads a
per-query value already computed in the run frame. A query with no relevant document (or a 0-shot
FBERT of 0) has NaN, which the evaluator has warned about: ir_measures' own aggregation
(``ir_measures.calc_aggregate``) skips it, while ``pt.Experiment`` averages per-query values itself
and so reports NaN, visibly; restrict the topics with
:func:`pyterrier_utility.datasets.answerable_topics` to average over answerable queries.
"""
import math

import ir_measures
from ir_measures.measures.base import Agg


class NanMeanAgg(Agg):
    """Mean of the values that are not NaN (NaN when there are none)."""

    def __init__(self):
        self.sum = 0.0
        self.count = 0

    def add(self, value):
        if not math.isnan(value):
            self.sum += value
            self.count += 1

    def result(self):
        return self.sum / self.count if self.count else float('nan')


def _column_measure(column: str, name: str, desc: str):
    def impl(qrels, run):
        return float(run[column].iloc[0])

    base = type(ir_measures.define_byquery(impl, name=name, support_cutoff=False,
                                           run_inputs=['query_id', column], qrel_inputs=['query_id'],
                                           short_desc=desc))

    class ColumnMeasure(base):
        __doc__ = desc

        def aggregator(self):
            return NanMeanAgg()

    return ColumnMeasure()


#: Answer quality P_k: max BERTScore F1 of the k-shot answer against the relevant documents (column ``fbert``).
FBERT = _column_measure('fbert', 'FBERT', 'Answer quality P_k: max BERTScore F1 against relevant documents')
#: 0-shot answer quality P_0 (column ``fbert_0shot``).
FBERT0 = _column_measure('fbert_0shot', 'FBERT0', '0-shot answer quality P_0')
#: Context utility U = (P_k - P_0) / P_0 (column ``utility``).
Utility = _column_measure('utility', 'Utility', 'Context utility U = (P_k - P_0) / P_0')
