"""A saved run as a system: the utility of a retriever's results without running the retriever."""
from pathlib import Path
from typing import Mapping, Union

import pandas as pd
import pyterrier as pt

from .._frames import normalise_frame, validate_columns
from .._messages import warn_qids
from ..datasets.texts import texts_of
from ..errors import FrameError, SettingError

#: The fields of a line of a TREC run.
TREC_FIELDS = 'qid Q0 docno rank score tag'
#: What a run saved as CSV or parquet must hold (a PyTerrier result frame).
FRAME_COLUMNS = "qid, docno, and score or rank (a PyTerrier result frame)"


def _read_trec(path: Path) -> pd.DataFrame:
    """The lines of a TREC run, each checked: six fields, an integer rank, a number as score."""
    rows = []
    try:
        with open(path, encoding='utf-8') as lines:
            for number, line in enumerate(lines, 1):
                fields = line.split()
                if not fields:
                    continue
                where = f'run file {path}, line {number}'
                if len(fields) != 6:
                    raise FrameError(f'{where}: {len(fields)} fields ({line.strip()[:80]!r}); expected the six of a '
                                     f'TREC run: {TREC_FIELDS} (a PyTerrier result frame is read from a .csv or '
                                     '.parquet file, by its header)')
                qid, _, docno, rank_text, score_text, _ = fields
                try:
                    rank = int(rank_text)
                except ValueError:
                    raise FrameError(f'{where}: rank {rank_text!r} is not an integer ({TREC_FIELDS})') from None
                try:
                    score = float(score_text)
                except ValueError:
                    raise FrameError(f'{where}: score {score_text!r} is not a number ({TREC_FIELDS})') from None
                rows.append((qid, docno, rank, score, number))
    except UnicodeDecodeError as e:
        raise FrameError(f'run file {path}: not UTF-8 text ({e.reason} at byte {e.start}); expected a TREC run '
                         f'({TREC_FIELDS}) or a .csv or .parquet result frame') from None
    if not rows:
        raise FrameError(f'run file {path}: no lines; expected lines of {TREC_FIELDS}')
    return pd.DataFrame(rows, columns=['qid', 'docno', 'rank', 'score', 'line'])


def _read_frame(path: Path) -> pd.DataFrame:
    """A PyTerrier result frame saved as CSV or parquet, recognised by its columns."""
    try:
        if path.suffix == '.parquet':
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, dtype={'qid': str, 'docno': str})
    except pd.errors.EmptyDataError:
        raise FrameError(f'run file {path}: empty; expected a header with {FRAME_COLUMNS}') from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError, OSError) as e:
        raise FrameError(f'run file {path}: cannot be read as {path.suffix[1:]} ({e}); expected {FRAME_COLUMNS}') \
            from None
    if not ({'qid', 'docno'} <= set(frame.columns) and {'score', 'rank'} & set(frame.columns)):
        header = 'line 1 (the header)' if path.suffix == '.csv' else 'its columns'
        raise FrameError(f'run file {path}, {header}: columns {list(frame.columns)}; expected {FRAME_COLUMNS}')
    # The line of each row, for messages: the header is line 1 of a CSV file.
    return frame.assign(line=range(2, len(frame) + 2)) if path.suffix == '.csv' else frame


def read_run(path: Union[str, Path]) -> pd.DataFrame:
    """A run file as a result frame (``qid``, ``docno``, ``score``, ``rank``), read by an explicit
    parser: TREC's six columns (``qid Q0 docno rank score tag``), or a PyTerrier result frame saved as
    ``.csv`` or ``.parquet``, recognised by its header. Anything else is a :class:`FrameError` naming
    the file, the line and what was expected.

    Documents are ranked by score as trec_eval ranks them (ties in file order). A score that is
    missing or not a number (NaN) is an error when the file has no ranks; with ranks, a warning
    names the queries, which are then ordered by their ranks (their scores become ``-rank``).

    Example::

        run = read_run('runs/bm25.txt')
    """
    path = Path(path)
    if not path.is_file():
        raise SettingError(f'run file {path} does not exist')
    frame = _read_frame(path) if path.suffix in ('.csv', '.parquet') else _read_trec(path)
    owner = f'run file {path}'
    frame = normalise_frame(owner, frame)
    if 'score' not in frame.columns:
        frame = frame.assign(score=-frame['rank'].astype(float))
    score = pd.to_numeric(frame['score'], errors='coerce')
    bad = score.isna()
    if bad.any():
        first = frame[bad].iloc[0]
        at = f", line {first['line']}" if 'line' in frame.columns else ''
        by_rank = frame['qid'].isin(set(frame.loc[bad, 'qid']))
        if 'rank' not in frame.columns or frame.loc[by_rank, 'rank'].isna().any():
            raise FrameError(f'{owner}{at}: score {str(first["score"])!r} is missing or not a number (qid '
                             f'{sorted(set(frame.loc[bad, "qid"]))[:10]}), and there are no ranks to order by')
        warn_qids(f'{owner}: scores missing or not numbers; these queries are ordered by rank', frame.loc[bad, 'qid'])
        score = score.where(~by_rank, -frame['rank'].astype(float))
    frame = frame.assign(score=score)
    # Ranks follow the scores, as trec_eval reads a run (ties in file order).
    frame = frame.sort_values(['qid', 'score'], ascending=[True, False], kind='stable')
    return frame.assign(rank=frame.groupby('qid').cumcount())[['qid', 'docno', 'score', 'rank']].reset_index(drop=True)


class RunFile(pt.Transformer):
    """Retrieves from a saved run: each query's documents as the run ranked them, with ``text``.

    Queries absent from the run retrieve nothing (named in a warning). ``RunFile(...) % k`` keeps
    the top k; in a study it is a system like BM25, reversible with the others.

    Args:
        path: a TREC run (six columns) or a PyTerrier result frame as CSV or parquet.
        texts: docno -> text of the collection.

    Example::

        systems = {'myrun': RunFile('runs/bm25+rm3.txt', dataset.texts)}
    """

    def __init__(self, path: Union[str, Path], texts: Mapping[str, str]):
        self.path = Path(path)
        self.texts = texts
        self.run = read_run(self.path)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query'])
        topics = normalise_frame(repr(self), inp[['qid', 'query']].drop_duplicates())
        out = topics.merge(self.run, on='qid', how='inner')
        warn_qids(f'{self!r}: the run has no documents', set(topics['qid']) - set(out['qid']))
        texts = texts_of(self.texts, out['docno'])
        missing = sorted(set(out['docno']) - set(texts))
        if missing:
            raise FrameError(f'{self!r}: docno {missing[:10]} not in the collection')
        return out.assign(text=out['docno'].map(texts))[['qid', 'query', 'docno', 'text', 'score', 'rank']]

    def qids(self) -> set:
        """The queries the run ranks documents for."""
        return set(self.run['qid'])

    def __repr__(self):
        return f'RunFile({str(self.path)!r})'
