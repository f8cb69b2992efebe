"""Small helpers shared by the modules of the package."""
import contextlib
import copy
import fcntl
import hashlib
import json
import math
import numbers
import os
import shutil
import sys
import unicodedata
import warnings
from pathlib import Path
from types import FrameType
from typing import Callable, Iterable, Iterator, Optional, Sequence

import pandas as pd

from .errors import FrameError, SettingError, UtilityWarning
from .settings import is_int


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: '1 query', '3 queries', '1 answer', '2 answers'."""
    plural = noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'
    return f'{n} {noun if n == 1 else plural}'


def cache_dir() -> Path:
    """The folder where converted models and indices are kept between runs.

    ``$PYTERRIER_UTILITY_CACHE`` when set, else ``~/.cache/pyterrier_utility``.
    """
    path = os.environ.get('PYTERRIER_UTILITY_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'pyterrier_utility')
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


@contextlib.contextmanager
def exclusive(path: Path, doing: str) -> Iterator[None]:
    """Holds ``path`` for this process against the others while the block runs: an exclusive lock
    on the file ``.NAME.lock`` beside it. A process that finds it held says once on the console that
    it waits for another process ``doing`` (e.g. ``'building the PISA index of cranfield'``). The
    lock goes with its holder, even one killed.

    Example::

        with exclusive(cache_dir() / 'scores' / 'dense@cranfield', 'scoring into dense@cranfield'):
            ...
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f'.{path.name}.lock', 'a') as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say(f'pyterrier_utility: waiting for another process {doing} ({path})')
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def built_once(target: Path, build: Callable[[Path], object], what: str,
               done: Callable[[Path], bool] = Path.exists) -> Path:
    """``target`` (a file or folder that several processes share, such as one in :func:`cache_dir`),
    built by one process while the others wait (:func:`exclusive`), then read by all.

    ``build(staging)`` makes it at a staging path beside it, which is renamed into place when
    complete: no process ever reads a half-built target. ``done(target)`` says whether it is built;
    what a killed builder left (the staging path, or an unfinished target built in place) is removed
    before building. Returns ``target``.

    Example::

        gguf = built_once(cache_dir() / 'gguf' / 'model.gguf', lambda staging: assemble(output_path=staging),
                          'the GGUF file of the model')
    """
    if done(target):
        return target
    with exclusive(target, f'building {what}'):
        if not done(target):
            staging = target.with_name(f'.{target.name}.staging')
            _remove(staging)
            _remove(target)
            build(staging)
            os.replace(staging, target)
    return target


@contextlib.contextmanager
def native_output_silenced(silence: bool = True):
    """Sends what native code writes to stdout and stderr (PISA's indexing log) to /dev/null."""
    if not silence:
        yield
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with open(os.devnull, 'w') as null:
            os.dup2(null.fileno(), 1)
            os.dup2(null.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


def visible(text: str) -> bool:
    """Whether ``text`` holds a character one can see: a letter, mark, number, punctuation or symbol,
    not only white space and control or format characters (NUL, ESC, a zero-width space)."""
    return any(unicodedata.category(c)[0] in 'LMNPS' for c in text)


def say(line: str) -> None:
    """One line on stderr, the stream of the progress bars, without breaking a bar being drawn."""
    import pyterrier as pt
    pt.tqdm.write(line, file=sys.stderr)


def with_fewer_results(transformer, k: int):
    """``transformer`` itself when it returns at most ``k`` documents, else a copy returning ``k``: the
    ``fuse_rank_cutoff`` of transformers whose top k is exactly what ``num_results=k`` gives."""
    if k >= transformer.num_results:
        return transformer
    fused = copy.copy(transformer)
    fused.num_results = k
    return fused


def stable_hash(*parts) -> str:
    """A hex digest of JSON-serialisable parts, stable across processes and platforms."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode('utf8')).hexdigest()


#: Packages whose frames a warning skips to reach the user's line (a pipeline runs through them;
#: functools' cached_property computes what a collection reads on first use).
_LIBRARY = ('pyterrier_utility', 'pyterrier', 'pyterrier_alpha', 'pandas', 'ir_measures', 'functools')


def user_stacklevel() -> int:
    """The ``stacklevel`` of the first caller outside this package and the libraries a pipeline
    runs through, so a warning points at the user's line (a notebook cell, a script), not ours."""
    frame: Optional[FrameType] = sys._getframe(1)
    level = 1
    while frame is not None and (frame.f_globals.get('__name__') or '').split('.')[0] in _LIBRARY:
        frame, level = frame.f_back, level + 1
    return level


def warn(message: str) -> None:
    """Says ``message`` to the user as a :class:`~pyterrier_utility.errors.UtilityWarning` (one plain
    line), attributed to the user's line, so that Python's filters show it once there."""
    warnings.warn(message, UtilityWarning, stacklevel=user_stacklevel())


def warn_qids(message: str, qids: Iterable) -> None:
    """Warns once for a group of queries, naming them, at the user's line."""
    qids = sorted({str(q) for q in qids})
    if qids:
        shown = ', '.join(qids[:20]) + (f' ... ({len(qids)} in all)' if len(qids) > 20 else '')
        warn(f'{message}: qid {shown}')


def validate_columns(owner, frame, includes: Iterable[str]) -> None:
    """Checks ``frame`` has the columns ``includes``; the error names the missing columns and ``owner``
    (a transformer, or a string such as ``'run_study topics'``)."""
    import pyterrier_alpha as pta
    from pyterrier.validate import InputValidationError
    includes = list(includes)
    try:
        pta.validate.columns(frame, includes=includes)
    except InputValidationError as e:
        missing = ', '.join(repr(c) for c in includes if c not in frame.columns)
        name = owner if isinstance(owner, str) else repr(owner)
        raise InputValidationError(f'{name}: input has no column {missing} (needs {includes}, '
                                   f'has {list(frame.columns)})', e.modes) from None


def either(names: Iterable[str]) -> str:
    """The names a setting may take, for a message: ``'a' or 'b'``."""
    return ' or '.join(map(repr, names))


def check(condition: bool, owner: str, message: str) -> None:
    """Raises :class:`SettingError` ``owner: message`` unless ``condition``."""
    if not condition:
        raise SettingError(f'{owner}: {message}')


def check_int(owner: str, name: str, value, minimum: int) -> int:
    """``value`` as an int, or a :class:`SettingError` naming ``name`` unless it is an integer >= ``minimum``."""
    check(is_int(value) and int(value) >= minimum, owner, f'{name} must be an integer >= {minimum}, got {value!r}')
    return int(value)


def check_number(owner: str, name: str, value, minimum: float, exclusive: bool = False) -> float:
    """``value`` as a float, or a :class:`SettingError` naming ``name`` unless it is a finite number
    >= ``minimum`` (> ``minimum`` when ``exclusive``)."""
    number = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool) else math.nan
    ok = math.isfinite(number) and (number > minimum if exclusive else number >= minimum)
    check(ok, owner, f'{name} must be a number {">" if exclusive else ">="} {minimum:g}, got {value!r}')
    return number


