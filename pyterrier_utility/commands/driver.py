"""A study from its :class:`~pyterrier_utility.study.config.StudyConfig`: what the ``study``
command runs, reachable from Python with the same config (the command itself, which also prints
Table 1, is :func:`pyterrier_utility.commands.main.study`).

Example::

    from pyterrier_utility.commands import run, save
    from pyterrier_utility.study import StudyConfig
    config = StudyConfig(queries=3, ks=(1, 3), samples=2, out='results/small')
    results = run(config)
    save(results, config)
"""
import json
from pathlib import Path
from typing import List, Optional, Tuple, cast

import pandas as pd

from .._messages import inform
from .._version import __version__
from ..methods.cosmix import COSMix
from ..report import figures
from ..report.html import TITLE, write_report
from ..report.tables import write_study
from ..schema import REPORT_FILE, SETTINGS_FILE
from ..settings import Placement
from ..study.config import StudyConfig, figure4_k
from ..study.config_json import to_dict
from ..study.output import stage_outputs
from ..study.preparation import prepare
from ..study.results import StudyResults
from ..study.stats import fold_readers
from ..study.sweep import run_study
from ..study.systems import ranked_systems


def run(config: StudyConfig, argv: Optional[list] = None,
        placement: Placement = Placement()) -> Tuple[StudyResults, Optional[pd.DataFrame]]:
    """Runs the study of ``config`` (its generation cache in ``config.out``); returns the results
    (their ``settings`` what ``settings.json`` will hold) and, when COS-Mix is a system, its branch
    per query and k. ``placement``: where the readers run (default: in process)."""
    prepared = prepare(config, 'study', argv, placement)
    collections, readers = prepared.collections, prepared.readers
    studies: List[StudyResults] = []
    branches = []
    for name, collection in collections.items():
        systems = None
        for reader_name, reader in readers.items():
            if systems is None or 'COSMix' in config.systems:  # COS-Mix validates with its reader
                systems = prepared.systems(collection, reader)
            inform(f'{name}: {len(collection.topics)} queries, systems {list(systems)}, reader {reader_name}')
            scorer_for = prepared.scorer_for(collection)
            studies.append(run_study(collection.topics, collection.qrels, systems, reader, collection.dataset.texts,
                                     ks=config.all_ks, label_sets=collection.config.label_sets,
                                     reverse=ranked_systems(config, systems), orderings=config.orderings,
                                     windows=config.study_windows, window_step=config.window_step,
                                     scorer_for=scorer_for, gain=config.utility,
                                     baseline='Rel' if 'Rel' in systems else None,
                                     ndcg_order=config.ndcg_order, dataset=name if len(collections) > 1 else None,
                                     reader_name=reader_name if len(readers) > 1 else None))
            found = scorer_for.nugget_frames()
            if found is not None:  # the nuggets P was scored by, and each answer's support of each
                named = {'dataset': name} if len(collections) > 1 else {}
                studies[-1].nuggets, studies[-1].nugget_assignments = (f.assign(**named)[list(named) + list(f.columns)]
                                                                       for f in found)
            if 'COSMix' in systems:
                cosmix = cast(COSMix, systems['COSMix'])
                branches.append(cosmix.branches().assign(dataset=name, reader=reader_name))
    results = StudyResults.concat(studies)
    results.settings = prepared.record
    return results, (pd.concat(branches, ignore_index=True) if branches else None)


def save(results: StudyResults, config: StudyConfig, cosmix_branches: Optional[pd.DataFrame] = None) -> List[str]:
    """Writes the settings, tables, frames, figures and report of a study into ``config.out``, all
    together in place of an earlier run's (see :mod:`~pyterrier_utility.study.output`);
    returns the file names."""
    with stage_outputs(Path(config.out)) as stage:
        settings = results.settings or dict(to_dict(config), version=__version__)
        (stage / SETTINGS_FILE).write_text(json.dumps(settings, indent=2, sort_keys=True, default=str) + '\n')
        paths = write_study(results, stage, correction=config.correction, min_n=config.min_n, ks=config.ks,
                            gain=config.utility, quality=config.quality)
        if cosmix_branches is not None:
            paths['cosmix_branches.csv'] = stage / 'cosmix_branches.csv'
            cosmix_branches.to_csv(paths['cosmix_branches.csv'], index=False)
        fig4_k = figure4_k(config.fig4_k, config.all_ks, config.ks)
        drawn = figures.draw_figures(fold_readers(results.per_query), stage, fig4_k, ndcg_order=config.ndcg_order,
                                     ks=config.figure_ks or config.ks, gain=config.utility)
        # The page is written in the staging folder; its title names the folder it is moved into.
        write_report(stage, title=config.title or TITLE.format(Path(config.out).resolve().name))
        return sorted(list(paths) + drawn + [SETTINGS_FILE, REPORT_FILE])
