"""The project's own errors, each naming the setting, frame, backend, endpoint or file at fault, and
its warnings, each printed as one plain line."""
import warnings
from typing import Optional


class UtilityError(Exception):
    """Base class of the errors this package raises on purpose."""


class SettingError(UtilityError, ValueError):
    """A setting out of its range (a negative temperature, ``k = 0``, a stop string split into characters)."""


class FrameError(UtilityError, ValueError):
    """An input frame that has the right columns but cannot be used as it is (duplicate qids with
    different questions, missing ids, ranks that are not numbers)."""


class BackendError(UtilityError, RuntimeError):
    """A backend failed, or returned something that is not an answer; nothing of it was stored.

    Attributes:
        completed: index (in the failed call's prompts) -> answer, for the prompts answered before
            the failure; the generation cache stores these before raising.
        prompt: the prompt at fault, where one is (a prompt longer than a server's context), so that
            a caller who built it can name its query and documents; ``None`` otherwise.
    """

    def __init__(self, message: str, completed=None, prompt: Optional[str] = None):
        super().__init__(message)
        self.completed = dict(completed or {})
        self.prompt = prompt


class CacheError(UtilityError, RuntimeError):
    """A cache file that cannot be opened or written; the message names the file."""


class PackageError(UtilityError, ImportError):
    """An installed package that does not load beside the others (a torchvision built for another torch);
    the message names it, the torch installed and the fix."""


class UtilityWarning(UserWarning):
    """A message of this package to its user (answers cut at the length limit, queries left out):
    printed as one line, ``pyterrier-utility: <message>``, without a file, line number or source line."""


#: The program's name at the start of its warnings' lines.
PROGRAM = 'pyterrier-utility'


def plain_warnings() -> None:
    """Makes :func:`warnings.formatwarning` print a :class:`UtilityWarning` as one plain line, in a
    terminal and in a notebook alike; every other warning is formatted as it was (once installed,
    a second call changes nothing)."""
    previous = warnings.formatwarning
    if getattr(previous, 'plain_for', None) is UtilityWarning:
        return

    def formatwarning(message, category, filename, lineno, line=None):
        if isinstance(category, type) and issubclass(category, UtilityWarning):
            return f'{PROGRAM}: {message}\n'
        return previous(message, category, filename, lineno, line)
    formatwarning.plain_for = UtilityWarning  # type: ignore[attr-defined]
    warnings.formatwarning = formatwarning
