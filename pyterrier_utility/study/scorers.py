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
from typing import Any, Dict, Optional, Tuple

import pandas as pd

from ..errors import SettingError
from ..protocols import AnswerScorer
from ..qualities import ScoringInputs, quality_of
from ..scoring import fbert as _fbert, gold as _gold, judge as _judge, nuggets as _nuggets  # noqa: F401
from ..scoring.bertscore import BertScore
from ..settings import LabelSet
from .config import StudyConfig


class ScorerFactory:
    """The scorer of P under each label set, by ``config.quality``'s description: built once per label
    set where it needs the relevant documents, else once for every label set; ``judge``: the judge's
    backend, for a quality graded by one. :attr:`built` holds the scorers made, so that what a scorer
    found besides P (a nugget scorer's nuggets and assignments: :meth:`nugget_frames`) reaches the study's
    folder."""

    def __init__(self, config: StudyConfig, dataset, qrels: pd.DataFrame, bertscore: Optional[BertScore],
                 judge: Optional[Any] = None):
        self.config, self.dataset, self.qrels, self.bertscore, self.judge = config, dataset, qrels, bertscore, judge
        self.quality = quality_of(config.quality)
        self.built: Dict[Optional[LabelSet], AnswerScorer] = {}

    def __call__(self, labels: Optional[LabelSet]) -> AnswerScorer:
        key = labels if self.quality.needs_documents else None
        if key not in self.built:
            config = self.config
            model = (self.bertscore or config.scorer) if self.quality.needs_bertscore else None
            self.built[key] = self.quality.build(ScoringInputs(self.dataset, self.qrels, key, model, config.submeasure,
                                                               config.agg, self.judge, config.nuggets))
        return self.built[key]

    def nugget_frames(self) -> Optional[Tuple[pd.DataFrame, pd.DataFrame]]:
        """The nuggets and assignments of every label set's scorer
        (:meth:`~pyterrier_utility.scoring.nuggets.NuggetScorer.frames`), or ``None`` for a quality without
        nuggets."""
        found = [scorer.frames() for scorer in self.built.values() if hasattr(scorer, 'frames')]
        if not found:
            return None
        return tuple(pd.concat([f[i] for f in found], ignore_index=True) for i in (0, 1))  # type: ignore[return-value]


def scorer_factory(config: StudyConfig, dataset, qrels: pd.DataFrame, bertscore: Optional[BertScore],
                   judge: Optional[Any] = None) -> ScorerFactory:
    """The scorer of P under each label set (:class:`ScorerFactory`)."""
    factory = ScorerFactory(config, dataset, qrels, bertscore, judge)
    if not factory.quality.needs_documents:
        factory(None)  # one scorer for every label set, built (and failing, if it fails) before any answer
    return factory


def load_scorer(name: str) -> BertScore:
    """The BERTScore model ``name``, or a :class:`SettingError` naming it and why it cannot be loaded."""
    try:
        return BertScore(name, verbose=True)
    except Exception as e:  # any loading failure: the message says which model and why
        raise SettingError(f'--scorer {name!r} cannot be loaded ({type(e).__name__}: {e})') from None
