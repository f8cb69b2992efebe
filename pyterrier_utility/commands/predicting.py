"""The ``predict`` command: which signals, available before or without generating, predict a study's
utility and answer quality (Tian, Ganguly & Macdonald, ECIR 2026), over a finished study folder.

It reads the folder (per_query.csv, answers.csv, contexts.csv, queries.csv, settings.json), runs the
study's retrieval systems again for their scores (the same index and re-ranker: the rankings must
give the study's contexts, or it stops), computes every signal of :mod:`pyterrier_utility.prediction`
per (label set, system, k, query), and correlates each with U, the absolute gain P_k - P_0 and P_k
(:mod:`pyterrier_utility.prediction.evaluation`). No answer is generated: no reader is built.

Example::

    from pyterrier_utility.commands import predicting as prediction
    found = prediction.run_prediction('results/study')
    prediction.save_prediction(found, 'results/study')
"""
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union, cast

import numpy as np
import pandas as pd

from .._messages import inform
from ..datasets import get_dataset
from ..errors import FrameError, SettingError
from ..prediction import (
    NQC,
    SCQ,
    SMV,
    WIG,
    AnswerConfidence,
    APairRatio,
    AuthorsNQC,
    ContextMeasure,
    ContextPerplexity,
    MaxIDF,
    MaxScore,
    MeanIDF,
    NoResponse,
    Readability,
    Spatial,
    TermStatistics,
)
from ..prediction.parameters import PredictionParameters
from ..prediction.perplexity import PERPLEXITY_AGGREGATIONS
from ..prediction.readability import READABILITY
from ..prediction.udcg import UDCG
from ..report.figures import pyplot
from ..report.html import write_report
from ..report.prediction_report import HEATMAP, prediction_heatmap
from ..schema import FRAME_FILES, PREDICTION_COLUMNS, PREDICTION_FILES, REPORT_FILE, SETTINGS_FILE, SIGNALS_COLUMNS
from ..settings import LabelSet
from ..study.config import StudyConfig
from ..study.config_json import from_dict
from ..study.folder import StudyFolder, read_study
from ..study.meta_evaluation import LABELLED_CELL, combinations, grouped, meta_evaluate, notes, summary
from ..study.output import lock_folder
from ..study.sweep import in_rank_order, variants
from ..study.systems import default_systems
from ..vocabulary import ORACLES, PREDICTION_TARGETS, REVERSED_SYSTEMS, ZERO_SHOT

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


def _checked(study: StudyFolder) -> StudyConfig:
    """The study's config, or a :class:`SettingError` naming what the folder lacks."""
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


def _confidences(answers: pd.DataFrame, describe) -> Tuple[List[pd.DataFrame], pd.Series, List[str]]:
    """The answers' confidence: the k-shot one per (system, k, query), the 0-shot one per query, and
    the two columns where the reader gave a log-probability (none where it gave none)."""
    confidence, zero = AnswerConfidence(), AnswerConfidence('confidence_0shot')
    columns = [describe(confidence, 'mean over samples of the k-shot answers\' mean token log-probability'),
               describe(zero, 'the same of the 0-shot answers')]
    if 'mean_logprob' not in answers.columns or answers['mean_logprob'].isna().all():
        return [], pd.Series(np.nan, index=answers['qid'].unique()), []
    reader_level = [_first(confidence(cell), confidence.column).reset_index().assign(system=system, k=k)
                    for (system, k), cell in answers[answers['system'] != ZERO_SHOT].groupby(['system', 'k'])]
    return reader_level, _first(zero(answers[answers['system'] == ZERO_SHOT]), zero.column), columns


def _unscored(system: str) -> str:
    """Why the ranking-score signals do not apply to ``system``."""
    if system in ORACLES:
        return 'an oracle\'s documents are drawn from the judgements, with no retrieval score'
    return f'predict runs only {" and ".join(REVERSED_SYSTEMS)} again for their ranking scores'


