"""What predicts a finished study's utility and answer quality (Tian, Ganguly & Macdonald, ECIR 2026):
the signals of a study folder and their correlations with its targets, as frames. Nothing is generated.

It reads the folder (per_query.csv, answers.csv, contexts.csv, queries.csv, settings.json), runs the
study's retrieval systems again for their scores (the same index and re-ranker: the rankings must
give the study's contexts, or it stops), computes every signal of the
:class:`~pyterrier_utility.prediction.catalogue.Catalogue` per (label set, system, k, query), and
correlates each with U, the absolute gain P_k - P_0 and P_k (:mod:`.meta_evaluation`).

Example::

    from pyterrier_utility.study import prediction
    found = prediction.run_prediction('results/study')
    found.signals.groupby('system')[['nqc', 'utility']].corr(method='spearman')
"""
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union, cast

import numpy as np
import pandas as pd

from .._messages import inform
from ..datasets import get_dataset
from ..errors import FrameError, SettingError
from ..prediction.catalogue import Catalogue
from ..prediction.measures import ContextMeasure
from ..prediction.parameters import PredictionParameters
from ..prediction.terms import TermStatistics
from ..prediction.udcg import UDCG
from ..schema import FRAME_FILES, PREDICTION_COLUMNS, SETTINGS_FILE, SIGNALS_COLUMNS
from ..settings import LabelSet
from ..vocabulary import ORACLES, PREDICTION_TARGETS, REVERSED_SYSTEMS, ZERO_SHOT
from .config import StudyConfig
from .config_json import from_dict
from .folder import StudyFolder, read_study
from .meta_evaluation import LABELLED_CELL, combinations, grouped, meta_evaluate, notes
from .sweep import in_rank_order, variants
from .systems import default_systems

CELL = LABELLED_CELL[1:]


@dataclass
class Prediction:
    """What ``predict`` finds and writes.

    Attributes:
        signals: one row per label set, system, k and query: the targets and every signal
            (:data:`~pyterrier_utility.schema.SIGNALS_COLUMNS`, then a column per signal).
        prediction: one row per label set, level, system, k, signal and target
            (:data:`~pyterrier_utility.schema.PREDICTION_COLUMNS`).
        definitions: signal -> what it is and where it comes from (recorded in settings.json).
        settings: the parameters.
        left_out: system -> signal -> why the signal does not apply to the system (an oracle has no
            ranking scores); such a signal is NaN in the system's rows of ``signals`` and has no row of
            the system in ``prediction``.
        combined: system -> the signals its out-of-fold combination is over.
    """
    signals: pd.DataFrame
    prediction: pd.DataFrame
    definitions: Dict[str, str] = field(default_factory=dict)
    settings: PredictionParameters = field(default_factory=PredictionParameters)
    left_out: Dict[str, Dict[str, str]] = field(default_factory=dict)
    combined: Dict[str, List[str]] = field(default_factory=dict)


def _first(frame: pd.DataFrame, column: str, by: Sequence[str] = ('qid',)) -> pd.Series:
    """The query-level ``column`` of a predictor's output, one value per ``by``."""
    return frame.drop_duplicates(list(by)).set_index(list(by))[column]


def checked_config(study: StudyFolder) -> StudyConfig:
    """The config of the finished study folder ``study``, or a :class:`SettingError` naming what the
    folder lacks.

    Example::

        config = checked_config(read_study('results/study'))
    """
    for name in ('answers', 'contexts', 'queries'):
        if getattr(study, name) is None:
            raise SettingError(f'{study.path / FRAME_FILES[name]} does not exist: predict reads a finished study '
                               'folder')
    if study.settings is None:
        raise SettingError(f'{study.path / SETTINGS_FILE} does not exist: predict needs the study\'s settings')
    if study.named_datasets:
        raise SettingError(f'{study.path}: a study of several datasets or readers; predict reads one of each')
    return from_dict(study.settings)


def _rankings(config: StudyConfig, dataset, qrels: pd.DataFrame, topics: pd.DataFrame, contexts: pd.DataFrame,
              depth: int) -> Dict[str, pd.DataFrame]:
    """The ranking of each retrieval system of the study, run again, checked against its contexts."""
    bases = [s for s in REVERSED_SYSTEMS if s in config.systems]
    if not bases:
        return {}
    systems = default_systems(dataset, qrels, neural=config.neural, depth=depth, index=config.index,
                              bm25=config.bm25, verbose=config.verbose, reranker='Neural' in bases)
    rankings = {}
    for base in bases:
        ranking = in_rank_order(cast(pd.DataFrame, systems[base](topics)).astype({'qid': str}))
        for (k, qid), given in contexts[contexts['system'] == base].groupby(['k', 'qid']):
            now = ranking[ranking['qid'] == qid]['docno'].head(int(k)).tolist()
            if now != given.sort_values('position')['docno'].tolist():
                raise FrameError(f'{base} qid {qid}: its ranking run again ({now}) is not the study\'s context at '
                                 f"k={k} ({given['docno'].tolist()}): the index or re-ranker differs from the study's")
        rankings[base] = ranking
    return rankings


