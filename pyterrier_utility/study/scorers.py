"""The scorer of P a study computes utility with, by its quality: FBERT against the documents of a
label set, or BERTScore against the gold answers.

Example::

    from pyterrier_utility import LabelSet, get_dataset
    from pyterrier_utility.study import StudyConfig
    from pyterrier_utility.study.scorers import scorer_factory
    dataset = get_dataset('cranfield')
    scorer = scorer_factory(StudyConfig(), dataset, dataset.get_qrels(), None)(LabelSet(minimum=2))
"""
from typing import Callable, Optional

import pandas as pd

from ..errors import SettingError
from ..protocols import AnswerScorer
from ..scoring.bertscore import BertScore
from ..scoring.fbert import FBertScorer
from ..scoring.gold import GoldAnswerScorer
from ..settings import LabelSet
from .config import StudyConfig


def scorer_factory(config: StudyConfig, dataset, qrels: pd.DataFrame,
                   bertscore: Optional[BertScore]) -> Callable[[LabelSet], AnswerScorer]:
    """The scorer of P under each label set, by ``config.quality``: FBERT against the documents of
    that label set, or one scorer against the gold answers whatever the label set."""
    if config.quality == 'fbert-docs':
        return lambda labels: FBertScorer(qrels, dataset.texts, labels=labels, model_type=bertscore or config.scorer,
                                          submeasure=config.submeasure, agg=config.agg)
    gold = GoldAnswerScorer(dataset.gold_answers(), config.quality, model_type=bertscore or config.scorer,
                            submeasure=config.submeasure, agg=config.agg)
    return lambda labels: gold


def load_scorer(name: str) -> BertScore:
    """The BERTScore model ``name``, or a :class:`SettingError` naming it and why it cannot be loaded."""
    try:
        return BertScore(name, verbose=True)
    except Exception as e:  # any loading failure: the message says which model and why
        raise SettingError(f'--scorer {name!r} cannot be loaded ({type(e).__name__}: {e})') from None
