"""What every command prepares from its config, written once: the collections (dataset, qrels,
topics answerable under the label sets), the readers behind the folder's generation cache, the
settings record and its announcement, the scorer of P under each label set, and the systems.

``study``, ``experiment`` and ``attribute`` start from :func:`prepare`; ``predict`` and ``report``
read a finished folder and take only the parts they need (:func:`build_systems`' collection, the
recorded config).

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
from typing import Any, Callable, Dict, List, Optional

import pandas as pd
import pyterrier as pt

from .. import backends
from .._messages import inform
from .._version import __version__
from ..cache import GenerationCache
from ..cache.keys import backend_key
from ..contexts.runs import RunFile
from ..datasets import get_dataset
from ..engines import engine_of
from ..errors import SettingError
from ..methods.cosmix import cosmix_system
from ..protocols import AnswerScorer
from ..reader import Reader
from ..scoring.bertscore import BertScore
from ..scoring.fbert import FBertScorer
from ..scoring.gold import GOLD_QUALITIES, GoldAnswerScorer
from ..settings import FIELDS, LabelSet, Placement
from ..vocabulary import GENERATIONS_FILE
from .config import StudyConfig
from .config_json import to_dict
from .output import check_out
from .presets import DECODING_SOURCES, PRESETS
from .systems import DEFAULT_SYSTEMS, REVERSED_SYSTEMS, default_systems


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


@dataclass
class Prepared:
    """What a running command starts from (:func:`prepare`).

    Attributes:
        config: the command's config.
        collections: each dataset of the config, by name.
        readers: each reader of the config, by name, behind the folder's generation cache.
        record: what ``settings.json`` holds (:func:`print_settings`'s, with ``studied_as`` for a
            collection studied under other label sets or systems).
        bertscore: the BERTScore model P is computed with (``None`` where the quality needs none).
    """
    config: StudyConfig
    collections: Dict[str, Collection]
    readers: Dict[str, Reader]
    record: dict
    bertscore: Optional[BertScore]

    def scorer_for(self, collection: Collection) -> Callable[[LabelSet], AnswerScorer]:
        """The scorer of P under each label set for ``collection`` (:func:`scorer_factory`)."""
        return scorer_factory(collection.config, collection.dataset, collection.qrels, self.bertscore)

    def systems(self, collection: Collection, reader: Reader) -> Dict[str, pt.Transformer]:
        """The systems of ``collection``'s config (:func:`build_systems`)."""
        return build_systems(collection.config, collection.name, collection.dataset, collection.qrels,
                             collection.topics, reader)


def prepare(config: StudyConfig, command: str, argv: Optional[list] = None,
            placement: Placement = Placement()) -> Prepared:
    """Everything ``command`` runs from ``config``: its folder checked, the collections loaded, the
    BERTScore model, the readers (where ``placement`` says: :func:`build_reader`), the settings
    announced and recorded."""
    out = Path(config.out)
    check_out(out)
    collections = {name: load_collection(name, config) for name in config.datasets}
    bertscore = load_scorer(config.scorer) if config.bertscore_needed else None
    readers = {r: build_reader(config, r, out / GENERATIONS_FILE, placement) for r in config.readers}
    record = print_settings(command, config, readers, out, argv)
    record['studied_as'] = {name: {'label_sets': [str(x) for x in c.config.label_sets],
                                   'systems': list(c.config.systems)}
                            for name, c in collections.items() if c.config != config}
    return Prepared(config, collections, readers, record, bertscore)


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
    if config.quality in GOLD_QUALITIES:
        answerable &= set(dataset.gold_answers())
    topics = dataset.get_topics()
    topics = topics[topics['qid'].astype(str).isin(answerable)].reset_index(drop=True)
    if config.queries:
        topics = topics.head(config.queries)
    return Collection(name, dataset, qrels, topics, config)


def build_reader(config: StudyConfig, name: str, cache_path: Optional[Path] = None,
                 placement: Placement = Placement()) -> Reader:
    """The reader ``name`` of the config: its backend (every decoding setting in it) behind a
    generation cache (one file for every reader: keys hold the model), where ``placement`` says: on a Ray
    cluster, in its ``replicas`` Ray actors of ``replica_gpus`` GPUs each
    (:class:`~pyterrier_utility.backends.RayBackend`); a reader computed on this CPU, in ``replicas``
    threads of this process, each computing on one torch thread
    (:class:`~pyterrier_utility.backends.ThreadBackend`; by default one per thread torch would use); else in
    this process. Its answers and cache keys are the same everywhere."""
    options = config.backend_options(name)
    if placement.ray:
        backend = backends.RayBackend(name, placement.replicas or 1, num_gpus=placement.replica_gpus,
                                      address=placement.ray, **options)
    elif engine_of(name).on_cpu:
        replicas = placement.replicas or backends.cpu_replicas()
        backend = (backends.ThreadBackend(name, replicas, **options) if replicas > 1
                   else backends.get_backend(name, **options))
    else:
        if (placement.replicas or 1) > 1:
            raise SettingError(f'--replicas {placement.replicas} without --ray: replicas are for readers '
                               f'computed on this CPU (offline, huggingface:), not {name!r}; give --ray to run it '
                               'on Ray actors')
        backend = backends.get_backend(name, **options)
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
            inform(f'{name}: run {run_name} ranks none of its queries; left out')
    return {s: systems[s] for s in list(config.systems) + [r for r, _ in config.runs] if s in systems}


