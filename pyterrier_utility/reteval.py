"""LLM-retEval: does the answer from the retrieved documents match the answer from the gold documents?

Following "Evaluating the Retrieval Component in LLM-Based Question Answering Systems" (2024): a
retriever scores 1 on a query when the reader's answer from the retrieved top-k matches its answer
from the gold (judged relevant) documents, else 0. The match is decided by an LLM judge answering
Yes/No, or by a BERTScore F1 threshold.
"""
from typing import Dict, List, Optional, Union

import ir_measures
import numpy as np
import pandas as pd
import pyterrier as pt
from pyterrier_rag.backend import Backend

from ._util import validate_columns, warn_qids
from .bertscore import BertScore
from .cache import GenerationCache
from .errors import SettingError
from .fbert import Labels, relevant_docnos
from .reader import Reader

#: The judge's prompt; ``{query}``, ``{gold}`` (the gold-context answer) and ``{answer}``.
JUDGE_PROMPT = ('You are judging whether two answers to a question say the same thing.\n'
                'Question: {query}\nReference answer: {gold}\nCandidate answer: {answer}\n'
                'Does the candidate answer agree with the reference answer? Reply Yes or No.\nReply:')


class LLMRetEval(pt.Transformer):
    """Adds ``reteval`` (1: the retrieved-context answer matches a gold-context answer, else 0) and
    ``gold_qanswer`` to a reader's output.

    The gold context of a query is its judged relevant documents (``labels``), most relevant first
    (ties by docno), at most as many as the query has retrieved documents (or ``k``). The reader
    answers from it once per sample; the retrieved answer (sample 0 of the input) matches when any
    gold answer matches: by ``judge`` (a backend answering the :data:`JUDGE_PROMPT` — a reply
    starting with "yes" is a match), else by BERTScore F1 >= ``threshold``. Queries without a
    relevant document get NaN, warned.

    Args:
        reader: the reader whose answers are in ``qanswer``; it also answers from the gold context.
        qrels: ``qid``, ``docno``, ``label``.
        texts: docno -> text.
        labels: the gold labels (a minimum or a set).
        k: the gold context size (``None``: the query's number of retrieved documents).
        judge: a backend for the LLM judge (greedy decoding advised); answers are cached.
        bertscore: a :class:`~pyterrier_utility.BertScore` (or model name) for the threshold match.
        threshold: the BERTScore F1 at or above which two answers match.

    Example::

        reteval = LLMRetEval(reader, qrels, d.texts, bertscore='minilm', threshold=0.6)
        pt.Experiment([bm25 % 5 >> reader >> reteval], topics, qrels, [R@5, RetEval])
    """

    def __init__(self, reader: Reader, qrels: pd.DataFrame, texts: Dict[str, str], *, labels: Labels = 2,
                 k: Optional[int] = None, judge: Optional[Backend] = None,
                 bertscore: Union[None, str, BertScore] = None, threshold: float = 0.8,
                 judge_prompt: str = JUDGE_PROMPT):
        if judge is None and bertscore is None:
            raise SettingError('LLMRetEval: give a judge backend or a bertscore model to decide matches')
        validate_columns('LLMRetEval qrels', qrels, ['qid', 'docno', 'label'])
        self.reader = reader
        graded = qrels.astype({'qid': str, 'docno': str}).sort_values(['qid', 'label', 'docno'],
                                                                     ascending=[True, False, True])
        self.gold = relevant_docnos(graded, labels)
        self.texts = texts
        self.labels = labels
        self.k = k
        self.judge = None if judge is None else (judge if isinstance(judge, GenerationCache) else GenerationCache(judge))
        self.bertscore = BertScore(bertscore) if isinstance(bertscore, str) else bertscore
        self.threshold = threshold
        self.judge_prompt = judge_prompt

    def gold_answers(self, queries: pd.DataFrame, sizes: Dict[str, int]) -> Dict[str, List[str]]:
        """qid -> the reader's answers (one per sample) from the gold context."""
        prompts = {}
        for qid, query in zip(queries['qid'], queries['query']):
            docs = self.gold.get(str(qid), [])[:self.k or sizes.get(qid, 0)]
            if docs:
                prompts[qid] = self.reader.build_prompt(str(query), [str(self.texts.get(d, '')) for d in docs])
        distinct = list(dict.fromkeys(prompts.values()))
        answers = dict(zip(distinct, self.reader.answer(distinct)))
        return {qid: answers[p] for qid, p in prompts.items()}

    def matches(self, queries: List[str], answers: List[str], golds: List[List[str]]) -> np.ndarray:
        """1.0 where the answer matches any of its gold answers, else 0.0."""
        if self.judge is not None:
            prompts = [self.judge_prompt.format(query=q, gold=g, answer=a)
                       for q, a, gs in zip(queries, answers, golds) for g in gs]
            replies = iter(o.text for o in self.judge.generate(prompts, max_new_tokens=4))
            return np.array([float(any(next(replies).strip().lower().startswith('yes') for _ in gs))
                             for gs in golds])
        self.bertscore.embed(list(answers) + [g for gs in golds for g in gs])
        return np.array([float(self.bertscore.f1_matrix([a], gs).max() >= self.threshold)
                         for a, gs in zip(answers, golds)])

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query', 'qanswer'])
        first = inp[inp['sample'] == inp['sample'].min()] if 'sample' in inp.columns else inp
        queries = first.drop_duplicates('qid')[['qid', 'query', 'qanswer']]
        sizes = first.groupby('qid')['docno'].nunique().to_dict() if 'docno' in first.columns else {}
        gold = self.gold_answers(queries, sizes)
        warn_qids(f'LLM-retEval is NaN (no relevant document, {self.labels})', set(queries['qid']) - set(gold))
        known = queries[queries['qid'].isin(list(gold))]
        matched = self.matches(list(known['query'].astype(str)), list(known['qanswer'].astype(str)),
                               [gold[q] for q in known['qid']])
        score = dict(zip(known['qid'], matched))
        gold_first = {q: a[0] for q, a in gold.items()}
        return inp.assign(gold_qanswer=inp['qid'].map(gold_first),
                          reteval=inp['qid'].map(score).astype(float))

    def __repr__(self):
        how = 'judge' if self.judge is not None else f'BERTScore>={self.threshold}'
        return f'LLMRetEval({self.reader!r}, {how})'


