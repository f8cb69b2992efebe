"""The scorer of P a study computes utility with, by its quality's description
(:mod:`~pyterrier_utility.qualities`): a scorer per label set for a quality against the relevant
documents (the paper's FBERT), one for every label set otherwise (against the gold answers).

Example::

    from pyterrier_utility import LabelSet, get_dataset
    from pyterrier_utility.study import StudyConfig
    from pyterrier_utility.study.scorers import scorer_factory
    dataset = get_dataset('cranfield')
    scorer = scorer_factory(StudyConfig(), dataset, dataset.get_qrels(), None)(LabelSet(minimum=2))
"""
from typing import Any, Callable, Optional

import pandas as pd

from ..errors import SettingError
from ..protocols import AnswerScorer
from ..qualities import ScoringInputs, quality_of
from ..scoring import fbert as _fbert, gold as _gold, judge as _judge  # noqa: F401  (scorers register when imported)
from ..scoring.bertscore import BertScore
from ..settings import LabelSet
from .config import StudyConfig


def scorer_factory(config: StudyConfig, dataset, qrels: pd.DataFrame, bertscore: Optional[BertScore],
                   judge: Optional[Any] = None) -> Callable[[LabelSet], AnswerScorer]:
    """The scorer of P under each label set, by ``config.quality``'s description: built for each label
    set where it needs the relevant documents, else built once for every label set; ``judge``: the
    judge's backend, for a quality graded by one."""
    quality = quality_of(config.quality)

    def build(labels: Optional[LabelSet]) -> AnswerScorer:
        model = (bertscore or config.scorer) if quality.needs_bertscore else None
        return quality.build(ScoringInputs(dataset, qrels, labels, model, config.submeasure, config.agg, judge))
    if quality.needs_documents:
        return build
    one = build(None)
    return lambda labels: one


def load_scorer(name: str) -> BertScore:
    """The BERTScore model ``name``, or a :class:`SettingError` naming it and why it cannot be loaded."""
    try:
        return BertScore(name, verbose=True)
    except Exception as e:  # any loading failure: the message says which model and why
        raise SettingError(f'--scorer {name!r} cannot be loaded ({type(e).__name__}: {e})') from None
