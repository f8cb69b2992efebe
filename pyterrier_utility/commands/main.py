"""The commands of ``pyterrier-utility``, each what its subcommand runs, prints and writes:
:func:`study`, :func:`experiment`, :func:`attribute`, :func:`transfer` and :func:`report` (``predict`` is
:func:`.predicting.predict`). Each starts from :mod:`~pyterrier_utility.study.preparation` (or a finished
folder) and calls the library's functions.

Example::

    from pyterrier_utility.commands import main as commands
    from pyterrier_utility.study import StudyConfig
    commands.study(StudyConfig(queries=3, ks=(1, 3), samples=2, out='results/small'))
    commands.report(['results/small'], Path('results/report'), html=True)
"""
import json
import time
from pathlib import Path
from typing import List, Optional, Sequence, Tuple, Union

import pandas as pd
import pyterrier as pt
from ir_measures import nDCG

from .. import measures
from .._messages import inform
from ..cache.store import AnswerStore
from ..errors import SettingError
from ..methods.attribution.quality import quality_summary
from ..methods.attribution.summary import attribution_table
from ..prediction.parameters import PredictionParameters
from ..qualities import DEFAULT_QUALITY
from ..report import figures
from ..report.html import write_report
from ..report.tables import write_tables
from ..schema import GENERATIONS_FILE, HEALTH_FILE, REPORT_FILE, SETTINGS_FILE
from ..scoring.utility import UtilityEvaluator, check_gain, with_gain
from ..settings import Placement
from ..study import health, stats
from ..study.config import StudyConfig, figure4_k
from ..study.folder import read_health, study_folder
from ..study.output import check_out, lock_folder
from ..study.preparation import prepare
from ..study.results import StudyResults
from ..study.stats import fold_readers
from ..study.sweep import variants, window
from ..study.systems import ranked_systems
from ..study.validate import read_per_query
from ..vocabulary import POOL_CAP, UTILITY_GAINS
from .attributing import Attribution, run_attribution, save_attribution
from .driver import run, save


def study(config: StudyConfig, argv: Optional[list] = None, prediction: Optional[PredictionParameters] = None,
          placement: Placement = Placement(), with_transfer: bool = False,
          transfer_max_docs: Optional[int] = None) -> StudyResults:
    """The ``study`` command: runs (in process, or where ``placement`` says: see :func:`run`), saves
    and prints Table 1 in the paper's layout; with ``prediction``, then
    :func:`~pyterrier_utility.commands.predicting.predict` over its
    folder with those settings; ``with_transfer``, then :func:`transfer` (``transfer_max_docs``: its pool's cap)."""
    if prediction is not None and (len(config.datasets) > 1 or len(config.readers) > 1):
        raise SettingError(f'--predict reads a study of one dataset and one reader; this one has datasets '
                           f'{list(config.datasets)} and readers {list(config.readers)}')
    if with_transfer and (len(config.datasets) > 1 or len(config.readers) < 2):
        raise SettingError(f'--transfer reads a study of one dataset and two or more readers (--reader A B); this '
                           f'one has datasets {list(config.datasets)} and readers {list(config.readers)}')
    start = time.time()
    with lock_folder(Path(config.out)):
        results, branches = run(config, argv, placement)
        written = save(results, config, branches)
    if branches is not None:
        share = branches.groupby('k')['branch'].apply(lambda b: (b == 'S').mean())
        inform('COS-Mix fell back to the sparse documents for '
               + ', '.join(f'{share[k]:.0%} of queries at k={k}' for k in share.index))
    out = Path(config.out)
    print()
    print((out / 'table1_paper.md').read_text())
    cut = stats.truncation(results.answers)
    # Beside Table 1, not only in a warning: answers cut mid-sentence are scored as they are.
    limits = ', '.join(sorted({str(config.decoding_for(r).max_new_tokens) for r in config.readers}, key=int))
    print(f'{cut} ({limits}; answers.csv says which, in its truncated column)' if cut
          else 'The engine did not say whether any answer was cut at max_new_tokens.')
    print(health.summary(read_health(out / HEALTH_FILE)))
    detail = health.control_detail(health.positive_control(results.table(correction=config.correction),
                                                           min_n=config.min_n))
    if detail:
        print(detail)
    print(f'written to {out}/ ({", ".join(written)}) in {time.time() - start:.0f} s; '
          f'{results.generated} answers generated')
    if prediction is not None:
        from .predicting import predict  # scikit-learn and the predictors only where asked for
        print()
        predict(out, prediction)
    if with_transfer:
        print()
        transfer(out, transfer_max_docs, argv)
    return results


