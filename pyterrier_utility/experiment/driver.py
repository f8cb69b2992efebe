"""A study from its :class:`~pyterrier_utility.experiment.config.StudyConfig`: what the command line
runs, reachable from Python with the same config.

Example::

    from pyterrier_utility.experiment import StudyConfig, run, save
    config = StudyConfig(queries=3, ks=(1, 3), samples=2, out='results/small')
    results = run(config)
    save(results, config)
"""
import json
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple, cast

import pandas as pd
import pyterrier as pt
from ir_measures import nDCG

from .. import backends, measures
from .._messages import say
from .._version import __version__
from ..cache import GenerationCache, backend_key
from ..contexts.runs import RunFile
from ..datasets import get_dataset
from ..errors import SettingError
from ..methods.cosmix import COSMix, cosmix_system
from ..protocols import AnswerScorer
from ..reader import Reader
from ..scoring.bertscore import BertScore
from ..scoring.fbert import FBertScorer
from ..scoring.gold import GOLD_QUALITIES, GoldAnswerScorer
from ..scoring.utility import UtilityEvaluator
from ..settings import FIELDS, LabelSet
from ..vocabulary import GENERATIONS_FILE, HEALTH_FILE
from . import figures, health, stats
from .config import DECODING_SOURCES, PRESETS, StudyConfig
from .folder import read_health, study_folder
from .html import TITLE, write_report
from .output import check_out, owned, staged
from .results import StudyResults, blocks, write_tables
from .study import run_study, variants, window
from .systems import DEFAULT_SYSTEMS, REVERSED_SYSTEMS, default_systems
from .validate import read_per_query


def load_collection(name: str, config: StudyConfig):
    """A dataset, its qrels, its topics answerable under at least one label set (narrower sets
    give NaN for the others) and, for a gold-answer quality, with a gold answer, and the config it is
    studied under (:meth:`StudyConfig.for_collection`: a collection judged in two grades gets the
    label set {1} and no oracles, said on the console). A label set that no document has, or that
    leaves out the collection's top grade or labels the Rel oracle draws from, is refused: P would
    silently ignore documents that Rel gives the reader."""
    dataset = get_dataset(name)
    qrels = dataset.get_qrels()
    present = sorted(qrels['label'].unique().tolist())
    config, note = config.for_collection(name, present)
    if note:
        say(note)
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
    if config.quality in GOLD_QUALITIES:
        answerable &= set(dataset.gold_answers())
    topics = dataset.get_topics()
    topics = topics[topics['qid'].astype(str).isin(answerable)].reset_index(drop=True)
    if config.queries:
        topics = topics.head(config.queries)
    return dataset, qrels, topics, config


def build_reader(config: StudyConfig, name: str, cache_path: Optional[Path] = None, ray: Optional[str] = None,
                 replicas: int = 1, replica_gpus: float = 0) -> Reader:
    """The reader ``name`` of the config: its backend (every decoding setting in it) behind a
    generation cache (one file for every reader: keys hold the model); with ``ray`` (a cluster's
    address), the backend in ``replicas`` Ray actors of ``replica_gpus`` GPUs each
    (:class:`~pyterrier_utility.backends.RayBackend`), its answers and cache keys the same."""
    options = config.backend_options(name)
    backend = (backends.RayBackend(name, replicas, num_gpus=replica_gpus, address=ray, **options) if ray
               else backends.get_backend(name, **options))
    return Reader(GenerationCache(backend, cache_path), n_samples=config.samples, seed=config.seed,
                  prompt_format=config.prompt_format, verbose=True)


