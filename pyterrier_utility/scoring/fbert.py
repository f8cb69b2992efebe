"""FBERT: the quality of an answer as its best BERTScore F1 against the query's relevant documents."""
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import pyterrier as pt

from .._checks import check
from .._frames import validate_columns
from .._messages import warn, warn_qids
from .._text import visible
from ..datasets.texts import texts_of
from ..qualities import FBERT_DOCS, Quality, ScoringInputs
from ..settings import LabelSet, LabelsLike
from ..vocabulary import AGGREGATIONS, SUBMEASURES
from .bertscore import PAPER_MODEL, BertScore


@FBERT_DOCS.register
class FBertScorer(pt.Transformer):
    """Adds ``fbert``: P(a) = max over the query's relevant documents of BERTScore F1(a, document)
    (the paper's FBERT; ``submeasure`` and ``agg`` choose precision or recall, and the mean over
    the documents, as the authors' evaluator also records).

    Each row's answer (``qanswer``) is scored against the texts of the documents judged relevant for
    its ``qid``. Each distinct answer is scored once per query; each text is encoded once (see
    :class:`~pyterrier_utility.scoring.bertscore.BertScore`). Queries absent from the qrels, or with no
    relevant document, get NaN and one warning naming them; an empty answer scores 0 (as in
    bert_score) and is warned about.

    It is pyterrier-rag's ``pyterrier_rag.measures.BERTScore(rel=r, agg='max')`` as a transformer:
    the same values on the same pairs with the same model (tested), with any model and label set,
    each text encoded once, NaN rather than an assertion for a query without a relevant document,
    and the qrels' texts looked up rather than carried in a ``text`` column. pyterrier-rag's measure
    is fixed to ``bert-large-uncased`` through Hugging Face ``evaluate`` (downloaded from the hub).

    Args:
        qrels: ``qid``, ``docno``, ``label``.
        texts: docno -> text of (at least) the relevant documents.
        labels: the relevant labels, a :class:`~pyterrier_utility.settings.LabelSet` or any of its
            spellings: a minimum (``2``: labels 2 and up) or a set (``{2, 3}``).
        model_type: BERTScore model (paper: ``bert-large-uncased``; offline: ``'minilm'``), or a
            ready :class:`~pyterrier_utility.scoring.bertscore.BertScore` to share its embedding cache.
        num_layers, idf, batch_size, device: as in bert_score. With ``idf``, idf is computed over
            the relevant documents' texts.
        submeasure: BERTScore's ``'P'``, ``'R'`` or ``'F1'`` (the paper).
        agg: over the relevant documents, ``'max'`` (the paper) or ``'mean'``.
        answer_column: the column holding answers.
        output_column: the column written.
        verbose: a progress bar counting the texts encoded (``pt.tqdm``, in a terminal too);
            ``False``: none (a ready ``BertScore`` keeps its own setting).

    Example::

        scorer = FBertScorer(dataset.get_qrels(), dataset.texts, labels=2, model_type='minilm')
        (dataset.bm25() % 5 >> reader >> scorer)(topics)
    """

    def __init__(self, qrels: pd.DataFrame, texts: Mapping[str, str], *, labels: LabelsLike = 2,
                 model_type: Union[str, BertScore] = PAPER_MODEL, num_layers: Optional[int] = None,
                 idf: bool = False, batch_size: int = 64, device: Optional[str] = None,
                 submeasure: str = 'F1', agg: str = 'max', answer_column: str = 'qanswer',
                 output_column: str = 'fbert', verbose: bool = True):
        check(submeasure in SUBMEASURES, 'FBertScorer',
              f'submeasure must be one of {list(SUBMEASURES)}, got {submeasure!r}')
        check(agg in AGGREGATIONS, 'FBertScorer', f'agg must be one of {list(AGGREGATIONS)}, got {agg!r}')
        self.submeasure, self.agg = submeasure, agg
        self.qrels = qrels
        self.texts = texts
        self.model_type, self.num_layers, self.idf = model_type, num_layers, idf
        self.batch_size, self.device, self.verbose = batch_size, device, verbose
        validate_columns('FBertScorer qrels', qrels, ['qid', 'docno', 'label'])
        self.labels = LabelSet.parse(labels)
        self.relevant = self.labels.relevant_docnos(qrels)
        self.judged_qids = set(qrels['qid'].astype(str))
        needed = list(dict.fromkeys(d for docs in self.relevant.values() for d in docs))
        self.ref_texts = texts_of(texts, needed)
        missing = [d for d in needed if d not in self.ref_texts]
        if missing:
            raise KeyError(f'FBertScorer: no text for relevant docno {missing[:10]}')
        blank = [d for d, t in self.ref_texts.items() if not isinstance(t, str)]
        if blank:
            warn(f'FBertScorer: relevant docno {blank[:10]} have no text '
                 f'({type(self.ref_texts[blank[0]]).__name__}); they score 0 against every answer')
            self.ref_texts.update({d: '' for d in blank})
        if isinstance(model_type, BertScore):
            self.bertscore = model_type
        else:
            idf_sents = list(self.ref_texts.values()) if idf else None
            self.bertscore = BertScore(model_type, num_layers, idf=idf, idf_sents=idf_sents,
                                       batch_size=batch_size, device=device, verbose=verbose)
        self.answer_column = answer_column
        self.output_column = output_column

    #: The quality it computes (:data:`~pyterrier_utility.qualities.FBERT_DOCS`).
    quality = FBERT_DOCS.name

    @classmethod
    def for_quality(cls, quality: Quality, inputs: ScoringInputs) -> 'FBertScorer':
        """The scorer of :data:`~pyterrier_utility.qualities.FBERT_DOCS` from a study's inputs: against the
        documents of ``inputs.labels``, with its BERTScore model, submeasure and aggregation."""
        return cls(inputs.qrels, inputs.dataset.texts, labels=inputs.labels, model_type=inputs.bertscore,
                   submeasure=inputs.submeasure, agg=inputs.agg)

    @property
    def measure(self) -> str:
        """The name of what it scores, in messages: ``FBERT``, or ``FBERT(P, mean)`` and the like."""
        name = FBERT_DOCS.measure
        return name if (self.submeasure, self.agg) == ('F1', 'max') else f'{name}({self.submeasure}, {self.agg})'

    @property
    def references(self) -> str:
        """What answers are scored against, in messages: the relevant labels."""
        return str(self.labels)

    def score(self, qids: Sequence, answers: Sequence[str]) -> np.ndarray:
        """FBERT of each (qid, answer) pair; NaN where the query has no relevant document."""
        return self.score_with_reference(qids, answers)[0]

    def score_with_reference(self, qids: Sequence, answers: Sequence[str]) -> Tuple[np.ndarray, List[Optional[str]]]:
        """FBERT of each (qid, answer) pair and the relevant docno that gave the maximum (``None``
        where the score is NaN, and with ``agg='mean'``)."""
        qids = [str(q) for q in qids]
        answers = ['' if a is None or (isinstance(a, float) and np.isnan(a)) else str(a) for a in answers]
        out = np.full(len(qids), np.nan)
        best_docno: List[Optional[str]] = [None] * len(qids)
        unjudged = {q for q in qids if q not in self.relevant}
        if unjudged:
            why = {q: 'not in the qrels' if q not in self.judged_qids else 'no relevant document' for q in unjudged}
            for reason in sorted(set(why.values())):
                warn_qids(f'{self.measure} is NaN ({reason}, {self.labels})',
                          [q for q, r in why.items() if r == reason])
        empty = {q for q, a in zip(qids, answers) if not visible(a) and q in self.relevant}
        warn_qids(f'empty answer scored {self.measure} 0', empty)
        by_qid: Dict[str, List[int]] = {}
        for i, q in enumerate(qids):
            if q in self.relevant:
                by_qid.setdefault(q, []).append(i)
        refs_needed = [self.ref_texts[d] for q in by_qid for d in self.relevant[q]]
        self.bertscore.embed([answers[i] for rows in by_qid.values() for i in rows] + refs_needed)
        for q, rows in by_qid.items():
            distinct = list(dict.fromkeys(answers[i] for i in rows))
            refs = [self.ref_texts[d] for d in self.relevant[q]]
            values, ref = self.bertscore.best(distinct, refs, self.submeasure, self.agg)
            docnos = [None] * len(distinct) if ref is None else [self.relevant[q][r] for r in ref]
            best = dict(zip(distinct, zip(values, docnos)))
            for i in rows:
                out[i], best_docno[i] = best[answers[i]]
        return out, best_docno

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', self.answer_column])
        return inp.assign(**{self.output_column: self.score(inp['qid'], inp[self.answer_column])})

    def __repr__(self):
        return f'FBertScorer({self.bertscore.name!r}, {self.labels}, submeasure={self.submeasure!r}, agg={self.agg!r})'
