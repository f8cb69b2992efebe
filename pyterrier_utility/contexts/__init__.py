"""What the reader is given: oracle contexts of relevant or non-relevant documents (:mod:`.oracle`),
orderings and windows of a ranking (:mod:`.order`) and saved runs as systems (:mod:`.runs`).
Modules are imported when first used."""
from .._lazy import lazy_module

_MODULES = ('oracle', 'order', 'runs')
__all__ = list(_MODULES)
__getattr__, __dir__ = lazy_module(globals(), {}, _MODULES)
