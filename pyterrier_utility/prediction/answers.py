"""Signals of the reader about its own answers: the mean log-probability of its tokens."""
import pandas as pd

from ._base import QueryPredictor


class AnswerConfidence(QueryPredictor):
    """The reader's confidence in its answers to a query: the mean over the query's answers (its
    samples) of each answer's mean token log-probability (the Reader's ``mean_logprob``); adds
    ``answer_confidence``. Tian, Ganguly & Macdonald (ECIR 2026) average the tokens' probabilities
    instead; a log-probability keeps the order of the geometric mean probability.

    Args:
        column: the column added (e.g. ``'confidence_0shot'`` for the answers without context).

    Example::

        pipeline = bm25 % 3 >> reader >> pu.prediction.AnswerConfidence()
    """
    needs = ('qid', 'qanswer', 'mean_logprob')
    undefined = 'the reader gave no log-probability'

    def __init__(self, column: str = 'answer_confidence'):
        self.column = column

    def predict(self, ranking: pd.DataFrame) -> float:
        return float(ranking['mean_logprob'].astype(float).mean())