def experiment(config: StudyConfig, argv: Optional[list] = None) -> pd.DataFrame:
    """The ``experiment`` command: the systems at one k as pipelines in ``pt.Experiment`` (nDCG@k,
    FBERT, FBERT0, Utility, t-tests against Rel; P named for its quality, EM and EM_0shot for EM); one dataset,
    one k, one label set."""
    for what, values in (('dataset', config.datasets), ('k', config.ks), ('label set', config.label_sets),
                         ('reader', config.readers)):
        if len(values) > 1:
            raise SettingError(f'experiment takes one {what}, got {len(values)} '
                               f'({", ".join(map(str, values))}); the study command takes several')
    start = time.time()
    out = Path(config.out)
    prepared = prepare(config, 'experiment', argv)
    (out / SETTINGS_FILE).write_text(json.dumps(prepared.record, indent=2, sort_keys=True, default=str) + '\n')
    collection, reader = prepared.collections[config.datasets[0]], prepared.readers[config.readers[0]]
    name, k, topics, qrels = collection.name, config.ks[0], collection.topics, collection.qrels
    config = collection.config
    evaluate = UtilityEvaluator(reader, prepared.scorer_for(collection)(config.label_sets[0]), config.utility)
    systems = prepared.systems(collection, reader)
    pipelines = {}
    for s, system in systems.items():
        for label, ordering, first in variants(s, ranked_systems(config, systems), config.orderings,
                                               config.study_windows):
            cut = window(first, k, config.window_step)
            cut = system >> cut if cut is not None else system % k
            pipelines[label] = cut if ordering is None else cut >> ordering
    # Each system runs once; both evaluations below read its stored output.
    outputs = [pt.Transformer.from_df((p >> reader >> evaluate)(topics)) for p in pipelines.values()]
    metrics = [nDCG @ k, *measures.quality_measures(config.quality), measures.Utility]
    names = list(pipelines)
    table = pt.Experiment(outputs, topics, qrels, metrics, names=names,
                          baseline=names.index('Rel') if 'Rel' in names else None, round=4)
    per_query = pt.Experiment(outputs, topics, qrels, metrics, names=names, perquery=True)
    table.to_csv(out / 'experiment.csv', index=False)
    per_query.to_csv(out / 'per_query.csv', index=False)
    print(f'{name}: {len(topics)} queries, k={k}; significance vs Rel (paired t-test)')
    print(table.to_string(index=False))
    print(f'written to {out}/ in {time.time() - start:.0f} s ({reader.cache.generated} answers generated, '
          f'{len(reader.cache)} cached)')
    return table


def attribute(config: StudyConfig, method: Union[str, Sequence[str]] = 'shapley', budget: Optional[int] = None,
              argv: Optional[list] = None, evaluate: Optional[int] = None) -> Attribution:
    """The ``attribute`` command: runs, saves and prints the summary (and each method's quality, with
    ``evaluate``)."""
    start = time.time()
    with lock_folder(Path(config.out)):
        found = run_attribution(config, method, budget, argv, evaluate)
        written = save_attribution(found, config)
    table = attribution_table(found.attribution)
    print(f'mean share of U (phi_utility) by position, mean phi of the relevant and other documents, share with '
          f'negative phi:\n{table.round(4).to_string(index=False)}')
    if found.quality is not None:
        print(f'each method on {evaluate} held-out coalitions per context (mean LDS) and against exact Shapley '
              f'(mean absolute error, rank correlation, top-1 agreement), coalitions read per context:\n'
              f'{quality_summary(found.quality).round(4).to_string(index=False)}')
    print(f'written to {config.out}/ ({", ".join(written)}) in {time.time() - start:.0f} s; '
          f'{found.settings["generated"]} answers generated')
    return found


def transfer(out: Union[str, Path], max_docs: Optional[int] = None, argv: Optional[list] = None):
    """The ``transfer`` command over the finished study of two or more readers in ``out``: runs, saves and
    prints the transfer table and the readers' agreement (:mod:`~pyterrier_utility.commands.transferring`);
    ``max_docs``: the pool's cap (``None``: :data:`~pyterrier_utility.vocabulary.POOL_CAP`)."""
    from .transferring import run_transfer, save_transfer, study_config, transfer_markdown
    start = time.time()
    with lock_folder(Path(out)):
        found = run_transfer(study_config(out), POOL_CAP if max_docs is None else max_docs, argv)
        written = save_transfer(found, out)
    print(transfer_markdown(found.table))
    shown = found.agreement.dropna(subset=['value'])
    print('agreement between readers (transfer.csv):\n' + shown.round(3).to_string(index=False))
    print(f'written to {out}/ ({", ".join(written)}) in {time.time() - start:.0f} s; '
          f'{found.settings["generated"]} answers generated')
    return found