def encodable(text: str) -> bool:
    """True when ``text`` can be written as UTF-8 (no lone surrogate such as ``'\\ud800'``)."""
    try:
        text.encode('utf-8')
    except UnicodeEncodeError:
        return False
    return True


def check_encodable(owner: str, frame: pd.DataFrame, columns: Sequence[str] = ('query', 'text')) -> None:
    """Raises :class:`FrameError` naming the qid (and docno, for a document) of each text in
    ``columns`` that cannot be encoded as UTF-8 (a lone surrogate): no tokenizer, server or file
    could take it."""
    for column in columns:
        if column not in frame.columns:
            continue
        rows = frame[frame[column].map(lambda t: isinstance(t, str) and not encodable(t))]
        if len(rows):
            names = 'qid ' + rows['qid'].astype(str)
            if column != 'query' and 'docno' in rows.columns:
                names = names + ' docno ' + rows['docno'].astype(str)
            names = list(dict.fromkeys(names))
            more = f' ... ({len(names)} in all)' if len(names) > 10 else ''
            raise FrameError(f"{owner}: {column} cannot be encoded as UTF-8 (a lone surrogate such as '\\ud800') "
                             f"for {', '.join(names[:10])}{more}")


def _as_strings(owner: str, frame: pd.DataFrame, column: str, allow_missing: bool = False) -> pd.Series:
    values = frame[column]
    missing = values.isna()
    if missing.any() and not allow_missing:
        rows = list(frame.index[missing][:10])
        raise FrameError(f'{owner}: missing {column} in rows {rows}' + (' ...' if missing.sum() > 10 else ''))
    if pd.api.types.is_float_dtype(values) and (values.dropna() % 1 == 0).all():
        # 3.0 read from a file with gaps means the id 3, as the other frames spell it.
        return values.astype('Int64').astype(str).where(~missing, None)
    return values.astype(str).where(~missing, None)


def normalise_frame(owner: str, frame: pd.DataFrame, *, missing_docno_ok: bool = False,
                    one_query_per_qid: bool = True) -> pd.DataFrame:
    """The frame with ``qid`` and ``docno`` as strings and ``rank`` numeric, checked at the boundary.

    Raises :class:`FrameError` naming the rows or qids for a missing qid (or docno, unless
    ``missing_docno_ok``: the placeholder of a query with no document), a rank that is not a
    number, or one qid with two different queries.
    """
    out = frame
    if 'qid' in out.columns:
        out = out.assign(qid=_as_strings(owner, out, 'qid'))
    if 'docno' in out.columns:
        out = out.assign(docno=_as_strings(owner, out, 'docno', allow_missing=missing_docno_ok))
        if missing_docno_ok and 'qid' in out.columns:
            mixed = out.groupby('qid', sort=False)['docno'].agg(lambda d: d.isna().any() and d.notna().any())
            if mixed.any():
                raise FrameError(f'{owner}: rows without a docno next to documents for qid '
                                 f'{sorted(mixed.index[mixed])[:10]}; a row without a docno may only stand for a '
                                 'query that retrieved nothing')
    if 'rank' in out.columns and not pd.api.types.is_numeric_dtype(out['rank']):
        rank = pd.to_numeric(out['rank'], errors='coerce')
        bad = rank.isna() & out['rank'].notna()
        if bad.any():
            raise FrameError(f'{owner}: rank is not a number for qid {sorted(set(out.loc[bad, "qid"]))[:10]} '
                             f'(e.g. {out.loc[bad, "rank"].iloc[0]!r})')
        out = out.assign(rank=rank)
    if one_query_per_qid and {'qid', 'query'} <= set(out.columns):
        queries = out[['qid', 'query']].drop_duplicates()
        clash = queries['qid'][queries['qid'].duplicated()]
        if len(clash):
            raise FrameError(f'{owner}: one qid with different queries: qid {sorted(set(clash))[:10]}')
    return out
