"""Related evaluators and systems beside context utility: eRAG (:mod:`.erag`), LLM-retEval
(:mod:`.reteval`) and COS-Mix (:mod:`.cosmix`). Modules are imported when first used."""
from .._lazy import lazy_module

_MODULES = ('cosmix', 'erag', 'reteval')
__all__ = list(_MODULES)
__getattr__, __dir__ = lazy_module(globals(), {}, _MODULES)