def _reader_model(config: StudyConfig):
    """The study's reader as an in-process model (a backend that is only given texts to score), or a
    :class:`SettingError` when it runs elsewhere."""
    from .. import backends
    name = config.readers[0]
    backend = backends.get_backend(name, **config.backend_options(name))
    if not isinstance(backend, backends.CausalLMBackend):
        raise SettingError(f'--perplexity and --udcg need a reader whose model runs in process (an offline reader '
                           f'or huggingface:MODEL); the study\'s is {name!r}')
    return backend


def _confidences(answers: pd.DataFrame, catalogue: Catalogue) -> Tuple[List[pd.DataFrame], pd.Series, bool]:
    """The answers' confidence: the k-shot one per (system, k, query), the 0-shot one per query, and
    whether the reader gave a log-probability."""
    (confidence, _), (zero, _) = catalogue.answers
    if 'mean_logprob' not in answers.columns or answers['mean_logprob'].isna().all():
        return [], pd.Series(np.nan, index=answers['qid'].unique()), False
    reader_level = [_first(confidence(cell), confidence.column).reset_index().assign(system=system, k=k)
                    for (system, k), cell in answers[answers['system'] != ZERO_SHOT].groupby(['system', 'k'])]
    return reader_level, _first(zero(answers[answers['system'] == ZERO_SHOT]), zero.column), True


def _unscored(system: str) -> str:
    """Why the ranking-score signals do not apply to ``system``."""
    if system in ORACLES:
        return 'an oracle\'s documents are drawn from the judgements, with no retrieval score'
    return f'predict runs only {" and ".join(REVERSED_SYSTEMS)} again for their ranking scores'


def study_signals(study: StudyFolder, config: StudyConfig, settings: PredictionParameters,
                  verbose: bool = True) -> Prediction:
    """Every signal of every (label set, system, k, query) of the finished study folder ``study``, and
    the targets; ``prediction`` is left empty (:func:`run_prediction` fills it).

    Args:
        study: the folder read (:func:`~.folder.read_study`).
        config: its config (:func:`checked_config`).
        settings: which signals (``perplexity``, ``udcg``) and their parameters.
        verbose: progress bars.

    Example::

        study = read_study('results/study')
        found = study_signals(study, checked_config(study), PredictionParameters())
        found.signals[['system', 'k', 'qid', 'utility', 'nqc']]
    """
    backend = _reader_model(config) if settings.perplexity or settings.udcg else None  # refused before any work
    name = config.datasets[0]
    dataset = get_dataset(name)
    qrels = dataset.get_qrels().astype({'qid': str, 'docno': str})
    queries, given, answers = (cast(pd.DataFrame, f) for f in (study.queries, study.contexts, study.answers))
    topics = queries[['qid', 'query']].astype({'qid': str})
    contexts = given[given['docno'] != ''].astype({'k': int, 'position': int}).merge(topics, on='qid')
    answers = answers.astype({'k': int})
    from pyterrier_pisa.stopwords import _STOPWORDS  # the stopwords of this package's PISA index
    statistics = TermStatistics.from_texts(dataset.texts.values(), stopwords=_STOPWORDS['terrier'], name=name,
                                           verbose=verbose)
    catalogue = Catalogue.of(statistics, settings, max(config.all_ks), backend, verbose)
    query_level = topics.set_index('qid')
    for predictor, _ in catalogue.query:
        query_level[predictor.column] = _first(predictor(topics), predictor.column)
    ranking_level = []
    for base, ranking in _rankings(config, dataset, qrels, topics, contexts, settings.depth).items():
        values = pd.DataFrame({p.column: _first(p(ranking), p.column) for p, _ in catalogue.ranking})
        for label, _, _ in variants(base, [base], config.orderings, config.study_windows):
            ranking_level.append(values.assign(system=label).reset_index())
    systems = list(dict.fromkeys(study.per_query['system']))
    has_scores = {f['system'].iloc[0] for f in ranking_level}
    scored = [p.column for p, _ in catalogue.ranking]
    left_out = {s: dict.fromkeys(scored, _unscored(s)) for s in systems if s not in has_scores}
    context_level = []
    for (system, k), cell in contexts.groupby(['system', 'k'], sort=False):
        cell = cell.sort_values(['qid', 'position']).assign(rank=lambda f: f['position'] - 1,
                                                            score=lambda f: -f['position'].astype(float))
        values = pd.DataFrame({p.column: _first(p(cell), p.column) for p, _ in catalogue.context})
        context_level.append(values.assign(system=system, k=k).reset_index())
    reader_level, zero_shot, confident = _confidences(answers, catalogue)
    if not confident:
        no_logprob = f'{study.path / FRAME_FILES["answers"]} has no mean_logprob: the reader gave no log-probability'
        for system in systems:
            left_out.setdefault(system, {}).update(dict.fromkeys((p.column for p, _ in catalogue.answers),
                                                                 no_logprob))

    per_query = study.per_query.drop(columns=['dataset']).astype({'qid': str})
    signals = per_query.assign(gain=per_query['quality'] - per_query['quality_0shot'])
    signals = signals.rename(columns={'ndcg': 'nDCG@k'})
    signals = signals.merge(query_level.drop(columns='query').reset_index(), on='qid', how='left')
    for frame, on in ((ranking_level, ['system', 'qid']), (context_level, CELL), (reader_level, CELL)):
        if frame:
            signals = signals.merge(pd.concat(frame, ignore_index=True), on=on, how='left')
    signals['confidence_0shot'] = signals['qid'].map(zero_shot)
    if catalogue.no_response is not None:
        contexts = catalogue.no_response(contexts)
    measures = context_measures(contexts, qrels, signals[LABELLED_CELL[:-1]].drop_duplicates())
    signals = signals.merge(measures, on=LABELLED_CELL, how='left')
    definitions = catalogue.definitions
    signals = signals.reindex(columns=list(SIGNALS_COLUMNS) + list(definitions))
    return Prediction(signals, pd.DataFrame(columns=list(PREDICTION_COLUMNS)), definitions, settings, left_out)


