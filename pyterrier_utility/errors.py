"""The project's own errors: each names the setting, frame, backend, endpoint or file at fault."""


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
    """

    def __init__(self, message: str, completed=None):
        super().__init__(message)
        self.completed = dict(completed or {})


class CacheError(UtilityError, RuntimeError):
    """A cache file that cannot be opened or written; the message names the file."""
