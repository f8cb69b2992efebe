"""Related evaluators and systems beside context utility: eRAG (:mod:`.erag`), LLM-retEval
(:mod:`.reteval`), COS-Mix (:mod:`.cosmix`), the attribution of U to the documents of a
context (:mod:`.attribution`) and each document's utility for one reader, with that reader's own utility
oracle (:mod:`.llm_utility`). Modules are imported when first used."""
from .._lazy import lazy_module

_MODULES = ('attribution', 'cosmix', 'erag', 'llm_utility', 'reteval')
__all__ = list(_MODULES)
__getattr__, __dir__ = lazy_module(globals(), {}, _MODULES)
