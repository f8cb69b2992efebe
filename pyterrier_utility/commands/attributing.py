"""The ``attribute`` command: each context document's share of U, for the systems and ks of a
study's config, into the study's folder.

It builds what the study builds (the collection, the reader behind the folder's generation cache,
the systems, the scorer of each label set), so the coalitions equal to the study's contexts are
the study's own answers: after a ``study`` with the same settings, only the other coalitions are
generated. Every coalition of every system, k and query is answered in one call.

Example::

    from pyterrier_utility.commands import attributing as attribution
    from pyterrier_utility.study import StudyConfig
    config = StudyConfig(systems=('BM25', 'Rel'), ks=(4,), queries=2, samples=2, out='results/attribution')
    found = attribution.run_attribution(config, method='shapley')
    attribution.save_attribution(found, config)
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Sequence, Union

import pandas as pd

from .._messages import inform
from ..errors import SettingError
from ..methods.attribution import THRESHOLD, methods_of, sweep, utility_qrels, write_trec_qrels
from ..methods.attribution.games import TOLERANCE
from ..methods.attribution.qrels import check_trec_ids
from ..report.html import write_report
from ..schema import ATTRIBUTION_FILES, FRAME_FILES, REPORT_FILE, SETTINGS_FILE
from ..study.config import StudyConfig
from ..study.output import lock_folder
from ..study.preparation import prepare
from ..study.sweep import study_contexts

#: How ``utility.qrels`` grades a document, as ``settings.json`` records it.
QRELS_RULE = (f'first label set, first method; per (qid, docno) the mean phi_utility over the systems and ks it was '
              f'attributed in: '
              f'2 at or above {THRESHOLD}, 1 above 0, else 0; NaN left out')


@dataclass
class Attribution:
    """What ``attribute`` finds and writes.

    Attributes:
        coalitions: the value of every coalition evaluated, the methods that read it and whether it
            is held out (:data:`~pyterrier_utility.schema.COALITION_COLUMNS`).
        attribution: each context document's share, per method
            (:data:`~pyterrier_utility.schema.ATTRIBUTION_COLUMNS`).
        qrels: ``qid``, ``docno``, ``label`` graded by :data:`QRELS_RULE`.
        settings: ``settings.json``'s record, with the attribution's methods, budget, seed, tolerance and
            held-out coalitions, and the answers generated.
        quality: with ``evaluate``, each method's quality per context
            (:data:`~pyterrier_utility.schema.QUALITY_COLUMNS`), else ``None``.
    """
    coalitions: pd.DataFrame
    attribution: pd.DataFrame
    qrels: pd.DataFrame
    settings: dict
    quality: Optional[pd.DataFrame] = None


def run_attribution(config: StudyConfig, method: Union[str, Sequence[str]] = 'shapley', budget: Optional[int] = None,
                    argv: Optional[list] = None, evaluate: Optional[int] = None) -> Attribution:
    """The attribution of every context of ``config`` (one dataset, one reader; the original
    orderings), per label set, by each of ``method``
    (:func:`~pyterrier_utility.methods.attribution.sweep.sweep` over the study's contexts); the
    sampling methods draw with ``config.seed`` within ``budget`` coalitions per context. With
    ``evaluate`` = N, each method is judged on N held-out coalitions per context and against exact
    Shapley (:attr:`Attribution.quality`)."""
    for what, values in (('dataset', config.datasets), ('reader', config.readers)):
        if len(values) > 1:
            raise SettingError(f'attribute takes one {what}, got {len(values)} ({", ".join(map(str, values))})')
    methods = methods_of(method, budget, evaluate)
    prepared = prepare(config, 'attribute', argv)
    collection, reader = prepared.collections[config.datasets[0]], prepared.readers[config.readers[0]]
    name, qrels, topics, config = collection.name, collection.qrels, collection.topics, collection.config
    record = prepared.record
    record['attribution'] = {'methods': methods, 'budget': budget, 'seed': config.seed, 'tolerance': TOLERANCE,
                             'evaluate': evaluate, 'qrels': QRELS_RULE}
    scorer_for = prepared.scorer_for(collection)
    systems = prepared.systems(collection, reader)
    inform(f'{name}: {len(topics)} queries, systems {list(systems)}, k {list(config.ks)}, '
           f'method{"s" if len(methods) > 1 else ""} {", ".join(methods)}')
    contexts = study_contexts(topics, qrels, systems, config.ks, config.label_sets)
    check_trec_ids(f'attribute ({ATTRIBUTION_FILES["qrels"]})', contexts[contexts['docno'].notna()])
    before = reader.cache.generated
    found = sweep(contexts, reader, scorer_for, qrels, config.label_sets, methods, config.seed, budget, evaluate)
    record['generated'] = reader.cache.generated - before
    attributed = found.attribution
    first = attributed[(attributed['labels'] == str(config.label_sets[0])) & (attributed['method'] == methods[0])]
    return Attribution(found.coalitions, attributed, utility_qrels(first), record, found.quality)


def save_attribution(found: Attribution, config: StudyConfig) -> List[str]:
    """Writes ``coalitions.csv``, ``attribution.csv``, ``utility.qrels``, ``settings.json`` and, when
    the methods were judged, ``attribution_quality.csv`` into ``config.out``; returns the file names.
    A study's other files there are kept (and a study run later keeps these), but ``settings.json`` is
    this run's (its ``command`` says ``attribute``); a study's ``report.html`` is written again, with
    the attribution."""
    out = Path(config.out)
    written = [ATTRIBUTION_FILES['coalitions'], ATTRIBUTION_FILES['attribution'], ATTRIBUTION_FILES['qrels'],
               SETTINGS_FILE]
    with lock_folder(out):
        found.coalitions.to_csv(out / ATTRIBUTION_FILES['coalitions'], index=False)
        found.attribution.to_csv(out / ATTRIBUTION_FILES['attribution'], index=False)
        write_trec_qrels(found.qrels, out / ATTRIBUTION_FILES['qrels'])
        quality = out / ATTRIBUTION_FILES['quality']
        if found.quality is not None:
            found.quality.to_csv(quality, index=False)
            written.append(quality.name)
        elif quality.is_file():  # another run's judgement of other coalitions
            quality.unlink()
        (out / SETTINGS_FILE).write_text(json.dumps(found.settings, indent=2, sort_keys=True, default=str) + '\n')
        if (out / FRAME_FILES['per_query']).is_file():  # a study's folder: its page gains the attribution
            write_report(out)
            written.append(REPORT_FILE)
    return sorted(written)