def build_systems(config: StudyConfig, name: str, dataset, qrels: pd.DataFrame, topics: pd.DataFrame,
                  reader: Reader) -> Dict[str, pt.Transformer]:
    """The systems of the config for one dataset: only those asked for are built (no index or
    re-ranker for an oracle-only study), then the saved runs that rank some of its queries."""
    asked = set(config.systems) - {'COSMix'}
    systems = {}
    if asked & set(DEFAULT_SYSTEMS):
        built = default_systems(dataset, qrels, neural=config.neural, labels=config.rel_labels,
                                seed=config.oracle_seed, index=config.index, bm25=config.bm25,
                                verbose=config.verbose, retrieval=bool(asked & set(REVERSED_SYSTEMS)),
                                reranker='Neural' in asked, oracle=config.oracle, progress=True)
        systems.update({s: built[s] for s in config.systems if s in built})
    if 'COSMix' in config.systems:
        systems['COSMix'] = cosmix_system(dataset, reader, threshold=config.cosmix_threshold, reranker=config.neural)
    for run_name, path in config.runs:
        run = RunFile(path, dataset.texts)
        if run.qids() & set(topics['qid'].astype(str)):
            systems[run_name] = run
        else:
            say(f'{name}: run {run_name} ranks none of its queries; left out')
    return {s: systems[s] for s in list(config.systems) + [r for r, _ in config.runs] if s in systems}


def ranked_systems(config: StudyConfig, systems) -> List[str]:
    """The systems also reported in other orderings and windows: the retrievers and the saved runs."""
    return [s for s in systems if s in REVERSED_SYSTEMS or s in dict(config.runs)]


def announce(command: str, config: StudyConfig, readers: Dict[str, Reader], out: Path,
             argv: Optional[list] = None) -> dict:
    """Prints the settings; returns them whole, with each backend as built, for ``settings.json``."""
    first = next(iter(readers.values()))
    # The stops each reader uses: its prompt format's, then the decoding's where the format takes them.
    engines = {name: dict(engine_record(r.backend.backend), stop=list(r.stop)) for name, r in readers.items()}
    notes = config.decoding_notes()
    record = dict(config.to_dict(), command=command, version=__version__, seeds=first.seeds(),
                  backends={name: backend_key(r.backend.backend) for name, r in readers.items()}, engines=engines,
                  argv=argv, decoding_notes=notes)
    shown = ', '.join(f'{k}={record[k]}' for k in ('datasets', 'readers', 'samples', 'seeds', 'quality', 'scorer',
                                                   'neural', 'bm25', 'ks', 'label_sets', 'rel_labels'))
    decoding = ', '.join(f'{k}={v!r}' for k, v in config.decoding.as_dict().items())
    say(f'pyterrier-utility {command}' + (f' (preset {config.preset})' if config.preset else '')
        + f': {shown}, {decoding}' + (f', base_urls={list(config.base_urls)}' if config.base_urls else '')
        + f'; settings in {out / "settings.json"}')
    sources = decoding_sources(config)
    if sources:
        record['decoding_sources'] = sources
        say(f'decoding of preset {config.preset}, each value and where it comes from:')
        for name, source in sources.items():
            say(f'  {name}={getattr(config.decoding, name)!r}: {source}')
    for reader, own in notes.items():
        say(f'{reader}: ' + '; '.join(f'{name}={getattr(config.decoding, name)!r} {how}' for name, how in own.items()))
    for name, r in readers.items():
        if list(r.stop) != list(config.decoding.stop):
            say(f'{name}: stops at {list(r.stop)!r} (prompt format {r.template.name!r}: '
                + ('its stop, then the decoding\'s)' if r.template.backend_stops else 'its stop alone)'))
    for name, engine in engines.items():
        say(f'{name}: {engine["reproducibility"]}'
            + (f'; engine settings {engine["settings"]}' if engine.get('settings') else ''))
        if engine.get('placement'):
            actors = engine['placement']['actors']
            say(f'{name}: on Ray, {len(actors)} replicas: ' + '; '.join(
                f"node {a['node_id'][:12]} ({a['ip']}): {a['device']}" for a in actors))
    return record


