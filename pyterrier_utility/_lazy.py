"""PEP 562 module attributes imported on first use."""
import importlib
from typing import Callable, Dict, Iterable, Tuple


def lazy_module(namespace: dict, names: Dict[str, str], modules: Iterable[str] = ()) -> Tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of a package (``namespace``: its ``globals()``) whose
    public ``names`` (name -> submodule) and ``modules`` are imported when first asked for, then
    kept in its namespace."""
    package = namespace['__name__']
    modules = frozenset(modules)

    def __getattr__(name: str):
        if name in modules:
            value = importlib.import_module(f'{package}.{name}')
        elif name in names:
            value = getattr(importlib.import_module(f'{package}.{names[name]}'), name)
        else:
            raise AttributeError(f'module {package!r} has no attribute {name!r}')
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names) | modules)
    return __getattr__, __dir__
