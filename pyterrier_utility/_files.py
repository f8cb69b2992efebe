"""Files kept between runs and shared by processes: the cache folder, a target built once by one
process while the others wait, and the stable digests that name what is kept."""
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator

from ._messages import inform


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
            inform(f'pyterrier_utility: waiting for another process {doing} ({path})')
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


def stable_hash(*parts) -> str:
    """A hex digest of JSON-serialisable parts, stable across processes and platforms."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode('utf8')).hexdigest()
