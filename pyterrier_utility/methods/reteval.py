"""LLM-retEval: does the answer from the retrieved documents match the answers from the gold documents?

Following "Evaluating the Retrieval Component in LLM-Based Question Answering Systems" (2024): a
retriever scores 1 on a query when the reader's answer from the retrieved top-k is judged correct
against the reader's answers from the gold (judged relevant) documents, else 0. As in the paper, the
gold-context answers are sampled several times (3, at temperature 0.5) so that questions with more
than one correct answer are covered, and a judge sees the question, the candidate and all gold
answers together. The match is decided by an LLM judge replying Yes/No, or, as this project's
offline alternative, by a BERTScore F1 threshold.
"""
from typing import Callable, Dict, List, Optional, Sequence, Union

import ir_measures
import numpy as np
import pandas as pd
import pyterrier as pt
from pyterrier_rag.backend import Backend

from .._checks import check, check_int, check_number
from .._frames import normalise_frame, validate_columns
from .._messages import warn_qids
from ..cache import GenerationCache
from ..errors import SettingError
from ..protocols import DecodingBackend
from ..reader import Reader
from ..scoring.bertscore import BertScore
from ..scoring.correlation import correlation
from ..settings import LabelSet, LabelsLike
from ..verdict import Verdict, starts_with_yes

#: The judge's reply length: Yes or No.
JUDGE_TOKENS = 4
#: The judge's prompt: ``{query}``, ``{golds}`` (the gold-context answers, one per line) and
#: ``{answer}``. Modelled on the GPT-Eval setup the paper adopts: all reference answers at once, a
#: Yes/No verdict.
JUDGE_PROMPT = ('You are grading an answer to a question. Several reference answers are given, each '
                'written from documents known to answer the question; a question can have more than '
                'one correct answer.\nQuestion: {query}\nReference answers:\n{golds}\n'
                'Candidate answer: {answer}\nIs the candidate answer correct according to the question '
                'and the reference answers? Reply Yes or No.\nReply:')
#: The BERTScore F1 at or above which two answers match, calibrated for the offline model (MiniLM-L6)
#: on 30 hand-made pairs (``tests/test_reteval.py``): 28 right at 0.65, the best threshold; the two
#: errors are antonyms (rises / falls, Pacific / Atlantic), which token matching cannot tell apart.
MINILM_MATCH_THRESHOLD = 0.65


def gold_reader_for(reader: Reader, samples: int = 3, temperature: float = 0.5) -> Reader:
    """The reader of the gold-context answers: the same model, prompts and stop sequences, sampling
    ``samples`` answers at ``temperature`` (the paper: 3 at 0.5), cached next to the reader's."""
    backend = reader.cache.backend
    if not isinstance(backend, DecodingBackend):
        raise SettingError(f'LLMRetEval: {backend!r} cannot change its temperature for the gold-context answers; '
                           'give gold_reader= (a Reader sampling them as you want)')
    cache = GenerationCache(backend.with_settings(temperature=temperature), reader.cache.path)
    return Reader(cache, n_samples=samples, seed=reader.seed, max_new_tokens=reader.max_new_tokens, stop=reader.stop,
                  prompt_format=reader.prompt_format, prompt=reader.prompt, zero_shot_prompt=reader.zero_shot_prompt,
                  context_format=reader.context_format, max_prompt_tokens=reader.prompter.max_prompt_tokens,
                  verbose=reader.verbose)


def retrieved_answers(frame: pd.DataFrame) -> Dict[str, List[str]]:
    """qid -> the answers of each sample, from a reader's output (rows per ``sample``) or an
    evaluator's (``qanswers`` tuples), or the single ``qanswer``."""
    if 'qanswers' in frame.columns:
        firsts = frame.drop_duplicates('qid')
        return {q: [str(a) for a in (t if isinstance(t, tuple) else (s,))]
                for q, t, s in zip(firsts['qid'], firsts['qanswers'], firsts['qanswer'])}
    if 'sample' in frame.columns:
        rows = frame.sort_values('sample', kind='stable').drop_duplicates(['qid', 'sample'])
        return {q: [str(a) for a in g['qanswer']] for q, g in rows.groupby('qid', sort=False)}
    firsts = frame.drop_duplicates('qid')
    return {q: [str(a)] for q, a in zip(firsts['qid'], firsts['qanswer'])}


