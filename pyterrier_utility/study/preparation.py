"""What every command prepares from its config, written once: the collections (:mod:`.collection`), the
readers behind the folder's generation cache (:mod:`.readers`), the settings record and its announcement
(:mod:`.record`), the scorer of P under each label set (:mod:`.scorers`), and the systems (:mod:`.systems`).

``study``, ``experiment`` and ``attribute`` start from :func:`prepare`; ``predict`` and ``report``
read a finished folder and take only the parts they need.

Example::

    from pyterrier_utility.study import StudyConfig, preparation
    config = StudyConfig(queries=2, ks=(1,), samples=1, out='results/small')
    prepared = preparation.prepare(config, 'study')
    collection = prepared.collections['cranfield']
    systems = prepared.systems(collection, prepared.readers['gemma3-270m'])
    scorer = prepared.scorer_for(collection)(config.label_sets[0])
"""
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import pyterrier as pt

from ..cache import GenerationCache
from ..qualities import quality_of
from ..reader import Reader
from ..schema import GENERATIONS_FILE
from ..scoring.bertscore import BertScore
from ..settings import Placement
from .collection import Collection, load_collection
from .config import StudyConfig
from .output import check_out
from .readers import build_reader
from .record import print_settings
from .scorers import ScorerFactory, load_scorer, scorer_factory
from .systems import build_systems


@dataclass
class Prepared:
    """What a running command starts from (:func:`prepare`).

    Attributes:
        config: the command's config.
        collections: each dataset of the config, by name.
        readers: each reader of the config, by name, behind the folder's generation cache.
        record: what ``settings.json`` holds (:func:`~.record.print_settings`'s, with ``studied_as`` for a
            collection studied under other label sets or systems).
        bertscore: the BERTScore model P is computed with (``None`` where the quality needs none).
        judge: the judge P is graded by (``None`` where the quality needs none): the backend of the
            config's ``judge_reader`` behind the folder's generation cache (a reader's own where it is one).
    """
    config: StudyConfig
    collections: Dict[str, Collection]
    readers: Dict[str, Reader]
    record: dict
    bertscore: Optional[BertScore]
    judge: Optional[GenerationCache] = None

    def scorer_for(self, collection: Collection) -> ScorerFactory:
        """The scorer of P under each label set for ``collection`` (:func:`~.scorers.scorer_factory`)."""
        return scorer_factory(collection.config, collection.dataset, collection.qrels, self.bertscore, self.judge)

    def systems(self, collection: Collection, reader: Reader) -> Dict[str, pt.Transformer]:
        """The systems of ``collection``'s config (:func:`~.systems.build_systems`)."""
        return build_systems(collection.config, collection.name, collection.dataset, collection.qrels,
                             collection.topics, reader)


def prepare(config: StudyConfig, command: str, argv: Optional[list] = None,
            placement: Placement = Placement()) -> Prepared:
    """Everything ``command`` runs from ``config``: its folder checked, the collections loaded, the
    BERTScore model, the readers (where ``placement`` says: :func:`~.readers.build_reader`) and the judge
    where the quality needs one, the settings announced and recorded."""
    out = Path(config.out)
    check_out(out)
    if config.nuggets is not None:  # a faulty nugget file is refused before anything is loaded
        from ..scoring.nuggets import read_nuggets
        read_nuggets(config.nuggets)
    collections = {name: load_collection(name, config) for name in config.datasets}
    bertscore = load_scorer(config.scorer) if config.bertscore_needed else None
    readers = {r: build_reader(config, r, out / GENERATIONS_FILE, placement) for r in config.readers}
    judge = None
    if quality_of(config.quality).needs_judge:
        name = config.judge_reader
        judge = (readers[name] if name in readers else build_reader(config, name, out / GENERATIONS_FILE,
                                                                    placement)).cache
    record = print_settings(command, config, readers, out, argv)
    record['studied_as'] = {name: {'label_sets': [str(x) for x in c.config.label_sets],
                                   'systems': list(c.config.systems)}
                            for name, c in collections.items() if c.config != config}
    return Prepared(config, collections, readers, record, bertscore, judge)
