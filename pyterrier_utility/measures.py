"""ir_measures measures over the columns the evaluators add: FBERT, FBERT0 (or P named for another quality,
:func:`quality_measures`, from its description in :mod:`~pyterrier_utility.qualities`), Utility, RetEval and eRAG.

They make answer quality and context utility sit next to nDCG@k in ``pt.Experiment``. Each reads a
per-query value already computed in the run frame. A query with no relevant document (or a 0-shot
FBERT of 0) has NaN, which the evaluator has warned about. The mean is one definition everywhere:
the plain mean over queries, as ``pt.Experiment`` computes it, so ``pt.Experiment`` and
``ir_measures.calc_aggregate`` agree, and a NaN query makes the mean NaN, visibly. Restrict the
topics with :func:`pyterrier_utility.datasets.answerable_topics` to average over answerable
queries; :func:`pyterrier_utility.study.table1` reports means over the finite values with
their count.
"""
from typing import Any, Optional

import ir_measures
import numpy as np
import pandas as pd

from .errors import SettingError
from .qualities import DEFAULT_QUALITY, FBERT_DOCS, Quality, quality_of


def _column_measure(column: str, name: str, desc: str):
    def impl(qrels, run):
        return float(run[column].iloc[0])

    base: Any = type(ir_measures.define_byquery(impl, name=name, support_cutoff=False,
                                           run_inputs=['query_id', column], qrel_inputs=['query_id'],
                                           short_desc=desc))

    class ColumnMeasure(base):
        __doc__ = desc

    return ColumnMeasure()


def _quality_measures(quality: Quality):
    return (_column_measure('quality', quality.measure, f'Answer quality P_k: {quality.description}'),
            _column_measure('quality_0shot', quality.p0_measure, f'0-shot answer quality P_0: {quality.description} '
                            '(shared by the systems of one reader: not significance-tested)'))


_FBERT_MEASURES = _quality_measures(FBERT_DOCS)
#: Answer quality P_k: max BERTScore F1 of the k-shot answer against the relevant documents (column ``quality``
#: of a study by FBERT).
FBERT = _FBERT_MEASURES[0]
#: 0-shot answer quality P_0 (column ``quality_0shot``). Not a property of the system: every system of
#: one reader shares each query's 0-shot answer, so in ``pt.Experiment(baseline=...)`` its ``+``,
#: ``-`` and ``p-value`` columns compare a value with itself (0, 0, NaN) and are not a test.
FBERT0 = _FBERT_MEASURES[1]
#: Context utility U (column ``utility``): (P_k - P_0) / P_0, or P_k - P_0 from a
#: :class:`~pyterrier_utility.UtilityEvaluator` with ``gain='absolute'``.
Utility = _column_measure('utility', 'Utility', "Context utility U = (P_k - P_0) / P_0, or P_k - P_0 (the evaluator's "
                          "gain='absolute')")


def quality_measures(quality: str = DEFAULT_QUALITY):
    """The measures of P_k (column ``quality``) and P_0 (``quality_0shot``) named for what ``quality``
    computes (its :class:`~pyterrier_utility.qualities.Quality`'s ``measure``): :data:`FBERT` and
    :data:`FBERT0` for the paper's FBERT, ``EM`` and ``EM_0shot``, ``F1`` and ``F1_0shot``, ``BERTScore``
    and ``BERTScore_0shot`` against gold answers.

    Example::

        p_k, p_0 = quality_measures('em')
        pt.Experiment([pipeline], topics, qrels, [nDCG@5, p_k, p_0, Utility])   # columns EM, EM_0shot
    """
    described = quality_of(quality)
    return (FBERT, FBERT0) if described == FBERT_DOCS else _quality_measures(described)


#: LLM-retEval (column ``reteval`` of :class:`~pyterrier_utility.LLMRetEval`): the share of queries whose
#: retrieved-context answer matches the gold-context answer.
RetEval = _column_measure('reteval', 'RetEval',
                          'LLM-retEval: the retrieved-context answer matches the gold-context answer')


def _ranked_labels(run: pd.DataFrame) -> np.ndarray:
    """The labels in rank order (by ``score`` descending, as ir_measures ranks a run)."""
    order = np.argsort(-run['score'].to_numpy(float), kind='stable')
    return run['erag_label'].to_numpy(float)[order]


