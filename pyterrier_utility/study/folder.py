"""A study folder read back: its CSV files checked column by column, the optional ones when present.

The study writes (``dataset`` first only in a study over several collections):

- ``per_query.csv``: labels, system, k, qid, n_docs, ndcg, quality_0shot, quality, utility (required);
- ``answers.csv``: system (``'0-shot'`` with k 0 for the answers without context), k, qid, sample, qanswer
  (and, from studies that record them, logprob, mean_logprob, truncated: empty where unknown, see
  ``OPTIONAL``);
- ``scores.csv``: labels, system, k, qid, sample, quality, best_docno (P of each answer; a study
  from before these names holds ``fbert`` and ``fbert_0shot``, read as ``quality`` and ``quality_0shot``);
- ``contexts.csv``: system, k, qid, position (1-based, the reader's order), docno, label (empty:
  unjudged), text (after the ``transfer`` command, also each reader's oracle, system ``Util:<reader>``);
- ``queries.csv``: qid, query;
- ``health.csv``: system, k, answers, empty, cut, copied, mean_tokens (:mod:`.health`);
- ``correlations.csv`` and, when the answers carry log-probabilities, ``confidence_correlations.csv``:
  (labels, system, k, method, r, p, n);
- ``settings.json``, ``table1_paper.md`` and the figures ``fig*.png``;

and, from the ``attribute`` command (one dataset, so no ``dataset`` column whatever the study's):

- ``coalitions.csv``: labels, system, k, qid, coalition, value;
- ``attribution.csv``: labels, system, k, qid, position, docno, phi, phi_utility, method, stderr, relevant.
"""
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Mapping, Optional, Union

import pandas as pd

from ..errors import FrameError, SettingError
from ..qualities import DEFAULT_QUALITY, quality_of
from ..schema import ANSWER_INFO, ATTRIBUTION_FILES, CSV_COLUMNS, FRAME_FILES, MISSING, SETTINGS_FILE
from ..vocabulary import UTILITY_GAINS
from .stats import block_heading
from .validate import read_per_query, with_current_names

#: Per file: columns read when present (studies before them lack them), as ``'number'`` (NaN where
#: empty) or ``'flag'`` (True, False, or None where empty: the engine did not say).
OPTIONAL = {FRAME_FILES['answers']: ANSWER_INFO}
FLAGS = {'True': True, 'False': False, **{text: None for text in MISSING + ('None',)}}


@dataclass
class StudyFolder:
    """The frames and files of a study folder; an optional file that is absent is ``None``.

    Attributes:
        path: the folder.
        per_query, answers, scores, contexts, queries, correlations, confidence_correlations, health,
            coalitions, attribution: the CSV files as frames, each with a ``dataset`` column ('' for a
            study over one collection, and for the attribute command's files).
        settings: ``settings.json``.
        table1: ``table1_paper.md``.
        figures: file name -> PNG bytes of each ``fig*.png``.
        named_datasets: whether the files name their dataset (a study over several collections or readers).
        block: what heads the ``dataset`` column where it is shown: ``'Dataset'``, ``'Reader'`` (a study of
            several readers) or ``'Dataset · reader'`` (:func:`~.stats.block_heading`).
        gain: what ``per_query``'s ``utility`` holds (:data:`~pyterrier_utility.vocabulary.UTILITY_GAINS`): the
            gain settings.json records, the study's own.
    """
    path: Path
    per_query: pd.DataFrame
    answers: Optional[pd.DataFrame] = None
    scores: Optional[pd.DataFrame] = None
    contexts: Optional[pd.DataFrame] = None
    queries: Optional[pd.DataFrame] = None
    correlations: Optional[pd.DataFrame] = None
    confidence_correlations: Optional[pd.DataFrame] = None
    health: Optional[pd.DataFrame] = None
    coalitions: Optional[pd.DataFrame] = None
    attribution: Optional[pd.DataFrame] = None
    settings: Optional[dict] = None
    table1: Optional[str] = None
    figures: Dict[str, bytes] = field(default_factory=dict)
    named_datasets: bool = False
    block: str = 'Dataset'
    gain: str = UTILITY_GAINS[0]

    @property
    def quality_name(self) -> str:
        """What P is called: the measure of the quality ``settings.json`` records (FBERT where it records none)."""
        return quality_of((self.settings or {}).get('quality', DEFAULT_QUALITY)).measure