def engine_record(backend) -> dict:
    """What a run records of its engine: whether fresh generation is reproducible, the engine
    settings the backend chose (e.g. vLLM's CPU build without chunked prefill) and, on Ray, where it
    ran (the replicas, each one's node and device)."""
    record = {'reproducibility': getattr(backend, 'reproducibility', None)
              or 'not stated by the backend: answers reproducible from the generation cache only'}
    if getattr(backend, 'engine_settings', None):
        record['settings'] = dict(backend.engine_settings)
    if getattr(backend, 'placement', None):
        record['placement'] = dict(backend.placement)
    return record


def decoding_sources(config: StudyConfig) -> Dict[str, str]:
    """Where each decoding value of a preset's study comes from (``{}`` without a preset): the
    preset's source for a value left as the preset has it, else 'given' and the preset's value."""
    sources = DECODING_SOURCES.get(config.preset or '', {})
    if config.preset is None or not sources:
        return {}
    preset = PRESETS[config.preset].decoding
    return {name: sources.get(name, f'the preset {config.preset}')
            if getattr(config.decoding, name) == getattr(preset, name)
            else f'this run (the preset has {getattr(preset, name)!r})' for name in FIELDS}


def run(config: StudyConfig, argv: Optional[list] = None, **placement) -> Tuple[StudyResults, Optional[pd.DataFrame]]:
    """Runs the study of ``config`` (its generation cache in ``config.out``); returns the results
    (their ``settings`` what ``settings.json`` will hold) and, when COS-Mix is a system, its branch
    per query and k. ``placement``: where the readers run (:func:`build_reader`'s ``ray``,
    ``replicas``, ``replica_gpus``; none: in process)."""
    out = Path(config.out)
    check_out(out)
    collections = {name: load_collection(name, config) for name in config.datasets}
    bertscore = _scorer(config.scorer) if config.bertscore_needed else None
    readers = {r: build_reader(config, r, out / GENERATIONS_FILE, **placement) for r in config.readers}
    record = announce('study', config, readers, out, argv)
    record['studied_as'] = {name: {'label_sets': [str(x) for x in c.label_sets], 'systems': list(c.systems)}
                            for name, (_, _, _, c) in collections.items() if c != config}
    studies: List[StudyResults] = []
    branches = []
    for name, (dataset, qrels, topics, studied) in collections.items():
        systems = None
        for reader_name, reader in readers.items():
            if systems is None or 'COSMix' in config.systems:  # COS-Mix validates with its reader
                systems = build_systems(studied, name, dataset, qrels, topics, reader)
            say(f'{name}: {len(topics)} queries, systems {list(systems)}, reader {reader_name}')
            studies.append(run_study(topics, qrels, systems, reader, dataset.texts, ks=config.all_ks,
                                     label_sets=studied.label_sets, reverse=ranked_systems(config, systems),
                                     orderings=config.orderings, windows=config.study_windows,
                                     window_step=config.window_step,
                                     scorer_for=scorer_factory(config, dataset, qrels, bertscore),
                                     baseline='Rel' if 'Rel' in systems else None,
                                     ndcg_order=config.ndcg_order, dataset=name if len(collections) > 1 else None,
                                     reader_name=reader_name if len(readers) > 1 else None))
            if 'COSMix' in systems:
                cosmix = cast(COSMix, systems['COSMix'])
                branches.append(cosmix.branches().assign(dataset=name, reader=reader_name))
    results = StudyResults.concat(studies)
    results.settings = record
    return results, (pd.concat(branches, ignore_index=True) if branches else None)


