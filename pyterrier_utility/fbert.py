"""FBERT: the quality of an answer as its best BERTScore F1 against the query's relevant documents."""
import warnings
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

import numpy as np
import pandas as pd
import pyterrier as pt

from ._util import check, validate_columns, warn_qids
from .bertscore import PAPER_MODEL, BertScore

Labels = Union[int, Iterable[int]]


def check_labels(owner: str, labels: Labels) -> Labels:
    """``labels`` as given, if it is a minimum label (an int) or a non-empty set of ints."""
    if isinstance(labels, (int, np.integer)) and not isinstance(labels, bool):
        return labels
    try:
        values = list(labels)
    except TypeError:
        values = None
    check(bool(values) and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values), owner,
          f'labels must be a minimum label (e.g. 2) or a non-empty set of labels (e.g. {{2, 3}}), got {labels!r}')
    return set(int(v) for v in values)


def relevant_docnos(qrels: pd.DataFrame, labels: Labels) -> Dict[str, List[str]]:
    """qid -> docnos judged relevant. ``labels``: a minimum label (int) or a set of labels."""
    validate_columns('qrels', qrels, ['qid', 'docno', 'label'])
    labels = check_labels('relevant_docnos', labels)
    if isinstance(labels, (int, np.integer)):
        keep = qrels['label'] >= labels
    else:
        keep = qrels['label'].isin(list(labels))
    rel = qrels[keep]
    return {str(q): list(g['docno'].astype(str)) for q, g in rel.groupby('qid', sort=False)}


def describe_labels(labels: Labels) -> str:
    if isinstance(labels, (int, np.integer)):
        return f'label>={labels}'
    return 'label in {' + ','.join(str(x) for x in sorted(labels)) + '}'


class FBertScorer(pt.Transformer):
    """Adds ``fbert``: P(a) = max over the query's relevant documents of BERTScore F1(a, document).

    Each row's answer (``qanswer``) is scored against the texts of the documents judged relevant for
    its ``qid``. Each distinct answer is scored once per query; each text is encoded once (see
    :class:`~pyterrier_utility.bertscore.BertScore`). Queries absent from the qrels, or with no
    relevant document, get NaN and one warning naming them; an empty answer scores 0 (as in
    bert_score) and is warned about.

    Args:
        qrels: ``qid``, ``docno``, ``label``.
        texts: docno -> text of (at least) the relevant documents.
        labels: the relevant labels: a minimum (``2``: labels 2 and up) or a set (``{2, 3}``).
        model_type: BERTScore model (paper: ``bert-large-uncased``; offline: ``'minilm'``), or a
            ready :class:`~pyterrier_utility.bertscore.BertScore` to share its embedding cache.
        num_layers, idf, batch_size, device: as in bert_score. With ``idf``, idf is computed over
            the relevant documents' texts.
        answer_column: the column holding answers.
        output_column: the column written.

    Example::

        scorer = FBertScorer(dataset.get_qrels(), dataset.texts, labels=2, model_type='minilm')
        (dataset.bm25() % 5 >> reader >> scorer)(topics)
    """

    def __init__(self, qrels: pd.DataFrame, texts: Mapping[str, str], *, labels: Labels = 2,
                 model_type: Union[str, BertScore] = PAPER_MODEL, num_layers: Optional[int] = None,
                 idf: bool = False, batch_size: int = 64, device: Optional[str] = None,
                 answer_column: str = 'qanswer', output_column: str = 'fbert'):
        self.qrels = qrels
        self.texts = texts
        self.model_type, self.num_layers, self.idf = model_type, num_layers, idf
        self.batch_size, self.device = batch_size, device
        self.labels = check_labels('FBertScorer', labels)
        self.relevant = relevant_docnos(qrels, self.labels)
        self.judged_qids = set(qrels['qid'].astype(str))
        from .datasets import texts_of
        needed = list(dict.fromkeys(d for docs in self.relevant.values() for d in docs))
        self.ref_texts = texts_of(texts, needed)
        missing = [d for d in needed if d not in self.ref_texts]
        if missing:
            raise KeyError(f'FBertScorer: no text for relevant docno {missing[:10]}')
        blank = [d for d, t in self.ref_texts.items() if not isinstance(t, str)]
        if blank:
            warnings.warn(f'FBertScorer: relevant docno {blank[:10]} have no text ({type(self.ref_texts[blank[0]]).__name__}); '
                          'they score 0 against every answer')
            self.ref_texts.update({d: '' for d in blank})
        if isinstance(model_type, BertScore):
            self.bertscore = model_type
        else:
            idf_sents = list(self.ref_texts.values()) if idf else None
            self.bertscore = BertScore(model_type, num_layers, idf=idf, idf_sents=idf_sents,
                                       batch_size=batch_size, device=device)
        self.answer_column = answer_column
        self.output_column = output_column

    def score(self, qids: Sequence, answers: Sequence[str]) -> np.ndarray:
        """FBERT of each (qid, answer) pair; NaN where the query has no relevant document."""
        qids = [str(q) for q in qids]
        answers = ['' if a is None or (isinstance(a, float) and np.isnan(a)) else str(a) for a in answers]
        out = np.full(len(qids), np.nan)
        unjudged = {q for q in qids if q not in self.relevant}
        if unjudged:
            why = {q: 'not in the qrels' if q not in self.judged_qids else 'no relevant document' for q in unjudged}
            for reason in sorted(set(why.values())):
                warn_qids(f'FBERT is NaN ({reason}, {describe_labels(self.labels)})',
                          [q for q, r in why.items() if r == reason])
        empty = {q for q, a in zip(qids, answers) if not a.strip() and q in self.relevant}
        warn_qids('empty answer scored FBERT 0', empty)
        by_qid: Dict[str, List[int]] = {}
        for i, q in enumerate(qids):
            if q in self.relevant:
                by_qid.setdefault(q, []).append(i)
        refs_needed = [self.ref_texts[d] for q in by_qid for d in self.relevant[q]]
        self.bertscore.embed([answers[i] for rows in by_qid.values() for i in rows] + refs_needed)
        for q, rows in by_qid.items():
            distinct = list(dict.fromkeys(answers[i] for i in rows))
            refs = [self.ref_texts[d] for d in self.relevant[q]]
            best = dict(zip(distinct, self.bertscore.f1_matrix(distinct, refs).max(axis=1)))
            for i in rows:
                out[i] = best[answers[i]]
        return out

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', self.answer_column])
        return inp.assign(**{self.output_column: self.score(inp['qid'], inp[self.answer_column])})

    def __repr__(self):
        return f'FBertScorer({self.bertscore.name!r}, {describe_labels(self.labels)})'
