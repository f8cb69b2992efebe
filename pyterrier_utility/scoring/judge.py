"""Answer quality as an LLM judge's grade: each answer graded for its query, 1 to 10, against the
query's references (the relevant documents' texts or the gold answers), with pyterrier-rag 0.3's
pointwise ``LLMasJudge`` prompt (MT-Bench's single-answer grading prompt, Zheng et al., NeurIPS 2023)."""
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
from pyterrier_rag.backend import Backend

from .._messages import warn_qids
from ..datasets.texts import texts_of
from ..qualities import JUDGE_DOCS, JUDGE_GOLD, Quality, ScoringInputs
from ..verdict import Verdict

#: The grades a judge gives: MT-Bench's scale.
SCALE = (1, 10)
#: The judge's reply length: a grade and the brackets closing it.
JUDGE_TOKENS = 4
#: The judge's prompt: pyterrier-rag 0.3's ``PointwiseLLMJudgePrompt`` (``pyterrier_rag/frameworks/
#: llm_as_judge.py``, MT-Bench's single-answer grading prompt), with ``{query}``, ``{answer}`` and
#: ``{references}``. Two changes, both this project's: the references are shown as MT-Bench's
#: reference-guided prompt shows its reference answer, and the reply starts with the rating's format
#: (``Rating: [[``) in place of the explanation asked before it, so that a few tokens hold the grade and
#: a base model can give one.
JUDGE_PROMPT = (
    '[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response provided by an AI '
    'assistant to the user question displayed below. Your evaluation should consider factors such as the '
    'helpfulness, relevance, accuracy, depth, creativity, and level of detail of the response. You will be given '
    'reference texts and the assistant\'s answer: compare the answer with the references. Be as objective as '
    'possible. You must rate the response on a scale of 1 to 10 by strictly following this format: '
    '"[[rating]]", for example: "Rating: [[5]]".\n\n[Question]\n{query}\n\n[The Start of Reference]\n{references}\n'
    '[The End of Reference]\n\n[The Start of Assistant\'s Answer]\n{answer}\n[The End of Assistant\'s Answer]\n\n'
    'Rating: [[')

_RATING = re.compile(r'\[\[\s*(\d+(?:\.\d+)?)\s*\]\]')
_NUMBER = re.compile(r'\s*(\d+(?:\.\d+)?)\s*')


def parse_grade(reply: str) -> float:
    """The grade a reply to :data:`JUDGE_PROMPT` gives (the prompt ends with ``[[``): one ``N]]``, or the
    number alone where a stop cut the brackets, an integer of :data:`SCALE`; NaN for anything else (no
    number, two, one out of the scale, an empty reply), never a default grade.

    Example::

        parse_grade('7]]')           # 7.0
        parse_grade('7]] or [[8]]')  # nan
    """
    found = _RATING.findall('[[' + reply)
    if not found and _NUMBER.fullmatch(reply):
        found = [reply.strip()]
    if len(found) != 1:
        return float('nan')
    grade = float(found[0])
    return grade if grade.is_integer() and SCALE[0] <= grade <= SCALE[1] else float('nan')


class JudgeScorer:
    """P(a): an LLM judge's grade of each answer for its query, 1 to 10 (:data:`SCALE`), against the
    query's references, asked with :data:`JUDGE_PROMPT` and parsed by :func:`parse_grade`; an
    :class:`~pyterrier_utility.protocols.AnswerScorer`. Each distinct (query, answer) is asked once,
    greedily (:class:`~pyterrier_utility.verdict.Verdict`), through the generation cache: judging again
    generates nothing. A reply that gives no grade of the scale is NaN, with one warning naming its
    queries; so is a query without references.

    Args:
        backend: the judge: any backend of the Reader (a :class:`~pyterrier_utility.GenerationCache`
            keeps its replies in its file).
        queries: qid -> the query's text.
        references: qid -> the texts the answer is graded against.
        quality: the quality it computes: ``'judge-docs'`` (against the relevant documents) or
            ``'judge-gold'`` (against the gold answers).
        prompt: the judge's prompt, with ``{query}``, ``{references}`` and ``{answer}``; its reply is
            parsed by :func:`parse_grade`.

    Example::

        scorer = JudgeScorer(pyterrier_utility.backends.gemma3_270m(), {'1': 'what is lift?'},
                             {'1': ['Lift is the upward force on a wing.']})
        scorer.score_with_reference(['1'], ['the upward force on a wing'])[0]   # array([grade])
    """

    def __init__(self, backend: Backend, queries: Mapping[str, str], references: Mapping[str, Sequence[str]], *,
                 quality: str = JUDGE_DOCS.name, prompt: str = JUDGE_PROMPT):
        self.verdict = Verdict(backend, prompt, parse_grade, max_new_tokens=JUDGE_TOKENS, stop=('\n',), greedy=True,
                               owner='JudgeScorer')
        self.queries = {str(q): str(t) for q, t in queries.items()}
        self.texts = {str(q): [str(t) for t in texts] for q, texts in references.items() if len(texts)}
        self.quality = quality

    @classmethod
    def for_quality(cls, quality: Quality, inputs: ScoringInputs) -> 'JudgeScorer':
        """The judge of ``quality`` from a study's inputs: its judge, the dataset's queries and, as
        references, the texts of the relevant documents of ``inputs.labels`` or the gold answers."""
        topics = inputs.dataset.get_topics()
        queries = dict(zip(topics['qid'].astype(str), topics['query'].astype(str)))
        if quality.needs_gold:
            references: Mapping[str, Sequence[str]] = inputs.dataset.gold_answers()
        else:
            relevant = inputs.labels.relevant_docnos(inputs.qrels)
            texts = texts_of(inputs.dataset.texts, [d for docs in relevant.values() for d in docs])
            references = {q: [t for t in (texts.get(d) for d in docs) if isinstance(t, str) and t.strip()]
                          for q, docs in relevant.items()}
        return cls(inputs.judge, queries, references, quality=quality.name)

    @property
    def measure(self) -> str:
        """The name of what it scores, in messages."""
        return (JUDGE_GOLD if self.quality == JUDGE_GOLD.name else JUDGE_DOCS).measure

    @property
    def references(self) -> str:
        """What answers are graded against, in messages."""
        return 'gold answers' if self.quality == JUDGE_GOLD.name else 'relevant documents'

    def score_with_reference(self, qids: Sequence, answers: Sequence[str]) -> Tuple[np.ndarray, List[Optional[str]]]:
        """The judge's grade of each (qid, answer) pair, and ``None`` for each as its reference document."""
        qids = [str(q) for q in qids]
        answers = ['' if a is None or (isinstance(a, float) and np.isnan(a)) else str(a) for a in answers]
        warn_qids(f'{self.measure} is NaN (no references)', {q for q in qids if q not in self.texts})
        distinct = list(dict.fromkeys((q, a) for q, a in zip(qids, answers) if q in self.texts))
        items = [dict(query=self.queries.get(q, ''), answer=a, references='\n'.join(self.texts[q]))
                 for q, a in distinct]
        grades: Dict[Tuple[str, str], float] = dict(zip(distinct, self.verdict.ask(items)))
        warn_qids(f'the judge gave no grade of {SCALE[0]} to {SCALE[1]}: {self.measure} is NaN',
                  {q for (q, _), g in grades.items() if np.isnan(g)})
        return np.array([grades.get((q, a), np.nan) for q, a in zip(qids, answers)], dtype=float), [None] * len(qids)


JUDGE_DOCS.register(JudgeScorer)
JUDGE_GOLD.register(JudgeScorer)
