"""A dataset as a command studies it: its qrels, and its topics answerable under the config's label sets.

Example::

    from pyterrier_utility.study import StudyConfig
    from pyterrier_utility.study.collection import load_collection
    collection = load_collection('cranfield', StudyConfig(queries=2))
    collection.topics  # two queries with a document of label 2 or more
"""
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .._messages import inform
from ..datasets import get_dataset
from ..errors import SettingError
from ..qualities import quality_of
from .config import StudyConfig


@dataclass
class Collection:
    """A dataset as a command studies it.

    Attributes:
        name: its name as the config gives it.
        dataset: the dataset (texts, qrels, topics, gold answers).
        qrels: its qrels.
        topics: the queries answerable under at least one label set (``--queries`` of them).
        config: the config it is studied under (:meth:`StudyConfig.for_collection`).
    """
    name: str
    dataset: Any
    qrels: pd.DataFrame
    topics: pd.DataFrame
    config: StudyConfig


def load_collection(name: str, config: StudyConfig) -> Collection:
    """The dataset ``name``: its qrels, its topics answerable under at least one label set (narrower
    sets give NaN for the others) and, for a gold-answer quality, with a gold answer, and the config
    it is studied under (:meth:`StudyConfig.for_collection`: a collection judged in two grades gets the
    label set {1} and no oracles, said on the console). A label set that no document has, or that
    leaves out the collection's top grade or labels the Rel oracle draws from, is refused: P would
    silently ignore documents that Rel gives the reader."""
    dataset = get_dataset(name)
    qrels = dataset.get_qrels()
    present = sorted(qrels['label'].unique().tolist())
    config, note = config.for_collection(name, present)
    if note:
        inform(note)
    rel_drawn = [x for x in present if config.rel_labels.contains(pd.Series([x])).iloc[0]]
    oracle = [('Rel labels', config.rel_labels)] if 'Rel' in config.systems else []
    for option, labels in [('label set', x) for x in config.label_sets] + oracle:
        if not labels.relevant_docnos(qrels):
            raise SettingError(f'{option} {labels}: no document of {name} has such a label (its labels are {present})')
    for labels in config.label_sets:
        dropped = [x for x in labels.excluded(present) if x == max(present) or x in rel_drawn]
        if dropped:
            raise SettingError(f'label set {labels} leaves out label {dropped} of {name} (its labels are {present}; '
                               f'Rel draws from {config.rel_labels}): the references of P would miss documents '
                               'that are more relevant than those counted. Give a minimum (e.g. 2) or include them')
    answerable = set()
    for labels in config.label_sets:
        answerable |= set(labels.relevant_docnos(qrels))
    if quality_of(config.quality).needs_gold:
        answerable &= set(dataset.gold_answers())
    topics = dataset.get_topics()
    topics = topics[topics['qid'].astype(str).isin(answerable)].reset_index(drop=True)
    if config.queries:
        topics = topics.head(config.queries)
    return Collection(name, dataset, qrels, topics, config)
