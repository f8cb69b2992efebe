"""What the package tells the user: warnings at the user's line, lines on the progress bars' stream, and
the wording of a count or a choice; what native code writes kept off the console."""
import contextlib
import os
import sys
import warnings
from types import FrameType
from typing import Iterable, Optional

from .errors import UtilityWarning


def count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1: '1 query', '3 queries', '1 answer', '2 answers'."""
    plural = noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'
    return f'{n} {noun if n == 1 else plural}'


def either(names: Iterable[str]) -> str:
    """The names a setting may take, for a message: ``'a' or 'b'``."""
    return ' or '.join(map(repr, names))


def inform(line: str) -> None:
    """One line on stderr, the stream of the progress bars, without breaking a bar being drawn."""
    import pyterrier as pt
    pt.tqdm.write(line, file=sys.stderr)


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