def context_measures(contexts: pd.DataFrame, qrels: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """P@k, AP@k and RR@k of each context, per label set (a document relevant as the label set says), and
    its UDCG where ``contexts`` has the reader's ``no_response``.

    Example::

        cells = pd.DataFrame({'labels': ['label>=1'], 'system': ['BM25'], 'k': [2]})
        context_measures(contexts, qrels, cells)  # labels, system, k, qid, P@k, AP@k, RR@k
    """
    frames = []
    for labels in cells['labels'].unique():
        binary = qrels.assign(label=LabelSet.parse(labels).contains(qrels['label']).astype(int))
        for system, k in cells[cells['labels'] == labels][['system', 'k']].itertuples(index=False):
            cell = contexts[(contexts['system'] == system) & (contexts['k'] == k)].sort_values(['qid', 'position'])
            cell = cell.assign(rank=cell['position'] - 1, score=-cell['position'].astype(float))
            values = {f'{m}@k': _first(ContextMeasure(binary, f'{m}@{k}')(cell), f'{m}@{k}') for m in ('P', 'AP', 'RR')}
            if 'no_response' in cell.columns:
                values[UDCG.column] = _first(UDCG(binary)(cell), UDCG.column)
            frames.append(pd.DataFrame(values).reset_index().assign(labels=labels, system=system, k=k))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=LABELLED_CELL)


def run_prediction(out: Union[str, Path], settings: PredictionParameters = PredictionParameters(),
                   verbose: bool = True) -> Prediction:
    """The signals of the study folder ``out`` and their correlations with its targets; nothing is
    generated. A signal that does not apply to a system is left out of its rows, and a line says why.

    Example::

        found = run_prediction('results/study', PredictionParameters(folds=3))
        found.prediction[found.prediction['target'] == 'utility']
    """
    study = read_study(out)
    config = checked_config(study)
    found = study_signals(study, config, settings, verbose)
    names = list(found.definitions)
    found.combined = combinations(list(dict.fromkeys(found.signals['system'])), names, settings, found.left_out)
    inform(f'{len(found.signals)} rows, {len(names)} signals; correlating with {list(PREDICTION_TARGETS)}')
    for line in notes(grouped(found.left_out, found.combined)):
        inform(line)
    found.prediction = meta_evaluate(found.signals, names, settings, found.left_out, found.combined)
    return found
