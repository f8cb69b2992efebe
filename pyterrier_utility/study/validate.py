"""A study's ``per_query.csv`` read back and checked, so that tables are only ever made from a whole,
well-formed file (``report`` makes them again from it)."""
import csv
from pathlib import Path
from typing import Union

import pandas as pd

from ..errors import FrameError, SettingError
from ..schema import (
    FORMER_COLUMNS,
    MISSING,
    PER_QUERY_COLUMNS,
    PER_QUERY_INTEGERS,
    PER_QUERY_KEY,
    PER_QUERY_MAY_BE_EMPTY,
    PER_QUERY_MEASURES,
)


def read_per_query(path: Union[str, Path]) -> pd.DataFrame:
    """The rows of a study's ``per_query.csv``, typed (``k`` and ``n_docs`` integers, the measures
    floats, ids strings), or an error naming the file, the line and the column: a missing file
    (:class:`SettingError`); an empty or header-only file, a missing column, a line with too few or
    too many fields, a last line cut short, an id left empty, a ``k`` that is not an integer >= 1, a
    measure that is not a number, or two rows for one (dataset, reader,) label set, system, k and query
    (:class:`FrameError`).

    Example::

        per_query = read_per_query('study/per_query.csv')
        table = pyterrier_utility.study.table1(per_query)
    """
    path = Path(path)
    if not path.is_file():
        raise SettingError(f'{path} does not exist: expected the per_query.csv of a study folder')
    expected = f"a study's per_query.csv, with columns [dataset,] [reader,] {', '.join(PER_QUERY_COLUMNS)}"
    try:
        text = path.read_text(encoding='utf-8')
    except UnicodeDecodeError as e:
        raise FrameError(f'{path}: not UTF-8 text ({e.reason} at byte {e.start}); expected {expected}') from None
    if not text.strip():
        raise FrameError(f'{path}: empty; expected {expected}')
    reader = csv.reader(text.splitlines(keepends=True))
    header = with_current_names(next(reader))
    missing = [c for c in PER_QUERY_COLUMNS if c not in header]
    if missing:
        raise FrameError(f'{path}, line 1 (the header): no column {missing}; expected {expected}')
    numbered = [(reader.line_num, row) for row in reader]
    for n, (line, row) in enumerate(numbered):
        if len(row) != len(header):
            last = ' (the last line: the file was cut short?)' if n == len(numbered) - 1 else ''
            raise FrameError(f'{path}, line {line}: {len(row)} fields where the header has {len(header)}{last}')
    lines, rows = [line for line, _ in numbered], [row for _, row in numbered]
    if not rows:
        raise FrameError(f'{path}: a header and no rows; expected one row per label set, system, k and query')
    if not text.endswith('\n'):
        raise FrameError(f'{path}, line {lines[-1]}: the last line has no line end: the file was cut short '
                         '(was the study stopped while writing it?); run the study again')
    frame = pd.DataFrame(rows, columns=header)
    for column in [c for c in PER_QUERY_KEY if c in frame.columns]:
        _fail(path, lines, column, frame[column].str.strip() == '', 'is empty')
    for column, least in PER_QUERY_INTEGERS.items():
        values = pd.to_numeric(frame[column], errors='coerce')
        _fail(path, lines, column, ~(values % 1 == 0) | (values < least), f'is not an integer >= {least}', frame)
        frame[column] = values.astype(int)
    for column in PER_QUERY_MEASURES:
        values = pd.to_numeric(frame[column], errors='coerce')
        empty = frame[column].str.strip().isin(MISSING)
        may_be_empty = column in PER_QUERY_MAY_BE_EMPTY
        bad = values.isna() & ~(empty if may_be_empty else False)
        _fail(path, lines, column, bad, 'is not a number' + (' (nor empty)' if may_be_empty else ''), frame)
        frame[column] = values.astype(float)
    key = [c for c in PER_QUERY_KEY if c in frame.columns]
    twice = frame.duplicated(key, keep=False)
    if twice.any():
        first = frame[twice].iloc[0]
        same = [lines[i] for i in frame.index[twice & (frame[key] == first[key]).all(axis=1)]]
        raise FrameError(f'{path}, lines {same}: one row per {", ".join(key)} expected, these lines repeat '
                         f'{dict(first[key])}; the file mixes runs or was appended to')
    return frame


def with_current_names(header):
    """A study file's header with P's columns of a folder written before they were named for the answer
    quality (``fbert``, ``fbert_0shot``: :data:`~pyterrier_utility.schema.FORMER_COLUMNS`) renamed, unless it
    also holds the current ones."""
    header = list(header)
    return [c if FORMER_COLUMNS.get(c, c) in header else FORMER_COLUMNS.get(c, c) for c in header]


def _fail(path: Path, lines, column: str, bad: pd.Series, what: str, frame: pd.DataFrame = None) -> None:
    if bad.any():
        i = bad.to_numpy().nonzero()[0][0]
        value = f' ({frame[column].iloc[i]!r})' if frame is not None else ''
        raise FrameError(f'{path}, line {lines[i]}, column {column}: {what}{value}'
                         + (f' (and {int(bad.sum()) - 1} more lines)' if bad.sum() > 1 else ''))
