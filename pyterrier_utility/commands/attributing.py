"""The ``attribute`` command: each context document's share of U, for the systems and ks of a
study's config, into the study's folder.

It builds what the study builds (the collection, the reader behind the folder's generation cache,
the systems, the scorer of each label set), so the coalitions equal to the study's contexts are
the study's own answers: after a ``study`` with the same settings, only the other coalitions are
generated. Every coalition of every system, k and query is answered in one call.

Example::

    from pyterrier_utility.commands import attributing as attribution
    from pyterrier_utility.experiment import StudyConfig
    config = StudyConfig(systems=('BM25', 'Rel'), ks=(4,), queries=2, samples=2, out='results/attribution')
    found = attribution.run_attribution(config, method='shapley')
    attribution.save_attribution(found, config)
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import pandas as pd

from .._messages import inform, warn_qids
from ..errors import SettingError
from ..experiment.config import StudyConfig
from ..experiment.output import lock_folder
from ..experiment.preparation import prepare
from ..experiment.study import study_contexts
from ..methods.attribution import THRESHOLD, ContextAttribution, utility_qrels, write_trec_qrels
from ..methods.attribution.games import check_method
from ..methods.attribution.qrels import check_trec_ids
from ..report.html import write_report
from ..vocabulary import (
    ATTRIBUTION_COLUMNS,
    ATTRIBUTION_FILES,
    CELL,
    COALITION_COLUMNS,
    FRAME_FILES,
    REPORT_FILE,
    SETTINGS_FILE,
)

#: How ``utility.qrels`` grades a document, as ``settings.json`` records it.
QRELS_RULE = (f'first label set; per (qid, docno) the mean phi_utility over the systems and ks it was attributed in: '
              f'2 at or above {THRESHOLD}, 1 above 0, else 0; NaN left out')


@dataclass
class Attribution:
    """What ``attribute`` finds and writes.

    Attributes:
        coalitions: the value of every coalition evaluated (:data:`~pyterrier_utility.vocabulary.COALITION_COLUMNS`).
        attribution: each context document's share (:data:`~pyterrier_utility.vocabulary.ATTRIBUTION_COLUMNS`).
        qrels: ``qid``, ``docno``, ``label`` graded by :data:`QRELS_RULE`.
        settings: ``settings.json``'s record, with the attribution's method, budget and seed and the
            answers generated.
    """
    coalitions: pd.DataFrame
    attribution: pd.DataFrame
    qrels: pd.DataFrame
    settings: dict


def run_attribution(config: StudyConfig, method: str = 'shapley', budget: Optional[int] = None,
                    argv: Optional[list] = None) -> Attribution:
    """The attribution of every context of ``config`` (one dataset, one reader; the original
    orderings), per label set; ``permutation`` draws its orders with ``config.seed``."""
    for what, values in (('dataset', config.datasets), ('reader', config.readers)):
        if len(values) > 1:
            raise SettingError(f'attribute takes one {what}, got {len(values)} ({", ".join(map(str, values))})')
    check_method(method, budget)
    prepared = prepare(config, 'attribute', argv)
    collection, reader = prepared.collections[config.datasets[0]], prepared.readers[config.readers[0]]
    name, qrels, topics, config = collection.name, collection.qrels, collection.topics, collection.config
    record = prepared.record
    record['attribution'] = {'method': method, 'budget': budget, 'seed': config.seed, 'qrels': QRELS_RULE}
    scorer_for = prepared.scorer_for(collection)
    systems = prepared.systems(collection, reader)
    inform(f'{name}: {len(topics)} queries, systems {list(systems)}, k {list(config.ks)}, method {method}')
    contexts = study_contexts(topics, qrels, systems, config.ks, config.label_sets)
    check_trec_ids(f'attribute ({ATTRIBUTION_FILES["qrels"]})', contexts[contexts['docno'].notna()])
    warn_short(contexts)
    before = reader.cache.generated
    coalitions, rows = [], []
    for labels in config.label_sets:
        attribution = ContextAttribution(reader, scorer_for(labels), method=method, budget=budget, seed=config.seed)
        found, values = attribution.evaluate(contexts, by=CELL)
        relevant = {(q, d) for q, docnos in labels.relevant_docnos(qrels).items() for d in docnos}
        found = found.assign(labels=str(labels), relevant=[pair in relevant for pair in zip(found['qid'],
                                                                                          found['docno'])])
        rows.append(found[list(ATTRIBUTION_COLUMNS)])
        coalitions.append(values.assign(labels=str(labels))[list(COALITION_COLUMNS)])
    record['generated'] = reader.cache.generated - before
    attributed = pd.concat(rows, ignore_index=True)
    first = attributed[attributed['labels'] == str(config.label_sets[0])]
    return Attribution(pd.concat(coalitions, ignore_index=True), attributed, utility_qrels(first), record)


def warn_short(contexts: pd.DataFrame) -> None:
    """Warns, per system and k, naming the qids, of the contexts with fewer documents than k (an
    oracle with fewer judged documents, a short ranking): they are attributed over the documents
    they have, their ``attribution.csv`` rows fewer than k."""
    sizes = contexts[contexts['docno'].notna()].groupby(list(CELL), sort=False).size().reset_index(name='n')
    short = sizes[sizes['n'] < sizes['k'].astype(int)]
    for (system, k), rows in short.groupby(['system', 'k'], sort=False):
        warn_qids(f'{system} at k={k}: fewer than {k} documents, attributed over the documents each context has '
                  '(its Shapley values split U among them)', rows['qid'])


def save_attribution(found: Attribution, config: StudyConfig) -> List[str]:
    """Writes ``coalitions.csv``, ``attribution.csv``, ``utility.qrels`` and ``settings.json`` into
    ``config.out``; returns the file names. A study's other files there are kept (and a study run
    later keeps these), but ``settings.json`` is this run's (its ``command`` says ``attribute``); a
    study's ``report.html`` is written again, with the attribution."""
    out = Path(config.out)
    with lock_folder(out):
        found.coalitions.to_csv(out / ATTRIBUTION_FILES['coalitions'], index=False)
        found.attribution.to_csv(out / ATTRIBUTION_FILES['attribution'], index=False)
        write_trec_qrels(found.qrels, out / ATTRIBUTION_FILES['qrels'])
        (out / SETTINGS_FILE).write_text(json.dumps(found.settings, indent=2, sort_keys=True, default=str) + '\n')
        if (out / FRAME_FILES['per_query']).is_file():  # a study's folder: its page gains the attribution
            write_report(out)
            return sorted(list(ATTRIBUTION_FILES.values()) + [SETTINGS_FILE, REPORT_FILE])
    return sorted(list(ATTRIBUTION_FILES.values()) + [SETTINGS_FILE])