class LLMRetEval(pt.Transformer):
    """Adds ``reteval`` (the share of the retrieved-context answers judged correct against the
    gold-context answers: 1 or 0 with one sample), ``gold_qanswer`` (the first gold-context answer)
    and ``gold_qanswers`` (all of them) to a reader's output.

    The gold context of a query is its judged relevant documents (``labels``), most relevant first
    (ties by docno), as many as the query's retrieved documents (or ``k``; at least one). The gold
    reader answers from it ``gold_samples`` times at ``gold_temperature`` (the paper: 3 at 0.5),
    independently of the retrieved-context answer. Each retrieved-context answer (every sample:
    ``qanswers`` of :class:`~pyterrier_utility.UtilityEvaluator`, or the reader's ``sample`` rows) is
    judged against all gold answers at once: by ``judge`` (a backend answering :data:`JUDGE_PROMPT`;
    a reply starting with "yes" is a match), else by BERTScore F1 >= ``threshold`` against any gold
    answer. With several samples ``reteval`` is their mean (this project's extension; the paper draws
    one). Queries without a relevant document get NaN, warned.

    Args:
        reader: the reader whose answers are in ``qanswer``.
        qrels: ``qid``, ``docno``, ``label``.
        texts: docno -> text.
        labels: the gold labels (a minimum or a set).
        k: the gold context size (``None``: the query's number of retrieved documents).
        judge: a backend for the LLM judge (greedy decoding advised); answers are cached.
        bertscore: a :class:`~pyterrier_utility.BertScore` (or model name) for the threshold match.
        threshold: the BERTScore F1 at or above which two answers match (default: calibrated for MiniLM).
        gold_reader: the reader of the gold-context answers (default: the reader's model at
            ``gold_temperature``, ``gold_samples`` samples).
        gold_samples, gold_temperature: the default gold reader's sampling.

    Example::

        reteval = LLMRetEval(reader, qrels, d.texts, bertscore='minilm')
        pt.Experiment([bm25 % 5 >> reader >> reteval], topics, qrels, [R@5, RetEval])
    """

    def __init__(self, reader: Reader, qrels: pd.DataFrame, texts: Dict[str, str], *, labels: LabelsLike = 2,
                 k: Optional[int] = None, judge: Optional[Backend] = None,
                 bertscore: Union[None, str, BertScore] = None, threshold: float = MINILM_MATCH_THRESHOLD,
                 judge_prompt: str = JUDGE_PROMPT, gold_reader: Optional[Reader] = None, gold_samples: int = 3,
                 gold_temperature: float = 0.5):
        if not isinstance(reader, Reader):
            raise SettingError(f'LLMRetEval: reader must be a pyterrier_utility.Reader, got {reader!r}')
        if judge is None and bertscore is None:
            raise SettingError('LLMRetEval: give a judge backend or a bertscore model to decide matches')
        check(judge is None or isinstance(judge, Backend), 'LLMRetEval',
              f'judge must be a pyterrier-rag Backend or None, got {judge!r}')
        check(bertscore is None or isinstance(bertscore, (str, BertScore)), 'LLMRetEval',
              f'bertscore must be a model name, a BertScore or None, got {bertscore!r}')
        check_number('LLMRetEval', 'threshold', threshold, -1)
        check_int('LLMRetEval', 'gold_samples', gold_samples, 1)
        check_number('LLMRetEval', 'gold_temperature', gold_temperature, 0)
        check(isinstance(qrels, pd.DataFrame), 'LLMRetEval', f'qrels must be a DataFrame, got {type(qrels).__name__}')
        validate_columns('LLMRetEval qrels', qrels, ['qid', 'docno', 'label'])
        if k is not None:
            check_int('LLMRetEval', 'k', k, 1)
        check(all(f in judge_prompt for f in ('{query}', '{golds}', '{answer}')), 'LLMRetEval',
              'judge_prompt must contain {query}, {golds} and {answer}')
        self.reader = reader
        self.qrels = qrels
        self.gold_samples, self.gold_temperature = gold_samples, gold_temperature
        self.labels = LabelSet.parse(labels)
        graded = normalise_frame('LLMRetEval qrels', qrels).sort_values(['qid', 'label', 'docno'],
                                                                        ascending=[True, False, True])
        self.gold = self.labels.relevant_docnos(graded)
        self.texts = texts
        self.k = k
        # A reply is Yes or No, decoded as the judge's backend decodes.
        self.judge = None if judge is None else Verdict(judge, judge_prompt, starts_with_yes,
                                                        max_new_tokens=JUDGE_TOKENS, owner='LLMRetEval')
        self.bertscore = BertScore(bertscore) if isinstance(bertscore, str) else bertscore
        self.threshold = threshold
        self.judge_prompt = judge_prompt
        self.gold_reader = gold_reader or gold_reader_for(reader, gold_samples, gold_temperature)

    def gold_answers(self, queries: pd.DataFrame, sizes: Dict[str, int]) -> Dict[str, List[str]]:
        """qid -> the gold reader's answers (one per sample) from the gold context."""
        contexts = []
        for qid, query in zip(queries['qid'], queries['query']):
            docs = self.gold.get(str(qid), [])[:self.k or max(1, sizes.get(qid, 0))]
            if docs:
                contexts.append((qid, str(query), [str(self.texts.get(d, '')) for d in docs]))
        prompts = self.gold_reader.prompter.fitted_prompts(contexts)
        distinct = list(dict.fromkeys(prompts))
        answers = dict(zip(distinct, ([a.text for a in row] for row in self.gold_reader.answer(distinct))))
        return {qid: answers[p] for (qid, _, _), p in zip(contexts, prompts)}

    def matches(self, queries: Sequence[str], answers: Sequence[str], golds: Sequence[Sequence[str]]) -> np.ndarray:
        """1.0 where the answer is judged to match its gold answers, else 0.0: one judgement per answer,
        with all its gold answers together."""
        if self.judge is not None:
            return np.array(self.judge.ask([dict(query=q, answer=a, golds='\n'.join(f'- {g}' for g in gs))
                                            for q, a, gs in zip(queries, answers, golds)]), dtype=float)
        assert self.bertscore is not None  # without a judge: checked when made
        self.bertscore.embed(list(answers) + [g for gs in golds for g in gs])
        return np.array([float(self.bertscore.f1_matrix([a], list(gs)).max() >= self.threshold)
                         for a, gs in zip(answers, golds)])

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query', 'qanswer'])
        inp = normalise_frame(repr(self), inp, missing_docno_ok=True)
        first = inp[inp['sample'] == inp['sample'].min()] if 'sample' in inp.columns else inp
        queries = first.drop_duplicates('qid')[['qid', 'query']]
        sizes = first.groupby('qid')['docno'].nunique().to_dict() if 'docno' in first.columns else {}
        gold = self.gold_answers(queries, sizes)
        warn_qids(f'LLM-retEval is NaN (no relevant document, {self.labels})', set(queries['qid']) - set(gold))
        retrieved = retrieved_answers(inp)
        judged = [(qid, str(query), answer) for qid, query in zip(queries['qid'], queries['query']) if qid in gold
                  for answer in retrieved[qid]]
        matched = self.matches([q for _, q, _ in judged], [a for _, _, a in judged],
                               [gold[qid] for qid, _, _ in judged])
        score = pd.Series(matched, index=[qid for qid, _, _ in judged], dtype=float).groupby(level=0).mean()
        return inp.assign(gold_qanswer=inp['qid'].map({q: a[0] for q, a in gold.items()}),
                          gold_qanswers=inp['qid'].map({q: tuple(a) for q, a in gold.items()}),
                          reteval=inp['qid'].map(score).astype(float))

    def __repr__(self):
        how = 'judge' if self.judge is not None else f'BERTScore>={self.threshold}'
        return f'LLMRetEval({self.reader!r}, {how}, gold {self.gold_reader.n_samples} samples)'