def study_signals(study: StudyFolder, config: StudyConfig, settings: PredictionParameters,
                  verbose: bool = True) -> Prediction:
    """Every signal of every (label set, system, k, query) of ``study``, and the targets."""
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
    definitions: Dict[str, str] = {}

    def describe(transformer, text: str) -> str:
        definitions[transformer.column] = f'{text}; {transformer!r}'
        return transformer.column

    # Before retrieval: the query's terms.
    query_level = topics.set_index('qid')
    for predictor, text in ((MaxIDF(statistics), 'max log(N/df) of the query terms (He & Ounis 2004)'),
                            (MeanIDF(statistics), 'mean log(N/df) of the query terms (He & Ounis 2004)'),
                            (SCQ(statistics, 'max'), 'MaxSCQ (Zhao, Scholer & Tsegay, ECIR 2008)')):
        query_level[describe(predictor, text)] = _first(predictor(topics), predictor.column)
    # Over each retrieval system's ranking, whatever the context's k and order.
    ranking_level = []
    a_pair = APairRatio(settings.apair_k, verbose=verbose)
    ranked = [(NQC(settings.depth), 'std of the top scores / |mean score of the ranking| (Shtok et al., TOIS 2012)'),
              (AuthorsNQC(statistics, settings.depth), "variance of the top scores x max BM25 IDF (the authors' code)"),
              (WIG(settings.wig_k), 'WIG (Zhou & Croft, SIGIR 2007), mean score of the ranking as score(D)'),
              (SMV(settings.depth), 'SMV (Tao & Wu, CIKM 2014), mean score of the ranking as score(D)'),
              (MaxScore(), 'the top score'),
              (a_pair, "A-Pair-Ratio, MiniLM embeddings (the authors' code)")]
    scored = [describe(p, text) for p, text in ranked]
    for base, ranking in _rankings(config, dataset, qrels, topics, contexts, settings.depth).items():
        values = pd.DataFrame({p.column: _first(p(ranking), p.column) for p, _ in ranked})
        for label, _, _ in variants(base, [base], config.orderings, config.study_windows):
            ranking_level.append(values.assign(system=label).reset_index())
    systems = list(dict.fromkeys(study.per_query['system']))
    has_scores = {f['system'].iloc[0] for f in ranking_level}
    left_out = {s: dict.fromkeys(scored, _unscored(s)) for s in systems if s not in has_scores}
    # Over each context as the reader saw it.
    context_level = []
    on_context = [(Spatial(k=max(config.all_ks)).sharing(a_pair), "-log volume of the box of query and context "
                   "embeddings, MiniLM (the authors' code)")]
    on_context += [(Readability(f), f'textstat {READABILITY[f]} of the context joined') for f in READABILITY]
    if settings.perplexity:
        scorers = [ContextPerplexity(backend, agg, verbose=verbose) for agg in PERPLEXITY_AGGREGATIONS]
        on_context += [(p.sharing(scorers[0]), f"the reader's perplexity of the context's documents ({p.agg}) by a "
                        'forward pass') for p in scorers]
    for (system, k), cell in contexts.groupby(['system', 'k'], sort=False):
        cell = cell.sort_values(['qid', 'position']).assign(rank=lambda f: f['position'] - 1,
                                                            score=lambda f: -f['position'].astype(float))
        values = pd.DataFrame({describe(p, text): _first(p(cell), p.column) for p, text in on_context})
        context_level.append(values.assign(system=system, k=k).reset_index())
    reader_level, zero_shot, confident = _confidences(answers, describe)
    if not confident:
        no_logprob = f'{study.path / FRAME_FILES["answers"]} has no mean_logprob: the reader gave no log-probability'
        for system in systems:
            left_out.setdefault(system, {}).update(dict.fromkeys(('answer_confidence', 'confidence_0shot'),
                                                                 no_logprob))

    per_query = study.per_query.drop(columns=['dataset']).astype({'qid': str})
    signals = per_query.assign(gain=per_query['fbert'] - per_query['fbert_0shot']).rename(columns={'ndcg': 'nDCG@k'})
    definitions['nDCG@k'] = "the study's nDCG@k of the context (per_query.csv)"
    signals = signals.merge(query_level.drop(columns='query').reset_index(), on='qid', how='left')
    for frame, on in ((ranking_level, ['system', 'qid']), (context_level, CELL), (reader_level, CELL)):
        if frame:
            signals = signals.merge(pd.concat(frame, ignore_index=True), on=on, how='left')
    signals['confidence_0shot'] = signals['qid'].map(zero_shot)
    if settings.udcg:
        contexts = NoResponse(backend, verbose=verbose)(contexts)
        definitions[UDCG.column] = ("UDCG (Trappolini et al., EACL 2026): sigmoid of the mean over the context's "
                                    'documents of w (1 - p(NO-RESPONSE | query, document alone)), w = 1 relevant as '
                                    'the label set says, -1/3 otherwise; the reader by a forward pass')
    measures = _context_measures(contexts, qrels, signals[LABELLED_CELL[:-1]].drop_duplicates())
    for measure in ('P', 'AP', 'RR'):
        definitions[f'{measure}@k'] = f'ir_measures {measure}@k of the context, relevant as the label set says'
    signals = signals.merge(measures, on=LABELLED_CELL, how='left')
    signals = signals.reindex(columns=list(SIGNALS_COLUMNS) + list(definitions))
    return Prediction(signals, pd.DataFrame(columns=list(PREDICTION_COLUMNS)), definitions, settings, left_out)


