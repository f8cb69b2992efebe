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

from .._checks import check_int
from .._messages import inform, warn_qids
from ..errors import SettingError
from ..methods.attribution import THRESHOLD, ContextAttribution, utility_qrels, write_trec_qrels
from ..methods.attribution.games import SAMPLED, TOLERANCE, check_method
from ..methods.attribution.qrels import check_trec_ids
from ..methods.attribution.quality import held_out, quality_table
from ..report.html import write_report
from ..schema import (
    ATTRIBUTION_COLUMNS,
    ATTRIBUTION_FILES,
    CELL,
    COALITION_COLUMNS,
    FRAME_FILES,
    REPORT_FILE,
    SETTINGS_FILE,
)
from ..study.config import StudyConfig
from ..study.output import lock_folder
from ..study.preparation import prepare
from ..study.sweep import study_contexts
from ..vocabulary import MAX_REFERENCE_K

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


def methods_of(methods: Union[str, Sequence[str]], budget: Optional[int]) -> List[str]:
    """The methods asked for (one or several, each once), checked; ``budget`` goes to those of them
    that sample, and a budget no method takes is refused."""
    methods = list(dict.fromkeys([methods] if isinstance(methods, str) else methods))
    if not methods:
        raise SettingError('attribute: give at least one method')
    for method in methods:
        check_method(method, budget if method in SAMPLED else None)
    if budget is not None and not set(methods) & set(SAMPLED):
        check_method(methods[0], budget)  # refused, naming the methods a budget is for
    return methods


def run_attribution(config: StudyConfig, method: Union[str, Sequence[str]] = 'shapley', budget: Optional[int] = None,
                    argv: Optional[list] = None, evaluate: Optional[int] = None) -> Attribution:
    """The attribution of every context of ``config`` (one dataset, one reader; the original
    orderings), per label set, by each of ``method`` (one or several: the coalitions one reads are
    answered once for all); the sampling methods draw with ``config.seed`` within ``budget``
    coalitions per context. With ``evaluate`` = N, N held-out coalitions per context
    (:func:`~pyterrier_utility.methods.attribution.quality.held_out`) are generated too, and the exact
    Shapley values of the contexts of k <= :data:`~pyterrier_utility.vocabulary.MAX_REFERENCE_K`
    as the reference, and each method is judged on them (:attr:`Attribution.quality`)."""
    for what, values in (('dataset', config.datasets), ('reader', config.readers)):
        if len(values) > 1:
            raise SettingError(f'attribute takes one {what}, got {len(values)} ({", ".join(map(str, values))})')
    methods = methods_of(method, budget)
    if evaluate is not None:
        check_int('attribute', 'evaluate', evaluate, 1)
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
    warn_short(contexts)
    before = reader.cache.generated
    coalitions, rows, judged = [], [], []
    for labels in config.label_sets:
        scorer = scorer_for(labels)
        runs = [(m, contexts) for m in methods]
        if evaluate is not None and 'shapley' not in methods:  # the reference, where it is affordable
            runs.append(('shapley', contexts[contexts['k'].astype(int) <= MAX_REFERENCE_K]))
        found_by, values_by = [], []
        for method_, asked in runs:
            attribution = ContextAttribution(reader, scorer, method=method_, seed=config.seed,
                                             budget=budget if method_ in SAMPLED else None)
            found, values = attribution.evaluate(asked, by=CELL)
            found_by.append(found)
            values_by.append(values.assign(methods=method_, held_out=False))
        if evaluate is not None:
            held = attribution.values_of(contexts, lambda k: held_out(k, evaluate, config.seed), by=CELL)
            values_by.append(held.assign(methods='', held_out=True))
        found = pd.concat(found_by, ignore_index=True)
        relevant = {(q, d) for q, docnos in labels.relevant_docnos(qrels).items() for d in docnos}
        found = found.assign(labels=str(labels), relevant=[pair in relevant for pair in zip(found['qid'],
                                                                                          found['docno'])])
        rows.append(found[list(ATTRIBUTION_COLUMNS)])
        values = merged_coalitions(pd.concat(values_by, ignore_index=True)).assign(labels=str(labels))
        coalitions.append(values[list(COALITION_COLUMNS)])
        if evaluate is not None:
            judged.append(quality_table(rows[-1], coalitions[-1]))
    record['generated'] = reader.cache.generated - before
    attributed = pd.concat(rows, ignore_index=True)
    first = attributed[(attributed['labels'] == str(config.label_sets[0])) & (attributed['method'] == methods[0])]
    return Attribution(pd.concat(coalitions, ignore_index=True), attributed, utility_qrels(first), record,
                       pd.concat(judged, ignore_index=True) if judged else None)


def merged_coalitions(values: pd.DataFrame) -> pd.DataFrame:
    """Each coalition of each context once (in the order first evaluated), with the methods that read
    it (space-separated) and whether it was held out."""
    key = [*CELL, 'coalition']
    merged = values.groupby(key, sort=False).agg(value=('value', 'first'),
                                                 methods=('methods', lambda m: ' '.join(x for x in m if x)),
                                                 held_out=('held_out', 'any'))
    return merged.reset_index()


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
