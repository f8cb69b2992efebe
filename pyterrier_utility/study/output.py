"""A study's output folder: owned by one run at a time, and holding one run's files.

A lock file names the process writing the folder; a second run refuses with the process's id. The
files of a run are written into a staging folder inside it and moved into place together, and the
files an earlier run wrote that this run does not (figures of another k, a COS-Mix record) are
removed, so the folder never mixes the settings of one run with the tables of another. The staging
folder of a run killed while writing is removed by the next. The generation cache
(``generations.sqlite``) is shared by every run and never removed.
"""
import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

from ..errors import SettingError
from ..schema import OUTPUTS

LOCK = '.pyterrier-utility.lock'
#: A run's staging folder is this and its process id.
STAGING = '.staging-'


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_out(out: Path) -> None:
    """``out`` is (or can be made) a writable folder, or a :class:`SettingError` says why."""
    if out.exists() and not out.is_dir():
        raise SettingError(f'--out {out} is a file, not a folder')
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / '.write-test'
        probe.write_text('')
        probe.unlink()
    except OSError as e:
        raise SettingError(f'--out {out} cannot be written: {e.strerror or e}') from None


def _clear_staging(out: Path) -> None:
    """Removes the staging folders of runs killed while they wrote their files (their process is gone)."""
    for stage in out.glob(f'{STAGING}*'):
        pid = stage.name[len(STAGING):]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def lock_folder(out: Path) -> Iterator[Path]:
    """Holds ``out`` for this process (re-entrant); a :class:`SettingError` names the process that
    holds it, or says why ``out`` cannot be written. A lock left by a process that died is taken
    over, and the staging folders such processes left are removed."""
    check_out(out)
    lock = out / LOCK
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                holder = int(lock.read_text().strip() or 0)
            except (OSError, ValueError):
                holder = 0
            if holder == os.getpid():
                yield out
                return
            if holder and _alive(holder):
                raise SettingError(f'--out {out} is being written by process {holder} (lock {lock}): wait for '
                                   'it to finish, or give another --out') from None
            lock.unlink(missing_ok=True)  # its process died
            continue
        with os.fdopen(fd, 'w') as f:
            f.write(str(os.getpid()))
        break
    _clear_staging(out)
    try:
        yield out
    finally:
        lock.unlink(missing_ok=True)


@contextlib.contextmanager
def stage_outputs(out: Path) -> Iterator[Path]:
    """A staging folder whose files replace the run's outputs in ``out`` when the block ends
    without an error (outputs of an earlier run not written again are removed); on an error the
    folder is left as it was."""
    with lock_folder(out):
        stage = out / f'{STAGING}{os.getpid()}'
        shutil.rmtree(stage, ignore_errors=True)
        stage.mkdir()
        try:
            yield stage
            written = {p.name for p in stage.iterdir()}
            for pattern in OUTPUTS:
                for old in out.glob(pattern):
                    if old.name not in written:
                        old.unlink()
            for name in written:
                os.replace(stage / name, out / name)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