def disagreement(frame: pd.DataFrame, qrels: pd.DataFrame, k: int, labels: Labels = 2) -> pd.DataFrame:
    """Per query: Recall@k of the retrieved documents against the gold documents, LLM-retEval, and
    whether they disagree — a retrieval that misses every gold document yet leads to the gold answer,
    or one that finds gold documents yet leads elsewhere (LLM-retEval's failure cases of Recall@k).

    Args:
        frame: :class:`LLMRetEval` output (``qid``, ``docno``, ``score``/``rank``, ``reteval``).
        qrels: the judgements; ``labels`` says which are gold.
        k: the Recall cutoff.
    """
    validate_columns('disagreement', frame, ['qid', 'docno', 'reteval'])
    gold = relevant_docnos(qrels.astype({'qid': str, 'docno': str}), labels)
    gold_qrels = pd.DataFrame([(q, d, 1) for q, docs in gold.items() for d in docs],
                              columns=['query_id', 'doc_id', 'relevance'])
    first = frame[frame['sample'] == frame['sample'].min()] if 'sample' in frame.columns else frame
    score = -first['rank'].astype(float) if 'rank' in first.columns else first['score']
    run = pd.DataFrame({'query_id': first['qid'].astype(str), 'doc_id': first['docno'].astype(str), 'score': score})
    recall = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.R @ k], gold_qrels, run)}
    out = first.drop_duplicates('qid')[['qid', 'reteval']].astype({'qid': str}).reset_index(drop=True)
    out.insert(1, f'R@{k}', out['qid'].map(recall).astype(float))
    hit = out[f'R@{k}'] > 0
    out['disagree'] = np.where(out['reteval'].isna() | out[f'R@{k}'].isna(), np.nan,
                               (hit != (out['reteval'] == 1)).astype(float))
    return out