def save(results: StudyResults, config: StudyConfig, cosmix_branches: Optional[pd.DataFrame] = None) -> List[str]:
    """Writes the settings, tables, frames, figures and report of a study into ``config.out``, all
    together in place of an earlier run's (see :mod:`~pyterrier_utility.experiment.output`);
    returns the file names."""
    with staged(Path(config.out)) as stage:
        settings = results.settings or dict(config.to_dict(), version=__version__)
        (stage / 'settings.json').write_text(json.dumps(settings, indent=2, sort_keys=True, default=str) + '\n')
        paths = results.save(stage, correction=config.correction, min_n=config.min_n, table_ks=config.ks)
        if cosmix_branches is not None:
            paths['cosmix_branches.csv'] = stage / 'cosmix_branches.csv'
            cosmix_branches.to_csv(paths['cosmix_branches.csv'], index=False)
        fig4_k = config.fig4_k if config.fig4_k in config.all_ks else max(config.ks)
        drawn = figures.draw_figures(blocks(results.per_query), stage, fig4_k, ndcg_order=config.ndcg_order,
                                     ks=config.figure_ks or config.ks)
        # The page is written in the staging folder; its title names the folder it is moved into.
        write_report(stage, title=config.title or TITLE.format(Path(config.out).resolve().name))
        return sorted(list(paths) + drawn + ['settings.json', 'report.html'])


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


def _scorer(name: str) -> BertScore:
    try:
        return BertScore(name, verbose=True)
    except Exception as e:  # any loading failure: the message says which model and why
        raise SettingError(f'--scorer {name!r} cannot be loaded ({type(e).__name__}: {e})') from None


def study(config: StudyConfig, argv: Optional[list] = None, **placement) -> StudyResults:
    """The ``study`` command: runs (in process, or where ``placement`` says: see :func:`run`), saves
    and prints Table 1 in the paper's layout."""
    start = time.time()
    with owned(Path(config.out)):
        results, branches = run(config, argv, **placement)
        written = save(results, config, branches)
    if branches is not None:
        share = branches.groupby('k')['branch'].apply(lambda b: (b == 'S').mean())
        say('COS-Mix fell back to the sparse documents for '
            + ', '.join(f'{share[k]:.0%} of queries at k={k}' for k in share.index))
    out = Path(config.out)
    print()
    print((out / 'table1_paper.md').read_text())
    cut = stats.truncation(results.answers)
    # Beside Table 1, not only in a warning: answers cut mid-sentence are scored as they are.
    print(f'{cut} ({config.decoding.max_new_tokens}; answers.csv says which, in its truncated column)' if cut
          else 'The engine did not say whether any answer was cut at max_new_tokens.')
    print(health.summary(read_health(out / HEALTH_FILE)))
    detail = health.control_detail(health.positive_control(results.table(correction=config.correction),
                                                           min_n=config.min_n))
    if detail:
        print(detail)
    print(f'written to {out}/ ({", ".join(written)}) in {time.time() - start:.0f} s; '
          f'{results.generated} answers generated')
    return results