def _context_measures(contexts: pd.DataFrame, qrels: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """P@k, AP@k and RR@k of each context, per label set (a document relevant as the label set says), and
    its UDCG where ``contexts`` has the reader's ``no_response``."""
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
    generated. A signal that does not apply to a system is left out of its rows, and a line says why."""
    study = read_study(out)
    config = _checked(study)
    found = study_signals(study, config, settings, verbose)
    names = list(found.definitions)
    found.combined = combinations(list(dict.fromkeys(found.signals['system'])), names, settings, found.left_out)
    inform(f'{len(found.signals)} rows, {len(names)} signals; correlating with {list(PREDICTION_TARGETS)}')
    for line in notes(grouped(found.left_out, found.combined)):
        inform(line)
    found.prediction = meta_evaluate(found.signals, names, settings, found.left_out, found.combined)
    return found


def save_prediction(found: Prediction, out: Union[str, Path]) -> List[str]:
    """Writes ``signals.csv``, ``prediction.csv`` and the heatmap (:data:`.prediction_report.HEATMAP`)
    into ``out``, records the signals, their parameters, those left out of each system and why, and
    each system's combination in its ``settings.json`` (under ``prediction``) and writes the study's
    ``report.html`` again with them; returns the file names."""
    out = Path(out)
    with lock_folder(out):
        found.signals.to_csv(out / PREDICTION_FILES['signals'], index=False)
        found.prediction.to_csv(out / PREDICTION_FILES['prediction'], index=False)
        record = json.loads((out / SETTINGS_FILE).read_text())
        record['prediction'] = dict(found.settings.as_dict(), signals=found.definitions,
                                    **grouped(found.left_out, found.combined),
                                    targets=dict(zip(PREDICTION_TARGETS, ('(P_k - P_0) / P_0', 'P_k - P_0', 'P_k'))))
        (out / SETTINGS_FILE).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + '\n')
        written = list(PREDICTION_FILES.values()) + [SETTINGS_FILE]
        if len(found.prediction):
            pyplot().close(prediction_heatmap(found.prediction, out / HEATMAP))
            written.append(HEATMAP)
        if (out / FRAME_FILES['per_query']).is_file():  # a study's folder: its page gains the section
            write_report(out)
            written.append(REPORT_FILE)
    return sorted(written)


def predict(out: Union[str, Path], settings: PredictionParameters = PredictionParameters()) -> Prediction:
    """The ``predict`` command: runs, saves and prints the summary."""
    start = time.time()
    with lock_folder(Path(out)):
        found = run_prediction(out, settings)
        written = save_prediction(found, out)
    print(summary(found.prediction))
    print(f'written to {out}/ ({", ".join(written)}) in {time.time() - start:.0f} s; 0 answers generated')
    return found
