"""Settings checked where they are given (a constructor, a command's options): a :class:`SettingError`
naming the owner and the value."""
import math
import numbers

from .errors import SettingError
from .settings import is_int


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
