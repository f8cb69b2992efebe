"""Settings checked where they are given (a constructor, a command's options): a :class:`SettingError`
naming the owner and the value."""
import math
import numbers

from .errors import SettingError
from .settings import is_int
from .vocabulary import SYSTEMS


def check(condition: bool, owner: str, message: str) -> None:
    """Raises :class:`SettingError` ``owner: message`` unless ``condition`` (``message`` alone for an
    empty ``owner``: the command line's parser names the option itself)."""
    if not condition:
        raise SettingError(f'{owner}: {message}' if owner else message)


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


def check_k(owner: str, k) -> int:
    """A context size: how many documents the reader is given, an integer >= 1 (a bool is refused).
    The one rule of ``k`` for the command line, :class:`~pyterrier_utility.study.StudyConfig`,
    the study and the transformers that cut at k."""
    return check_int(owner, 'k', k, 1)


def check_window(owner: str, start) -> int:
    """A window of each ranking besides its top k: a start rank >= 2 (ranks start .. start + k - 1;
    1 is the top k, which every study has) or a tail window <= -1 (the j-th window from the tail of
    the grid, :class:`~pyterrier_utility.GridWindow`). The one rule of a window for the command line,
    :class:`~pyterrier_utility.study.StudyConfig` and the study."""
    check(is_int(start) and (int(start) >= 2 or int(start) <= -1), owner,
          f'window must be a start rank >= 2 (the top k is always there) or a tail window <= -1, got {start!r}')
    return int(start)


def check_system(owner: str, name) -> str:
    """A built-in system's name, one of :data:`~pyterrier_utility.vocabulary.SYSTEMS` (a saved run is
    given as a run, by its path). The one rule of a system for the command line and
    :class:`~pyterrier_utility.study.StudyConfig`."""
    check(name in SYSTEMS, owner, f'system must be one of {list(SYSTEMS)}, got {name!r}')
    return name