def interrupted(command: str, out: Union[str, Path, None]) -> str:
    """The line a command stopped by Ctrl-C ends with: how many answers the generation cache of ``out``
    keeps, and that the same command goes on from them. Each answer is stored whole once its batch is
    answered, and a run's files are moved into place together, so nothing is kept half-written."""
    cache = Path(out) / GENERATIONS_FILE if out is not None else None
    if command in ('report', 'predict') or cache is None:
        return f'pyterrier-utility {command}: interrupted; it generates nothing, and the same command writes its ' \
               'files again'
    kept = len(AnswerStore(cache)) if cache.is_file() else 0
    return (f'pyterrier-utility {command}: interrupted; {kept} answers are kept in {cache}, and the same command '
            'goes on from them')


def _recorded(folder: Path) -> dict:
    """What a study folder's ``settings.json`` records (nothing where it has none)."""
    path = folder / SETTINGS_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


def _recorded_ks(settings: dict) -> Optional[Tuple[List[int], List[int]]]:
    """The ks of Table 1 and of Figures 3 and 5 a study's ``settings`` record (``None``: no ``ks``)."""
    if 'ks' not in settings:
        return None
    return settings['ks'], settings.get('figure_ks') or settings['ks']


def _common(folders, recorded: List[dict], name: str, default: str, what: str, remedy: str) -> str:
    """The setting ``name`` the studies in ``folders`` were run with (``default`` for a folder whose
    settings.json does not record it); a :class:`SettingError` naming each where they differ."""
    found = {str(folder): settings.get(name, default) for folder, settings in zip(folders, recorded)}
    if len(set(found.values())) > 1:
        raise SettingError(f'the studies were run with different {what} ({found}): {remedy}')
    return next(iter(found.values()))


def report(folders, out: Path, correction: Optional[str] = None, fig4_k: int = StudyConfig.fig4_k,
           ndcg_order: str = StudyConfig.ndcg_order, html: bool = False, min_n: int = StudyConfig.min_n,
           gain: Optional[str] = None) -> List[str]:
    """Table 1 and Figures 3-5 again from the ``per_query.csv`` of saved study folders (several,
    e.g. one per dataset, make one table); nothing is generated. Table 1 is over the ``ks`` and
    Figures 3 and 5 over the ``figure_ks`` their ``settings.json`` record (every k where a folder has
    none). U is under ``gain`` (``'relative'`` or ``'absolute'``, computed again from each query's P_k
    and P_0; default: the gain the studies were run with). With ``html``, also each folder's browsable
    page under that gain (``report.html`` in ``out``, or ``NAME-report.html`` for several folders).
    Studies of different answer qualities are refused (one table holds one P). Returns the file names."""
    frames, healths, table_ks, figure_ks = [], [], set(), set()
    recorded = [_recorded(study_folder(folder)) for folder in folders]
    gain = check_gain('report', gain) if gain is not None else _common(
        folders, recorded, 'utility', UTILITY_GAINS[0], 'utility gains',
        f'give --utility {" or ".join(UTILITY_GAINS)} to show them all one way')
    quality = _common(folders, recorded, 'quality', DEFAULT_QUALITY, 'answer qualities', 'one table holds one P')
    for folder, settings in zip(folders, recorded):
        path = study_folder(folder) / 'per_query.csv'
        frame = with_gain(read_per_query(path), gain)
        if 'dataset' not in frame.columns:
            frame.insert(0, 'dataset', Path(folder).name)
        frames.append(frame)
        if (Path(folder) / HEALTH_FILE).is_file():
            found = read_health(Path(folder) / HEALTH_FILE)
            if 'dataset' not in found.columns:
                found.insert(0, 'dataset', Path(folder).name)
            healths.append(found)
        ks = _recorded_ks(settings)
        table_ks |= set(ks[0] if ks else frame['k'])
        figure_ks |= set(ks[1] if ks else frame['k'])
    per_query = pd.concat(frames, ignore_index=True)
    if per_query['dataset'].nunique() == 1 and len(folders) == 1:
        per_query = per_query.drop(columns=['dataset'])
    check_out(out)
    baseline = 'Rel' if 'Rel' in set(per_query['system']) else None
    # Marks need every folder's health: without one folder's, none are given.
    found = pd.concat(healths, ignore_index=True) if len(healths) == len(folders) else None
    if found is not None and 'dataset' not in per_query.columns:
        found = found.drop(columns='dataset')
    paths = write_tables(per_query, out, baseline=baseline, correction=correction, min_n=min_n, ks=sorted(table_ks),
                         health=found, gain=gain, quality=quality)
    drawn = figures.draw_figures(fold_readers(per_query), out, figure4_k(fig4_k, per_query['k'], table_ks),
                                 ndcg_order=ndcg_order, ks=sorted(figure_ks), gain=gain)
    print(paths['table1_paper.md'].read_text())
    written = sorted(list(paths) + drawn)
    if html:
        for folder in folders:
            page = out / (REPORT_FILE if len(folders) == 1 else f'{Path(folder).name}-{REPORT_FILE}')
            written.append(write_report(folder, page, gain=gain).name)
    print(f'written to {out}/ ({", ".join(written)}); nothing generated')
    return written
