"""The query explorer's data, as the study's page embeds it: the rows of ``per_query.csv`` and each
cell's contexts, answers and scores, every string stored once and referred to by index."""
import math
import re
from typing import Dict, Optional

import pandas as pd

from ..schema import PER_QUERY_VALUES
from ..study.folder import StudyFolder
from ..vocabulary import ZERO_SHOT


def _json_value(value, whole: bool = False):
    """A CSV number as JSON: NaN as null; with ``whole`` (counts, labels), an integral value as an int."""
    if not math.isfinite(value):
        return None
    return int(value) if whole and float(value).is_integer() else float(value)


def _relevance_rule(labels: str) -> Optional[dict]:
    """``label>=2`` -> {'min': 2}; ``label in {2,3}`` -> {'in': [2, 3]}; other wordings: None."""
    minimum = re.fullmatch(r'label>=(-?\d+)', labels)
    if minimum:
        return {'min': int(minimum.group(1))}
    among = re.fullmatch(r'label in \{([-\d, ]+)\}', labels)
    return {'in': [int(x) for x in among.group(1).split(',')]} if among else None


class _Codes:
    """Distinct values in first-seen order; ``code(value)`` is the value's index."""

    def __init__(self, values=()):
        self.values, self.index = [], {}
        for value in values:
            self.code(value)

    def code(self, value) -> int:
        if value not in self.index:
            self.index[value] = len(self.values)
            self.values.append(value)
        return self.index[value]


def _cells(frame: pd.DataFrame, query: Dict[tuple, int], systems: _Codes, *inner: str) -> Dict[str, list]:
    """'query|system|k' (and ``labels`` codes in between when asked) -> the frame's rows in order of ``inner[0]``."""
    frame = frame[[(d, q) in query for d, q in zip(frame['dataset'], frame['qid'])]]
    frame = frame.sort_values(inner[0], kind='stable')
    cells: Dict[str, list] = {}
    for row in frame.itertuples(index=False):
        key = f'{query[row.dataset, row.qid]}|{systems.code(row.system)}|{int(row.k)}'
        cells.setdefault(key, []).append(row)
    return cells


def report_data(study: StudyFolder) -> dict:
    """The explorer's data, as embedded in the page: strings stored once and referred to by index.

    ``rows`` holds ``per_query.csv`` column by column (``dataset``, ``labels``, ``system`` and ``query``
    as indices into ``datasets``, ``labels``, ``systems`` and ``queries``; ``block`` is what heads
    ``dataset``: Dataset, or Reader in a study of several readers; ``quality`` what heads an answer's P:
    FBERT, EM, ...); ``contexts``, ``answers`` and ``scores``
    map ``'query|system|k'`` (``scores``: ``'query|labels|system|k'``) to the cell's contexts
    ``[doc, label]`` in position order, answers ``[sample, answer]`` and scores
    ``[sample, quality, best_docno]``. NaN is null.

    Args:
        study: a study folder, as :func:`~pyterrier_utility.study.folder.read_study` reads it.

    Example::

        data = report_data(read_study('results/study'))
        print(len(data['rows']['qid']))
    """
    pq = study.per_query
    datasets, labels, systems = _Codes(pq['dataset']), _Codes(pq['labels']), _Codes(pq['system'])
    keys = list(dict.fromkeys(zip(pq['dataset'], pq['qid'])))
    query = {key: i for i, key in enumerate(keys)}
    text = {} if study.queries is None else dict(zip(zip(study.queries['dataset'], study.queries['qid']),
                                                     study.queries['query']))
    data = {'named_datasets': study.named_datasets, 'block': study.block, 'quality': study.quality_name,
            'datasets': datasets.values,
            'labels': labels.values, 'relevance': [_relevance_rule(x) for x in labels.values],
            'queries': {'dataset': [datasets.code(d) for d, _ in keys], 'qid': [q for _, q in keys],
                        'text': [text.get(key) for key in keys]},
            'rows': {'dataset': [datasets.code(x) for x in pq['dataset']],
                     'labels': [labels.code(x) for x in pq['labels']],
                     'system': [systems.code(x) for x in pq['system']], 'k': [int(x) for x in pq['k']],
                     'qid': [query[key] for key in zip(pq['dataset'], pq['qid'])]}}
    for column in PER_QUERY_VALUES:
        data['rows'][column] = [_json_value(x, column == 'n_docs') for x in pq[column]]
    docs, docnos, answers = _Codes(), [], _Codes()
    if study.contexts is not None:
        data['contexts'] = {key: [[docs.code((r.dataset, r.docno, r.text)), _json_value(r.label, True)] for r in rows]
                            for key, rows in _cells(study.contexts, query, systems, 'position').items()}
        docnos = [docno for _, docno, _ in docs.values]
    if study.answers is not None:
        said = {c: c in study.answers.columns for c in ('mean_logprob', 'truncated')}
        data['answers'] = {key: [[int(r.sample), answers.code(r.qanswer),
                                  _json_value(r.mean_logprob) if said['mean_logprob'] else None,
                                  r.truncated if said['truncated'] else None] for r in rows]
                           for key, rows in _cells(study.answers, query, systems, 'sample').items()}
    if study.scores is not None:
        scores = study.scores[study.scores['labels'].isin(labels.index)]
        data['scores'] = {}
        for label_code, part in scores.groupby(scores['labels'].map(labels.index)):
            for key, rows in _cells(part, query, systems, 'sample').items():
                q, rest = key.split('|', 1)
                data['scores'][f'{q}|{label_code}|{rest}'] = [[int(r.sample), _json_value(r.quality), r.best_docno]
                                                             for r in rows]
    data.update(systems=systems.values, zero_shot=systems.code(ZERO_SHOT), answer_texts=answers.values,
                docs={'docno': docnos, 'text': [t for _, _, t in docs.values]})
    return data
