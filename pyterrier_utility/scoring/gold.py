"""Answer quality against a query's gold answers: exact match, token F1 and BERTScore.

For QA collections (pyterrier-rag's ``rag:`` datasets, ir_datasets' ``dpr-w100/natural-questions``)
P(a) can be measured against the gold answers instead of the relevant documents. EM and F1 use the
SQuAD normalisation (lower case, no punctuation, no articles, single spaces) and HotpotQA's token
F1, as pyterrier-rag's ``EM`` and ``F1`` measures; each takes the best gold answer.
"""
import re
import string
from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
import pyterrier as pt

from .._checks import check
from .._frames import validate_columns
from .._messages import warn_qids
from ..datasets.gold import GoldLike, gold_answers
from ..qualities import BERTSCORE_GOLD, EM, F1, Quality, ScoringInputs
from ..vocabulary import AGGREGATIONS, SUBMEASURES
from .bertscore import BertScore

#: The qualities :class:`GoldAnswerScorer` computes, by name: their descriptions register it as their scorer.
GOLD_QUALITIES = {quality.name: quality for quality in (EM, F1, BERTSCORE_GOLD)}
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, punctuation and the articles a/an/the removed, one space."""
    text = ''.join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return ' '.join(re.sub(r'\b(a|an|the)\b', ' ', text).split())


def exact_match(prediction: str, gold: str) -> float:
    """1.0 if the normalised answers are equal, else 0.0."""
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """F1 of the normalised tokens in common (HotpotQA's: a yes/no/noanswer mismatch is 0)."""
    pred, true = normalize_answer(prediction), normalize_answer(gold)
    if pred != true and (pred in ('yes', 'no', 'noanswer') or true in ('yes', 'no', 'noanswer')):
        return 0.0
    pred_tokens, true_tokens = pred.split(), true.split()
    same = sum((Counter(pred_tokens) & Counter(true_tokens)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(true_tokens)
    return 2 * precision * recall / (precision + recall)


def gold_answer_score(answer: str, gold: Union[str, Sequence[str]], metric: str = 'f1') -> float:
    """Exact match (``'em'``) or token F1 (``'f1'``) against the best of the gold answers (one or
    several); NaN for none."""
    golds = [gold] if isinstance(gold, str) else list(gold)
    if not golds:
        return float('nan')
    return max((exact_match if metric == 'em' else token_f1)(answer, g) for g in golds)


class GoldAnswerScorer(pt.Transformer):
    """Adds P(a) of each answer against its query's gold answers: exact match (``'em'``), token F1
    (``'f1'``), both the best over the gold answers as in pyterrier-rag, or BERTScore
    (``'bertscore-gold'``: ``submeasure`` aggregated over the gold answers by ``agg``, max F1 by
    default). Queries without a gold answer get NaN and one warning naming them; an empty answer
    scores 0 and is warned about.

    Args:
        answers: the gold answers (see :func:`gold_answers`): a frame such as pyterrier-rag's
            ``dataset.get_answers()`` or topics with ``answers``, or a mapping qid -> answers.
        quality: a name of :data:`GOLD_QUALITIES`: ``'em'``, ``'f1'`` or ``'bertscore-gold'``.
        model_type: for ``'bertscore-gold'``, the BERTScore model name or a shared
            :class:`~pyterrier_utility.BertScore`.
        submeasure, agg: for ``'bertscore-gold'``: ``'P'``, ``'R'`` or ``'F1'``; ``'max'`` or ``'mean'``.
        answer_column: the column holding answers.
        output_column: the column written (default: ``quality`` with ``_`` for ``-``).

    Example::

        scorer = GoldAnswerScorer({'1': ['Paris']}, quality='f1')
        scorer(pd.DataFrame({'qid': ['1'], 'qanswer': ['It is Paris.']}))   # f1 = 1.0
    """

    def __init__(self, answers: GoldLike, quality: str = 'em', *, model_type: Union[str, BertScore] = 'minilm',
                 submeasure: str = 'F1', agg: str = 'max', answer_column: str = 'qanswer',
                 output_column: Optional[str] = None):
        check(quality in GOLD_QUALITIES, 'GoldAnswerScorer', f'quality must be one of {list(GOLD_QUALITIES)}, '
                                                              f'got {quality!r}')
        bertscore = GOLD_QUALITIES[quality].needs_bertscore
        check(submeasure in SUBMEASURES and agg in AGGREGATIONS, 'GoldAnswerScorer',
              f'submeasure must be one of {list(SUBMEASURES)} and agg one of {list(AGGREGATIONS)}, '
              f'got {submeasure!r}, {agg!r}')
        check(bertscore or (submeasure, agg) == ('F1', 'max'), 'GoldAnswerScorer',
              f'submeasure and agg are those of BERTScore; {quality!r} takes the best gold answer')
        self.answers, self.model_type = answers, model_type
        self.gold = gold_answers(answers)
        self.quality, self.submeasure, self.agg = quality, submeasure, agg
        self.bertscore = None
        if bertscore:
            self.bertscore = model_type if isinstance(model_type, BertScore) else BertScore(model_type)
        self.answer_column = answer_column
        self.output_column = output_column or quality.replace('-', '_')

    @classmethod
    def for_quality(cls, quality: Quality, inputs: ScoringInputs) -> 'GoldAnswerScorer':
        """The scorer of ``quality`` (one of :data:`GOLD_QUALITIES`) from a study's inputs: against the
        dataset's gold answers, whatever the label set."""
        return cls(inputs.dataset.gold_answers(), quality.name, model_type=inputs.bertscore or 'minilm',
                   submeasure=inputs.submeasure, agg=inputs.agg)

    @property
    def measure(self) -> str:
        """The name of what it scores, in messages: ``EM``, ``F1``, ``BERTScore``, ``BERTScore(P, mean)``."""
        name = GOLD_QUALITIES[self.quality].measure
        return name if (self.submeasure, self.agg) == ('F1', 'max') else f'{name}({self.submeasure}, {self.agg})'

    #: What answers are scored against, in messages.
    references = 'gold answers'

    def score(self, qids: Sequence, answers: Sequence[str]) -> np.ndarray:
        """P of each (qid, answer) pair; NaN where the query has no gold answer."""
        return self.score_with_reference(qids, answers)[0]

    def score_with_reference(self, qids: Sequence, answers: Sequence[str]) -> Tuple[np.ndarray, List[Optional[str]]]:
        """P of each (qid, answer) pair, and ``None`` for each as the document that gave it: gold
        answers are not documents (the :class:`~pyterrier_utility.protocols.AnswerScorer` contract)."""
        qids = [str(q) for q in qids]
        answers = ['' if a is None or (isinstance(a, float) and np.isnan(a)) else str(a) for a in answers]
        warn_qids(f'{self.measure} is NaN (no gold answer)', {q for q in qids if q not in self.gold})
        warn_qids(f'empty answer scored {self.measure} 0', {q for q, a in zip(qids, answers)
                                                             if not a.strip() and q in self.gold})
        by_qid: Dict[str, Dict[str, None]] = {}
        for q, a in zip(qids, answers):
            if q in self.gold:
                by_qid.setdefault(q, {})[a] = None
        value: Dict[Tuple[str, str], float] = {}
        if self.bertscore is not None:
            self.bertscore.embed([a for distinct in by_qid.values() for a in distinct]
                                 + [g for q in by_qid for g in self.gold[q]])
            for q, distinct in by_qid.items():
                best = self.bertscore.best(list(distinct), self.gold[q], self.submeasure, self.agg)[0]
                value.update(((q, a), v) for a, v in zip(distinct, best))
        else:
            value = {(q, a): gold_answer_score(a, self.gold[q], self.quality)
                     for q, distinct in by_qid.items() for a in distinct}
        scores = np.array([value.get((q, a), np.nan) for q, a in zip(qids, answers)], dtype=float)
        return scores, [None] * len(qids)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', self.answer_column])
        return inp.assign(**{self.output_column: self.score(inp['qid'], inp[self.answer_column])})

    def __repr__(self):
        model = f', {self.bertscore.name!r}, submeasure={self.submeasure!r}, agg={self.agg!r}' if self.bertscore else ''
        return f'GoldAnswerScorer({self.quality!r}{model}, {len(self.gold)} queries)'


for _quality in GOLD_QUALITIES.values():
    _quality.register(GoldAnswerScorer)
