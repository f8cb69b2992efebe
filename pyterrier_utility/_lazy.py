"""PEP 562 module attributes imported on first use, and the earlier paths of moved modules."""
import importlib
import importlib.abc
import importlib.util
import sys
from typing import Callable, Dict, Iterable, Optional, Tuple


def lazy_module(namespace: dict, names: Dict[str, str], modules: Iterable[str] = (),
                moved: Optional[Dict[str, str]] = None) -> Tuple[Callable, Callable]:
    """The ``__getattr__`` and ``__dir__`` of a package (``namespace``: its ``globals()``) whose
    public ``names`` (name -> submodule) and ``modules`` are imported when first asked for, then
    kept in its namespace; ``moved`` (earlier name -> path now) keeps the attributes of modules that
    moved into subpackages (not listed by ``dir``)."""
    package = namespace['__name__']
    modules = frozenset(modules)
    moved = moved or {}

    def __getattr__(name: str):
        if name in modules:
            value = importlib.import_module(f'{package}.{name}')
        elif name in moved:  # not kept in the namespace: dir() lists the new paths only
            return importlib.import_module(f'{package}.{moved[name]}')
        elif name in names:
            value = getattr(importlib.import_module(f'{package}.{names[name]}'), name)
        else:
            raise AttributeError(f'module {package!r} has no attribute {name!r}')
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(names) | modules)
    return __getattr__, __dir__


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Keeps the earlier import paths of modules that moved into subpackages: ``import
    package.old`` (and ``package.old.sub``) gives the module at its new path, the same object, its
    own ``__spec__`` kept."""

    def __init__(self, package: str, moved: Dict[str, str]):
        self.package = package
        self.moved = moved
        self._specs: Dict[str, object] = {}

    def new_name(self, fullname: str) -> Optional[str]:
        """The module's path now, or ``None`` when ``fullname`` did not move."""
        prefix = self.package + '.'
        if not fullname.startswith(prefix):
            return None
        head, _, tail = fullname[len(prefix):].partition('.')
        if head not in self.moved:
            return None
        return prefix + self.moved[head] + ('.' + tail if tail else '')

    def find_spec(self, fullname, path=None, target=None):
        new = self.new_name(fullname)
        return None if new is None else importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        module = importlib.import_module(self.new_name(spec.name))  # type: ignore[arg-type]
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # The import system has set __spec__ to the old name's; the module keeps its own.
        module.__spec__ = self._specs.pop(module.__name__)


def install_moved(package: str, moved: Dict[str, str]) -> None:
    """Installs :class:`MovedModules` for ``package`` (once), first on ``sys.meta_path`` so that a
    submodule of a moved package is never found a second time under its old path."""
    if not any(isinstance(f, MovedModules) and f.package == package for f in sys.meta_path):
        sys.meta_path.insert(0, MovedModules(package, moved))