def failure_cases(frame: pd.DataFrame, qrels: pd.DataFrame, k: int, labels: LabelsLike = 2,
                  correct: Optional[Callable[[str, str], bool]] = None) -> pd.DataFrame:
    """Per query: Recall@k, LLM-retEval, and the failure cases of the LLM-retEval paper, each measure
    judged against whether the answer from the retrieved documents is correct.

    Recall@k fails where it credits a wrong answer or misses a right one; LLM-retEval fails where its
    verdict differs from the answer's correctness. Both can fail on the same query. The cases:

    - ``recall_case`` ``'A/B'``: no gold document retrieved, yet the answer is right (A: an unlabelled
      document answers; B: the labelled one is another version of a retrieved one);
    - ``recall_case`` ``'C'``: a gold document retrieved, yet the answer is wrong (distractors);
    - ``reteval_case`` ``'D'``: the gold-context answers are wrong (a right answer judged no match
      when none of them is right, or a wrong answer judged a match when not all of them are right);
    - ``reteval_case`` ``'E/F'``: a right answer judged no match although a gold-context answer is
      right (E: they miss this correct answer; F: the comparison erred);
    - ``reteval_case`` ``'F'``: a wrong answer judged a match although every gold-context answer is right.

    Columns: ``qid``, ``R@k`` (against the gold documents), ``reteval``, ``disagree`` (1 where
    Recall@k > 0 and LLM-retEval's match differ), ``correct`` (the share of the retrieved-context
    answers that are correct), ``gold_correct`` (the share of the gold-context answers that are),
    ``recall_case``, ``reteval_case``. A query matches when ``reteval`` >= 0.5 and its answer is right
    when ``correct`` >= 0.5 (a majority of samples). Without ``correct`` only ``disagree`` is known and
    the cases are None; queries without a gold document or a ``reteval`` get none either.

    Args:
        frame: :class:`LLMRetEval` output (``qid``, ``docno``, ``score``/``rank``, ``reteval``,
            ``qanswer``, ``gold_qanswers``).
        qrels: the judgements; ``labels`` says which are gold.
        k: the Recall cutoff.
        correct: qid, answer -> whether the answer is correct (e.g. exact match against a dataset's
            gold answers: the paper's GPT-Eval).

    Example::

        table = failure_cases(reteval(bm25 % 5 >> reader)(topics), qrels, 5, correct=exact_match)
        table['recall_case'].notna().sum(), table['reteval_case'].notna().sum()  # the paper's Table 1
    """
    validate_columns('failure_cases', frame,
                     ['qid', 'docno', 'reteval'] + (['qanswer', 'gold_qanswers'] if correct else []))
    frame = normalise_frame('failure_cases', frame, missing_docno_ok=True)
    gold = LabelSet.parse(labels).relevant_docnos(normalise_frame('failure_cases qrels', qrels))
    gold_qrels = pd.DataFrame([(q, d, 1) for q, docs in gold.items() for d in docs],
                              columns=['query_id', 'doc_id', 'relevance'])
    first = frame[frame['sample'] == frame['sample'].min()] if 'sample' in frame.columns else frame
    ranked = first[first['docno'].notna()]
    score = -ranked['rank'].astype(float) if 'rank' in ranked.columns else ranked['score']
    run = pd.DataFrame({'query_id': ranked['qid'], 'doc_id': ranked['docno'], 'score': score})
    recall = {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.R @ k], gold_qrels, run)}
    out = first.drop_duplicates('qid').reset_index(drop=True)
    table = out[['qid', 'reteval']].copy()
    table.insert(1, f'R@{k}', [recall.get(q, 0.0 if q in gold else np.nan) for q in table['qid']])
    known = table['reteval'].notna() & table[f'R@{k}'].notna()
    hit, matched = table[f'R@{k}'] > 0, table['reteval'] >= 0.5
    table['disagree'] = np.where(known, (hit != matched).astype(float), np.nan)
    if correct is None:
        table['correct'] = table['gold_correct'] = np.nan
        table['recall_case'] = table['reteval_case'] = None
        return table
    answers = retrieved_answers(frame)
    table['correct'] = [float(np.mean([bool(correct(q, a)) for a in answers[q]])) for q in table['qid']]
    table['gold_correct'] = [float(np.mean([bool(correct(q, str(g))) for g in golds]))
                             if isinstance(golds, tuple) and golds else np.nan
                             for q, golds in zip(out['qid'], out['gold_qanswers'])]
    right = table['correct'] >= 0.5
    # None: no case (numpy's stubs take no None, numpy does)
    table['recall_case'] = np.where(known & hit & ~right, 'C',
                                    np.where(known & ~hit & right, 'A/B', None))  # type: ignore[call-overload]
    wrong_match = np.where(table['gold_correct'] == 1, 'F', 'D')
    missed_right = np.where(table['gold_correct'] > 0, 'E/F', 'D')
    table['reteval_case'] = np.where(known & matched & ~right, wrong_match,
                                     np.where(known & ~matched & right, missed_right, None))  # type: ignore[call-overload]
    return table


def recall_correlation(table: pd.DataFrame) -> Dict[str, float]:
    """Spearman's rho between Recall@k and LLM-retEval over queries, as the paper's Table 2: on all
    queries, and on those where Recall@k does not fail (``refined``: no ``recall_case``; needs
    :func:`failure_cases` with ``correct=``, else NaN)."""
    recall = next(c for c in table.columns if c.startswith('R@'))
    rho, p = correlation(table[recall], table['reteval'], 'spearman')
    refined = table[table['correct'].notna() & table['recall_case'].isna()]
    rho_r, p_r = correlation(refined[recall], refined['reteval'], 'spearman')
    return {'all': rho, 'all_p': p, 'all_n': int(table[[recall, 'reteval']].notna().all(axis=1).sum()),
            'refined': rho_r, 'refined_p': p_r,
            'refined_n': int(refined[[recall, 'reteval']].notna().all(axis=1).sum())}
