"""One query of a study inline in Jupyter (:func:`query_view`): its contexts in the reader's order
and its answers with their scores, in the report's words and marks."""
import dataclasses
import html
import math
from pathlib import Path
from typing import Mapping, Optional

import pandas as pd

from ..errors import SettingError
from ..study.folder import StudyFolder, read_study, study_from_frames
from ..vocabulary import ZERO_SHOT
from .markup import CUT_MARK, cell_number, html_table


class QueryView:
    """One query of a study, shown inline by Jupyter: its 0-shot answers, then per system and k the
    contexts in the reader's order (docno, label, text) and the answers with their P (FBERT, EM, ...; and,
    where the engine said, their mean log-probability, and a mark where cut at max_new_tokens).

    Attributes:
        study: the study the query is read from.
        rows: the query's per_query rows shown (one label set).
    """

    def __init__(self, study: StudyFolder, rows: pd.DataFrame):
        self.study, self.rows = study, rows

    def __repr__(self) -> str:
        first = self.rows.iloc[0]
        cells = ', '.join(f'{s} k={k:g}: U={u:.3f}' for s, k, u in zip(self.rows['system'], self.rows['k'],
                                                                        self.rows['utility']))
        return f'QueryView(qid={first.qid!r}, {first.labels}; {cells})'

    def _of_query(self, frame: pd.DataFrame, **equal) -> pd.DataFrame:
        """The rows of ``frame`` for this query (its dataset and qid) with the ``equal`` column values."""
        first = self.rows.iloc[0]
        keep = (frame['dataset'] == first.dataset) & (frame['qid'] == first.qid)
        for column, value in equal.items():
            keep &= frame[column] == value
        return frame[keep]

    def _answers(self, system: str, k) -> str:
        st = self.study
        if st.answers is None:
            return '<p class="note">answers.csv is not in the study folder.</p>'
        cell = self._of_query(st.answers, system=system, k=k).sort_values('sample')
        scores = {}
        if st.scores is not None:
            s = self._of_query(st.scores, labels=self.rows['labels'].iloc[0], system=system, k=k)
            scores = {sample: (f, d) for sample, f, d in zip(s['sample'], s['quality'], s['best_docno'])}
        cut = cell['truncated'].eq(True) if 'truncated' in cell.columns else [False] * len(cell)
        rows = [[f'{sample:g}', html.escape(answer) + (CUT_MARK if was_cut else ''),
                 cell_number(scores.get(sample, (math.nan,))[0]), html.escape(str(scores.get(sample, ('', '–'))[1]))]
                for sample, answer, was_cut in zip(cell['sample'], cell['qanswer'], cut)]
        header = ['sample', 'answer', st.quality_name, 'best doc']
        if 'mean_logprob' in cell.columns and st.answers['mean_logprob'].notna().any():
            header.append('mean log-prob')
            for row, value in zip(rows, cell['mean_logprob']):
                row.append(cell_number(value))
        return html_table(header, rows)

    def _contexts(self, system: str, k) -> str:
        if self.study.contexts is None:
            return '<p class="note">contexts.csv is not in the study folder.</p>'
        cell = self._of_query(self.study.contexts, system=system, k=k).sort_values('position')
        rows = [[f'{p:g}', html.escape(d), 'unjudged' if not math.isfinite(lab) else f'{lab:g}', html.escape(t)]
                for p, d, lab, t in zip(cell['position'], cell['docno'], cell['label'], cell['text'])]
        return html_table(['context', 'docno', 'label', 'text'], rows)

    def _repr_html_(self) -> str:
        first, st = self.rows.iloc[0], self.study
        text = '' if st.queries is None else ' '.join(self._of_query(st.queries)['query'])
        parts = [f'<h3>Query {html.escape(first.qid)}: {html.escape(text)}</h3>',
                 f'<h4>0-shot: P_0 {cell_number(first.quality_0shot)} ({html.escape(first.labels)})</h4>',
                 self._answers(ZERO_SHOT, 0)]
        for row in self.rows.itertuples():
            parts += [f'<h4>{html.escape(row.system)}, k={row.k:g}: nDCG@k {cell_number(row.ndcg)}, '
                      f'P_k {cell_number(row.quality)}, U {cell_number(row.utility)}</h4>',
                      self._contexts(row.system, row.k), self._answers(row.system, row.k)]
        return '<div class="pu-query">' + '\n'.join(parts) + '</div>'


def query_view(source, qid: str, system: Optional[str] = None, k: Optional[int] = None,
               labels: Optional[str] = None, dataset: Optional[str] = None) -> QueryView:
    """One query's contexts and answers, for Jupyter (``_repr_html_``).

    Args:
        source: a study folder, or frames by name (``per_query``, ``answers``, ``scores``, ``contexts``,
            ``queries``), or an object holding them as dataclass fields (:class:`StudyResults`).
        qid: the query.
        system, k: only this system / this k (default: every one).
        labels: the label set of the scores shown (default: the study's first).
        dataset: the dataset of the query, in a study over several.

    Example::

        from pyterrier_utility.report import query_view
        query_view('results/study', '1', system='BM25', k=3)
    """
    if isinstance(source, (str, Path)):
        study = read_study(source)
    else:
        frames = source if isinstance(source, Mapping) else {
            f.name: getattr(source, f.name) for f in dataclasses.fields(source)
            if isinstance(getattr(source, f.name), pd.DataFrame)}
        study = study_from_frames(frames)
    pq = study.per_query
    labels = labels if labels is not None else pq['labels'].iloc[0]
    keep = (pq['qid'] == str(qid)) & (pq['labels'] == labels)
    for column, value in (('system', system), ('k', k), ('dataset', dataset)):
        keep &= True if value is None else pq[column] == value
    if not keep.any():
        raise SettingError(f'query_view: no per_query row for qid {qid!r}, {labels}'
                           + ''.join(f', {c} {v!r}' for c, v in (('system', system), ('k', k), ('dataset', dataset))
                                     if v is not None))
    rows = pq[keep]
    return QueryView(study, rows[rows['dataset'] == rows['dataset'].iloc[0]])