def ranked_systems(config: StudyConfig, systems) -> List[str]:
    """The systems also reported in other orderings and windows: the retrievers and the saved runs."""
    return [s for s in systems if s in REVERSED_SYSTEMS or s in dict(config.runs)]


def print_settings(command: str, config: StudyConfig, readers: Dict[str, Reader], out: Path,
                   argv: Optional[list] = None) -> dict:
    """Prints the settings; returns them whole, with each backend as built, for ``settings.json``."""
    first = next(iter(readers.values()))
    # The stops each reader uses: its prompt format's, then the decoding's where the format takes them.
    engines = {name: dict(engine_record(r.backend), stop=list(r.stop)) for name, r in readers.items()}
    own = {name: config.decoding_for(name) for name in readers if config.decoding_for(name) != config.decoding}
    for name, theirs in own.items():
        engines[name]['decoding'] = theirs.as_dict()
    notes = config.decoding_notes()
    record = dict(to_dict(config), command=command, version=__version__, seeds=first.seeds(),
                  backends={name: backend_key(r.backend) for name, r in readers.items()}, engines=engines,
                  argv=argv, decoding_notes=notes)
    shown = ', '.join(f'{k}={record[k]}' for k in ('datasets', 'readers', 'samples', 'seeds', 'quality', 'scorer',
                                                   'neural', 'bm25', 'ks', 'label_sets', 'rel_labels'))
    decoding = ', '.join(f'{k}={v!r}' for k, v in config.decoding.as_dict().items())
    urls = config.engine.base_urls
    inform(f'pyterrier-utility {command}' + (f' (preset {config.preset})' if config.preset else '')
           + f': {shown}, {decoding}' + (f', base_urls={list(urls)}' if urls else '')
           + f'; settings in {out / "settings.json"}')
    sources = decoding_sources(config)
    if sources:
        record['decoding_sources'] = sources
        inform(f'decoding of preset {config.preset}, each value and where it comes from:')
        for name, source in sources.items():
            inform(f'  {name}={getattr(config.decoding, name)!r}: {source}')
    for name, theirs in own.items():
        changed = {k: v for k, v in theirs.as_dict().items() if v != config.decoding.as_dict()[k]}
        inform(f'{name}: its own ' + ', '.join(f'{k}={v!r}' for k, v in changed.items())
               + ' (what this reader needs; given explicitly, ' + ', '.join(f'--{k.replace("_", "-")}' for k in changed)
               + ' sets every reader\'s)')
    for reader, own_way in notes.items():
        inform(f'{reader}: ' + '; '.join(f'{name}={getattr(config.decoding, name)!r} {how}'
                                            for name, how in own_way.items()))
    for name, r in readers.items():
        if list(r.stop) != list(config.decoding.stop):
            inform(f'{name}: stops at {list(r.stop)!r} (prompt format {r.template.name!r}: '
                   + ('its stop, then the decoding\'s)' if r.template.backend_stops else 'its stop alone)'))
    for name, engine in engines.items():
        inform(f'{name}: {engine["reproducibility"]}'
               + (f'; engine settings {engine["settings"]}' if engine.get('settings') else ''))
        if engine.get('placement', {}).get('runner') == 'ray':
            actors = engine['placement']['actors']
            inform(f'{name}: on Ray, {len(actors)} replicas: ' + '; '.join(
                   f"node {a['node_id'][:12]} ({a['ip']}): {a['device']}" for a in actors))
        elif engine.get('placement'):
            actors = engine['placement']['actors']
            cpu = actors[0]['device'].split(',')[0]
            runner = engine['placement']['runner']
            inform(f'{name}: {len(actors)} replica {runner} of one torch thread each, on {cpu}')
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


def load_scorer(name: str) -> BertScore:
    """The BERTScore model ``name``, or a :class:`SettingError` naming it and why it cannot be loaded."""
    try:
        return BertScore(name, verbose=True)
    except Exception as e:  # any loading failure: the message says which model and why
        raise SettingError(f'--scorer {name!r} cannot be loaded ({type(e).__name__}: {e})') from None