def _aggregate(name: str, labels: np.ndarray, cutoff: Optional[int], threshold: Optional[float]) -> float:
    """One eRAG aggregation of a query's ranked labels; the labelled list is the whole ranking."""
    if np.isnan(labels).any():
        return float('nan')
    full = labels
    top = labels[:cutoff] if cutoff else labels
    if threshold is None:
        if name == 'P':
            # Over k, as trec_eval and the binary P@k: a ranking shorter than k is not rewarded for it.
            return float(top.sum() / (cutoff or len(top)))
        if name == 'Hit':
            return float(top.max())
        if name == 'nDCG':
            return _ndcg(top, np.sort(full)[::-1][:len(top)])
        raise SettingError(f'eRAG {name} needs binary labels: give a threshold')
    rel = (top >= threshold).astype(float)
    n_rel = float((full >= threshold).sum())
    if name == 'P':
        return float(rel.sum() / (cutoff or len(top)))
    if name == 'Hit':
        return float(rel.max())
    if name == 'R':
        return float(rel.sum() / n_rel) if n_rel else 0.0
    if name == 'MAP':
        hits = np.cumsum(rel)
        return float((rel * hits / np.arange(1, len(rel) + 1)).sum() / n_rel) if n_rel else 0.0
    if name == 'MRR':
        first = np.flatnonzero(rel)
        return float(1.0 / (first[0] + 1)) if len(first) else 0.0
    if name == 'nDCG':
        return _ndcg(rel, np.sort((full >= threshold).astype(float))[::-1][:len(top)])
    raise SettingError(f'unknown eRAG measure {name!r}')


def _ndcg(gains: np.ndarray, ideal: np.ndarray) -> float:
    discount = 1.0 / np.log2(np.arange(2, len(gains) + 2))
    best = float((ideal * discount[:len(ideal)]).sum())
    return float((gains * discount).sum() / best) if best > 0 else 0.0


#: eRAG aggregations: P (Precision), R (Recall), MAP, MRR, nDCG, Hit.
ERAG_MEASURES = ('P', 'R', 'MAP', 'MRR', 'nDCG', 'Hit')


def erag_measure(name: str, threshold: Optional[float] = None):
    """An ir_measures measure aggregating ``erag_label`` over each query's ranking (``@k`` cuts it).

    ``threshold``: labels at or above it count as relevant (binary). Without one the labels are used
    as they are: P is their sum over k (their mean when the ranking has k documents) and Hit their
    maximum, as eRAG defines for non-integer labels; nDCG with the labels as gains against the best
    order of the same labels is this project's extension (eRAG supports only P and Hit on
    non-integer labels); R, MAP and MRR need a threshold. The labelled list is the ranking itself,
    so R@k is the share of its relevant documents in the top k.
    Queries with a NaN label get NaN (and so does the mean over queries, as for the other measures).
    """
    if name not in ERAG_MEASURES:
        raise SettingError(f'erag_measure: name must be one of {ERAG_MEASURES}, got {name!r}')
    if threshold is None and name in ('R', 'MAP', 'MRR'):
        raise SettingError(f'erag_measure: {name} needs binary labels: give a threshold')
    label = f'eRAG_{name}' + ('' if threshold is None else f'(t={threshold:g})')
    base: Any = type(ir_measures.define(lambda qrels, run: [], name=label, support_cutoff=True,
                                   run_inputs=['query_id', 'doc_id', 'score', 'erag_label'],
                                   qrel_inputs=['query_id'], short_desc=f'eRAG {name} of the document labels'))

    class ERAGMeasure(base):
        __doc__ = (f'eRAG {name} of the eRAG document labels'
                   + ('' if threshold is None else f', relevant at >= {threshold}'))

        def runtime_impl(self, qrels, run):
            # The whole labelled ranking is needed (recall, ideal order), so the cutoff is applied here.
            for qid, frame in run.groupby('query_id', sort=False):
                value = _aggregate(name, _ranked_labels(frame), self.params.get('cutoff'), threshold)
                yield ir_measures.Metric(qid, self, value)

    return ERAGMeasure()


#: Continuous-label eRAG precision (mean label) and hit (max label).
ERAG_P = erag_measure('P')
ERAG_Hit = erag_measure('Hit')