def read_csv(path: Path, has_dataset: Optional[bool] = None) -> pd.DataFrame:
    """One of the study's CSV files, its columns checked: text columns as str ('' where empty),
    number columns as float (NaN where empty); the error names the file, row and column at fault.

    Args:
        path: the file; its name selects the columns expected (see
            :data:`~pyterrier_utility.schema.CSV_COLUMNS`); ``per_query.csv`` is read by
            :func:`~.validate.read_per_query`, every line checked.
        has_dataset: whether the file must have (``True``) or must not have (``False``) a ``dataset``
            column, as ``per_query.csv`` does; ``None``: either.

    Example::

        per_query = read_csv(Path('results/study/per_query.csv'))
    """
    needed, numbers = CSV_COLUMNS[path.name]
    header = _header(path, needed)
    if has_dataset is not None and bool({'dataset', 'reader'} & set(header)) != has_dataset:
        raise FrameError(f"{path}: {'no' if has_dataset else 'a'} column 'dataset', unlike per_query.csv")
    frame = read_per_query(path) if path.name == FRAME_FILES['per_query'] else _read_typed(path, numbers)
    if 'reader' in frame.columns:  # a study of several readers: a block per dataset and reader
        prefix = frame['dataset'] + ' · ' if 'dataset' in frame.columns else ''
        frame = frame.drop(columns=['dataset'], errors='ignore').assign(dataset=prefix + frame['reader'])
        frame = frame[['dataset'] + [c for c in frame.columns if c not in ('dataset', 'reader')]]
    if 'dataset' not in frame.columns:
        frame.insert(0, 'dataset', '')
    return frame


def read_health(path: Path) -> pd.DataFrame:
    """A ``health.csv`` as written (``dataset`` and ``reader`` where the study named them), its
    columns checked as :func:`read_csv` checks them."""
    needed, numbers = CSV_COLUMNS[path.name]
    _header(path, needed)
    return _read_typed(path, numbers)


def _header(path: Path, needed) -> pd.Index:
    """The columns of a CSV file, or a :class:`FrameError` naming those of ``needed`` it lacks."""
    header = pd.Index(with_current_names(pd.read_csv(path, nrows=0).columns))
    missing = [c for c in needed if c not in header]
    if missing:
        raise FrameError(f'{path}: no column {", ".join(map(repr, missing))} (needs {list(needed)}, '
                         f'has {list(header)})')
    return header


def _read_typed(path: Path, numbers) -> pd.DataFrame:
    """A CSV file with its ``numbers`` columns (and the optional ones present) typed."""
    frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    frame.columns = with_current_names(frame.columns)
    optional = {c: kind for c, kind in OPTIONAL.get(path.name, {}).items() if c in frame.columns}
    for column in list(numbers) + [c for c, kind in optional.items() if kind == 'number']:
        text = frame[column].str.strip()
        values = pd.to_numeric(text.mask(text.isin(MISSING)), errors='coerce')
        _refuse(path, frame, column, values.isna() & ~text.isin(MISSING), 'a number')
        frame[column] = values.astype(float)
    for column in [c for c, kind in optional.items() if kind == 'flag']:
        text = frame[column].str.strip()
        _refuse(path, frame, column, ~text.isin(FLAGS), 'True, False or empty')
        frame[column] = text.map(FLAGS).astype(object)
    return frame


def _refuse(path: Path, frame: pd.DataFrame, column: str, bad: pd.Series, expected: str) -> None:
    """A :class:`FrameError` naming the first ``bad`` row of ``column`` (its line in the file)."""
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise FrameError(f'{path} row {row + 2}, column {column!r}: {frame[column].iloc[row]!r} is not {expected}')


