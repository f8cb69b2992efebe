"""eRAG (Salemi & Zamani, SIGIR 2024): each document's label is the quality of the answer it alone yields.

:class:`ERAGLabeller` answers each retrieved document alone with its query and labels the document
with that answer's score; :func:`pyterrier_utility.measures.erag_measure` aggregates the labels over
the ranking for ``pt.Experiment``; :func:`pyterrier_utility.rank_correlation` compares per-query eRAG
scores with an end-to-end measure (utility, answer quality) across queries, as the eRAG paper does.
"""
from typing import Optional

import numpy as np
import pandas as pd
import pyterrier as pt

from .._frames import normalise_frame, validate_columns
from ..errors import SettingError
from ..qualities import EM, F1
from ..reader import Reader
from ..scoring.fbert import FBertScorer
from ..scoring.gold import gold_answer_score

#: The gold-answer metrics eRAG's labels can take (its paper's exact match and token F1).
GOLD_METRICS = (EM.name, F1.name)


class ERAGLabeller(pt.Transformer):
    """Adds ``erag_label``: the score of the answer the reader gives from each document alone.

    eRAG (Salemi & Zamani, SIGIR 2024): for every row of a result frame, the reader answers the query
    with that single document as its context, and the answer's downstream score becomes the
    document's label. The prompt is the k=1 prompt, fitted to the reader's input limit like every
    prompt (documents truncated, instructions kept), so a document that a study placed at rank 1 of a
    k=1 context shares its answers through the reader's cache; other documents are answered anew.
    The answer is scored by ``metric``: ``'fbert'`` — FBERT against the query's relevant documents
    (this project's downstream measure; needs ``scorer``); ``'em'`` or ``'f1'`` — against the
    ``gold_answer`` column (a string or a list of strings, as pyterrier-rag's ``rag:`` datasets
    provide). With several samples the label is the mean over the samples; ``erag_answer`` holds the
    first sample's answer. Input rows repeated per sample (a reader's output with a ``sample``
    column) are taken once: one output row per document.

    Args:
        reader: the :class:`~pyterrier_utility.Reader` that would consume the ranking.
        scorer: an :class:`~pyterrier_utility.FBertScorer` (metric ``'fbert'``).
        metric: ``'fbert'``, ``'em'`` or ``'f1'``.

    Example::

        label = ERAGLabeller(reader, scorer)
        pt.Experiment([bm25 % 5 >> label], topics, qrels, [ERAG_P, ERAG_Hit, erag_measure('nDCG', 0.3) @ 5])
    """

    def __init__(self, reader: Reader, scorer: Optional[FBertScorer] = None, *, metric: str = 'fbert'):
        if not isinstance(reader, Reader):
            raise SettingError(f'ERAGLabeller: reader must be a pyterrier_utility.Reader, got {reader!r}')
        if scorer is not None and not isinstance(scorer, FBertScorer):
            raise SettingError(f'ERAGLabeller: scorer must be an FBertScorer or None, got {scorer!r}')
        if metric not in ('fbert',) + GOLD_METRICS:
            raise SettingError(f"ERAGLabeller: metric must be 'fbert', 'em' or 'f1', got {metric!r}")
        if metric == 'fbert' and scorer is None:
            raise SettingError("ERAGLabeller: metric 'fbert' needs an FBertScorer")
        self.reader = reader
        self.scorer = scorer
        self.metric = metric

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        needed = ['qid', 'query', 'docno', 'text'] + (['gold_answer'] if self.metric in GOLD_METRICS else [])
        validate_columns(self, inp, needed)
        inp = normalise_frame(repr(self), inp)
        if 'sample' in inp.columns:
            inp = inp[inp['sample'] == inp['sample'].min()].drop(columns=['sample']).reset_index(drop=True)
        if inp.empty:
            return inp.assign(erag_answer=pd.Series(dtype=object), erag_label=pd.Series(dtype=float))
        prompts = self.reader.prompter.fitted_prompts([(qid, str(q), ['' if pd.isna(t) else str(t)])
                                              for qid, q, t in zip(inp['qid'], inp['query'], inp['text'])])
        distinct = list(dict.fromkeys(prompts))
        answers = dict(zip(distinct, ([a.text for a in row] for row in self.reader.answer(distinct))))
        samples = [answers[p] for p in prompts]  # per row: one answer per sample
        if self.metric == 'fbert':
            assert self.scorer is not None  # metric 'fbert' needs one: checked when made
            flat_q = [q for q, s in zip(inp['qid'], samples) for _ in s]
            flat = self.scorer.score(flat_q, [a for s in samples for a in s])
        else:
            flat = np.array([gold_answer_score(a, g, self.metric)
                             for g, s in zip(inp['gold_answer'], samples) for a in s])
        n = self.reader.n_samples
        labels = np.asarray(flat, float).reshape(len(inp), n).mean(axis=1)
        return inp.assign(erag_answer=[s[0] for s in samples], erag_label=labels)

    def __repr__(self):
        return f'ERAGLabeller({self.reader!r}, metric={self.metric!r})'
