"""PEP 562 module attributes imported on first use, and a package that fails to load beside torch named
where the import fails."""
import importlib
import traceback
from importlib import metadata
from typing import Callable, Dict, Iterable, Optional, Tuple

from .errors import PackageError

#: Packages built for one torch release each (pyterrier-rag declares them, unpinned): beside another
#: torch they fail to load, and transformers then cannot import its models. Nothing here imports them.
TORCH_COMPANIONS = ('torchvision', 'torchaudio')


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return '(version unknown)'


def companion_error(error: BaseException) -> Optional[PackageError]:
    """A :class:`~pyterrier_utility.errors.PackageError` naming the package of :data:`TORCH_COMPANIONS`
    whose loading raised ``error`` (or an exception it was raised from), the installed torch and the
    fix; ``None`` when no such package's import is among the frames.

    Example::

        try:
            import transformers.models.llama
        except Exception as e:
            raise (companion_error(e) or e) from None
    """
    seen = set()
    cause: Optional[BaseException] = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        for frame, _ in traceback.walk_tb(cause.__traceback__):
            package = (frame.f_globals.get('__name__') or '').split('.')[0]
            if package in TORCH_COMPANIONS and frame.f_code.co_name == '<module>':
                said = str(cause).strip().splitlines()
                return PackageError(
                    f'{package} {_version(package)} does not load beside torch {_version("torch")} '
                    f'({type(cause).__name__}: {said[0] if said else ""}), and transformers cannot import its '
                    f'models without it; nothing here needs {" or ".join(TORCH_COMPANIONS)}: pip uninstall -y '
                    f'{" ".join(TORCH_COMPANIONS)} (the install page, on a CPU machine)')
        cause = cause.__cause__ or cause.__context__
    return None


def lazy_module(namespace: dict, names: Dict[str, str], modules: Iterable[str] = ()) -> Tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of a package (``namespace``: its ``globals()``) whose
    public ``names`` (name -> submodule) and ``modules`` are imported when first asked for, then
    kept in its namespace. An import that fails because a package does not load beside torch raises
    :class:`~pyterrier_utility.errors.PackageError` saying which and the fix (:func:`companion_error`)."""
    package = namespace['__name__']
    modules = frozenset(modules)

    def __getattr__(name: str):
        if name not in modules and name not in names:
            raise AttributeError(f'module {package!r} has no attribute {name!r}')
        try:
            module = importlib.import_module(f'{package}.{name if name in modules else names[name]}')
        except Exception as e:
            found = companion_error(e)
            if found is None:
                raise
            raise found from None
        value = module if name in modules else getattr(module, name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names) | modules)
    return __getattr__, __dir__