def one_k(config: StudyConfig, argv: Optional[list] = None) -> pd.DataFrame:
    """The ``experiment`` command: the systems at one k as pipelines in ``pt.Experiment`` (nDCG@k,
    FBERT, FBERT0, Utility, t-tests against Rel); one dataset, one k, one label set."""
    for what, values in (('dataset', config.datasets), ('k', config.ks), ('label set', config.label_sets),
                         ('reader', config.readers)):
        if len(values) > 1:
            raise SettingError(f'experiment takes one {what}, got {len(values)} '
                               f'({", ".join(map(str, values))}); the study command takes several')
    start = time.time()
    out = Path(config.out)
    check_out(out)
    name, k = config.datasets[0], config.ks[0]
    dataset, qrels, topics, config = load_collection(name, config)
    reader = build_reader(config, config.readers[0], out / GENERATIONS_FILE)
    record = announce('experiment', config, {config.readers[0]: reader}, out, argv)
    (out / 'settings.json').write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + '\n')
    bertscore = _scorer(config.scorer) if config.bertscore_needed else None
    evaluate = UtilityEvaluator(reader, scorer_factory(config, dataset, qrels, bertscore)(config.label_sets[0]))
    systems = build_systems(config, name, dataset, qrels, topics, reader)
    pipelines = {}
    for s, system in systems.items():
        for label, ordering, first in variants(s, ranked_systems(config, systems), config.orderings,
                                               config.study_windows):
            cut = window(first, k, config.window_step)
            cut = system >> cut if cut is not None else system % k
            pipelines[label] = cut if ordering is None else cut >> ordering
    # Each system runs once; both evaluations below read its stored output.
    outputs = [pt.Transformer.from_df((p >> reader >> evaluate)(topics)) for p in pipelines.values()]
    metrics = [nDCG @ k, measures.FBERT, measures.FBERT0, measures.Utility]
    names = list(pipelines)
    table = pt.Experiment(outputs, topics, qrels, metrics, names=names,
                          baseline=names.index('Rel') if 'Rel' in names else None, round=4)
    per_query = pt.Experiment(outputs, topics, qrels, metrics, names=names, perquery=True)
    table.to_csv(out / 'experiment.csv', index=False)
    per_query.to_csv(out / 'per_query.csv', index=False)
    print(f'{name}: {len(topics)} queries, k={k}; significance vs Rel (paired t-test)')
    print(table.to_string(index=False))
    print(f'written to {out}/ in {time.time() - start:.0f} s ({reader.backend.generated} answers generated, '
          f'{len(reader.backend)} cached)')
    return table


def _recorded_ks(folder: Path) -> Optional[Tuple[List[int], List[int]]]:
    """The ks of Table 1 and of Figures 3 and 5 a study folder's ``settings.json`` records (``None``:
    no such file, or one without ``ks``)."""
    path = folder / 'settings.json'
    if not path.is_file():
        return None
    settings = json.loads(path.read_text())
    if 'ks' not in settings:
        return None
    return settings['ks'], settings.get('figure_ks') or settings['ks']


def report(folders, out: Path, correction: Optional[str] = None, fig4_k: int = StudyConfig.fig4_k,
           ndcg_order: str = StudyConfig.ndcg_order, html: bool = False, min_n: int = StudyConfig.min_n) -> List[str]:
    """Table 1 and Figures 3-5 again from the ``per_query.csv`` of saved study folders (several,
    e.g. one per dataset, make one table); nothing is generated. Table 1 is over the ``ks`` and
    Figures 3 and 5 over the ``figure_ks`` their ``settings.json`` record (every k where a folder has
    none). With ``html``, also each folder's browsable page (``report.html`` in ``out``, or
    ``NAME-report.html`` for several folders). Returns the file names."""
    frames, healths, table_ks, figure_ks = [], [], set(), set()
    for folder in folders:
        path = study_folder(folder) / 'per_query.csv'
        frame = read_per_query(path)
        if 'dataset' not in frame.columns:
            frame.insert(0, 'dataset', Path(folder).name)
        frames.append(frame)
        if (Path(folder) / HEALTH_FILE).is_file():
            found = read_health(Path(folder) / HEALTH_FILE)
            if 'dataset' not in found.columns:
                found.insert(0, 'dataset', Path(folder).name)
            healths.append(found)
        recorded = _recorded_ks(Path(folder))
        table_ks |= set(recorded[0] if recorded else frame['k'])
        figure_ks |= set(recorded[1] if recorded else frame['k'])
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
                         health=found)
    ks = sorted(set(per_query['k']))
    drawn = figures.draw_figures(blocks(per_query), out, fig4_k if fig4_k in ks else max(table_ks),
                                 ndcg_order=ndcg_order, ks=sorted(figure_ks))
    print(paths['table1_paper.md'].read_text())
    written = sorted(list(paths) + drawn)
    if html:
        for folder in folders:
            page = out / ('report.html' if len(folders) == 1 else f'{Path(folder).name}-report.html')
            written.append(write_report(folder, page).name)
    print(f'written to {out}/ ({", ".join(written)}); nothing generated')
    return written
