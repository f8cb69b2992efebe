"""Small helpers shared by the modules of the package."""
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Iterable


def cache_dir() -> Path:
    """The folder where converted models and indices are kept between runs.

    ``$PYTERRIER_UTILITY_CACHE`` when set, else ``~/.cache/pyterrier_utility``.
    """
    path = os.environ.get('PYTERRIER_UTILITY_CACHE') or os.path.join(
        os.path.expanduser('~'), '.cache', 'pyterrier_utility')
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def stable_hash(*parts) -> str:
    """A hex digest of JSON-serialisable parts, stable across processes and platforms."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode('utf8')).hexdigest()


def warn_qids(message: str, qids: Iterable, stacklevel: int = 3) -> None:
    """Warns once for a group of queries, naming them."""
    qids = sorted({str(q) for q in qids})
    if qids:
        shown = ', '.join(qids[:20]) + (f' ... ({len(qids)} in all)' if len(qids) > 20 else '')
        warnings.warn(f'{message}: qid {shown}', stacklevel=stacklevel)


def validate_columns(owner, frame, includes: Iterable[str]) -> None:
    """Checks ``frame`` has the columns ``includes``; the error names the missing columns and ``owner``
    (a transformer, or a string such as ``'run_study topics'``)."""
    from pyterrier.validate import InputValidationError
    import pyterrier_alpha as pta
    includes = list(includes)
    try:
        pta.validate.columns(frame, includes=includes)
    except InputValidationError as e:
        missing = ', '.join(repr(c) for c in includes if c not in frame.columns)
        name = owner if isinstance(owner, str) else repr(owner)
        raise InputValidationError(f'{name}: input has no column {missing} (needs {includes}, '
                                   f'has {list(frame.columns)})', e.modes) from None
