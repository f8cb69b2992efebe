"""Records of UTF-8 ``.tsv``, ``.jsonl`` and TREC qrels files, every line checked, every fault named by
file and line."""
import codecs
import json
import re
from typing import Callable, Dict, Iterator, Sequence, Tuple

import pandas as pd

from .._text import encodable
from ..errors import SettingError

#: What cuts an id holding white space, by the id's name (any other: TREC files).
CUT_BY = {'docno': 'the BM25 index (PISA) and TREC runs and qrels', 'qid': 'TREC runs and qrels'}


def _printable(text: str) -> str:
    """``text`` with lone surrogates written as ``\\udXXX`` escapes, so a message can be printed."""
    return text.encode('utf-8', 'backslashreplace').decode('utf-8')


def _fields(path: str, number: int, line: str, columns: Sequence[str]) -> Dict[str, str]:
    """The record of one line of a ``.tsv`` or ``.jsonl`` file; a :class:`SettingError` naming the file and
    line when it does not hold ``columns`` as strings, or its first is empty."""
    if not path.endswith('.jsonl'):
        fields = line.split('\t')
        if len(fields) != len(columns):
            raise SettingError(f'{path} line {number}: {len(fields)} field{"s" * (len(fields) != 1)}, expected '
                               f'{len(columns)} ({"<TAB>".join(columns)})')
        record = dict(zip(columns, fields))
    else:
        try:
            parsed = json.loads(line)
        except json.JSONDecodeError as e:
            raise SettingError(f'{path} line {number}: not a JSON object ({e.msg}: column {e.colno})') from None
        if not isinstance(parsed, dict) or any(c not in parsed for c in columns):
            has = sorted(parsed) if isinstance(parsed, dict) else f'a JSON {type(parsed).__name__}'
            raise SettingError(f'{path} line {number}: a document needs {" and ".join(map(json.dumps, columns))}, '
                               f'has {has}')
        key = columns[0]
        if isinstance(parsed[key], int) and not isinstance(parsed[key], bool):
            parsed[key] = str(parsed[key])  # docno 12 is the docno '12' that qrels and runs spell
        for column in columns:
            if not isinstance(parsed[column], str):
                named = f', {key} {_printable(parsed[key])}' if column != key else ''
                raise SettingError(f'{path} line {number}{named}: {column} is {json.dumps(parsed[column])}, '
                                   'not a string')
        record = {c: parsed[c] for c in columns}
    key = columns[0]
    if not record[key].strip():
        raise SettingError(f'{path} line {number}: empty {key}')
    if re.search(r'\s', record[key]):
        raise SettingError(f'{path} line {number}: {key} {record[key]!r} holds white space, where '
                           f'{CUT_BY.get(key, "TREC files")} cut it; give {key}s without white space')
    return record


def _lines(path: str, named: Callable[[int, str], str]) -> Iterator[Tuple[int, str]]:
    """The lines of a UTF-8 file with their numbers, each without its LF or CR LF, the byte order mark
    opening the file dropped. Bytes that are not UTF-8 are refused naming the file, the line and what
    ``named`` reads in the line decoded with replacement characters (``', docno D2'``, or ``''``)."""
    with open(path, 'rb') as lines:
        for number, raw in enumerate(lines, 1):
            raw = raw[:-2] if raw.endswith(b'\r\n') else raw.removesuffix(b'\n')
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = raw.decode('utf-8')
            except UnicodeDecodeError as e:
                raise SettingError(f'{path} line {number}{named(number, raw.decode("utf-8", "replace"))}: bytes that '
                                   f'are not UTF-8 (0x{raw[e.start]:02x} at byte {e.start + 1}); save the file as '
                                   'UTF-8') from None
            yield number, line


def read_records(path: str, columns: Sequence[str]) -> Iterator[Tuple[int, Dict[str, str]]]:
    """The records of a UTF-8 ``.tsv`` file (one per line, the fields ``columns`` separated by tabs,
    no quoting, an optional header line naming them) or ``.jsonl`` file (one JSON object per line
    holding ``columns``; the first may be an integer), with their line numbers. Blank lines are
    skipped; a line ends in LF or CR LF; a byte order mark opening the file is dropped.

    Raises :class:`SettingError` naming the file, the line and, where it can be read, the first
    column's value: bytes that are not UTF-8, a lone UTF-16 surrogate (``"\\ud800"`` in JSON), a
    line without its fields, a value that is not a string, an empty first column, a first column
    holding white space (an index and TREC files cut it there). Nothing is cut, at any length.

    Args:
        path: the file (``.jsonl`` read as JSON lines, anything else as tab-separated).
        columns: the fields of a record, the first its id (``docno``, ``qid``).

    Example::

        texts = {r['docno']: r['text'] for _, r in read_records('docs.tsv', ('docno', 'text'))}
    """
    key = columns[0]
    header = not path.endswith('.jsonl')

    def named(number: int, line: str) -> str:
        try:
            return f', {key} ' + _fields(path, number, line, columns)[key]
        except SettingError:
            return ''
    for number, line in _lines(path, named):
        if not line.strip():
            continue
        record = _fields(path, number, line, columns)
        if header:
            header = False
            if list(record) == list(record.values()):
                continue
        for column, value in record.items():
            if not encodable(value):
                surrogate = next(c for c in value if 0xD800 <= ord(c) <= 0xDFFF)
                raise SettingError(f'{path} line {number}, {key} {_printable(record[key])}: {column} holds a lone '
                                   f'UTF-16 surrogate ({_printable(surrogate)}), which is not a character: no '
                                   'tokenizer, cache or file can take it')
        yield number, record


def read_qrels(path: str) -> pd.DataFrame:
    """The judgements of a UTF-8 TREC qrels file (``qid 0 docno label`` per line, fields separated by
    white space, a larger label more relevant) as ``qid``, ``docno``, ``label`` (an int), in file
    order, every line checked. Blank lines are skipped.

    Raises :class:`SettingError` naming the file and the line (and its qid and docno where it has
    them): bytes that are not UTF-8, a line of more or fewer than four fields, a label that is not an
    integer, a comment line (``#``: TREC qrels have no comments, and trec_eval reads every line as a
    judgement).

    Args:
        path: the file.

    Example::

        qrels = read_qrels('my_collection/qrels')
    """
    def named(number: int, line: str) -> str:
        fields = line.split()
        return f', qid {fields[0]} docno {fields[2]}' if len(fields) == 4 else ''
    rows = []
    for number, line in _lines(path, named):
        fields = line.split()
        if not fields:
            continue
        if fields[0].startswith('#'):
            raise SettingError(f'{path} line {number}: a comment, which TREC qrels cannot hold (trec_eval reads every '
                               'line as a judgement); remove it')
        if len(fields) != 4:
            raise SettingError(f'{path} line {number}: {len(fields)} field{"s" * (len(fields) != 1)}, expected 4 '
                               '(qid 0 docno label, separated by white space)')
        qid, _, docno, label = fields
        if not re.fullmatch(r'[+-]?[0-9]+', label):
            raise SettingError(f'{path} line {number}, qid {qid} docno {docno}: label {label!r} is not an integer')
        rows.append((qid, docno, int(label)))
    return pd.DataFrame(rows, columns=['qid', 'docno', 'label']).astype({'qid': str, 'docno': str, 'label': int})