def study_folder(folder: Union[str, Path]) -> Path:
    """``folder`` as a path, or a :class:`~pyterrier_utility.errors.SettingError` naming it when it
    does not exist, is not a folder, or holds no ``per_query.csv`` (it is not a study's)."""
    path = Path(folder)
    if not path.exists():
        raise SettingError(f'{path} does not exist: give a study folder (the --out of pyterrier-utility study)')
    if not path.is_dir():
        raise SettingError(f'{path} is a file, not a study folder (the --out of pyterrier-utility study)')
    if not (path / FRAME_FILES['per_query']).is_file():
        attribution = ' (an attribution alone: run the study into it too)' if any(
            (path / name).is_file() for name in ATTRIBUTION_FILES.values()) else ''
        raise SettingError(f'{path} is not a study folder: it holds no {FRAME_FILES["per_query"]}{attribution}')
    return path


def read_study(folder: Union[str, Path]) -> StudyFolder:
    """Reads a study folder: ``per_query.csv`` must exist; the other files are read when present.

    Args:
        folder: a folder written by the study (or ``pyterrier-utility report``).

    Example::

        study = read_study('results/study')
        print(study.per_query.groupby('system')['utility'].mean())
    """
    path = study_folder(folder)
    per_query = path / FRAME_FILES['per_query']
    header = pd.read_csv(per_query, nrows=0)
    has_dataset = bool({'dataset', 'reader'} & set(header.columns))
    study = StudyFolder(path, read_csv(per_query), named_datasets=has_dataset, block=block_heading(header))
    for file in CSV_COLUMNS:
        if file != per_query.name and (path / file).is_file():
            own = file not in ATTRIBUTION_FILES.values()  # attribute's files never name their dataset
            setattr(study, file.removesuffix('.csv'), read_csv(path / file, has_dataset if own else None))
    if (path / SETTINGS_FILE).is_file():
        try:
            study.settings = json.loads((path / SETTINGS_FILE).read_text())
        except json.JSONDecodeError as e:
            raise FrameError(f'{path / SETTINGS_FILE}: not JSON ({e})') from None
        study.gain = study.settings.get('utility', UTILITY_GAINS[0])
    if (path / 'table1_paper.md').is_file():
        study.table1 = (path / 'table1_paper.md').read_text()
    study.figures = {p.name: p.read_bytes() for p in sorted(path.glob('fig*.png'))}
    return study


def study_from_frames(frames: Mapping[str, pd.DataFrame], path: Union[str, Path] = '.') -> StudyFolder:
    """A :class:`StudyFolder` of frames in memory (``per_query``, and any of ``answers``, ``scores``,
    ``contexts``, ``queries``), their columns checked as :func:`read_csv` checks the files'.

    Args:
        frames: name (without ``.csv``) -> frame, as the study writes them.
        path: the folder the frames stand for (named in the page's title).

    Example::

        study = study_from_frames({'per_query': results.per_query, 'answers': results.answers})
    """
    if frames.get('per_query') is None:
        raise FrameError(f'no per_query frame among {sorted(frames)}: a study view needs per_query')
    named = 'dataset' in frames['per_query'].columns
    study = StudyFolder(Path(path), frames['per_query'], named_datasets=named,
                        block=block_heading(frames['per_query']))
    for name in ('per_query', 'answers', 'scores', 'contexts', 'queries'):
        frame = frames.get(name)
        if frame is None:
            continue
        needed = CSV_COLUMNS[FRAME_FILES[name]][0]
        missing = [c for c in needed if c not in frame.columns]
        if missing:
            raise FrameError(f'{name}: no column {", ".join(map(repr, missing))} '
                             f'(needs {list(needed)}, has {list(frame.columns)})')
        if ('dataset' in frame.columns) != named:
            raise FrameError(f"{name}: {'no' if named else 'a'} column 'dataset', unlike per_query")
        frame = frame.astype({'qid': str})
        if 'truncated' in frame.columns:  # in memory: bools, None or NaN where the engine did not say
            frame = frame.assign(truncated=[None if pd.isna(v) else bool(v) for v in frame['truncated']])
        setattr(study, name, frame if named else frame.assign(dataset='')[['dataset', *frame.columns]])
    return study
