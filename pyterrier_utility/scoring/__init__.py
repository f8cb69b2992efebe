"""Scoring answers: BERTScore (:mod:`.bertscore`), the paper's P(a) (:mod:`.fbert`), quality against
gold answers (:mod:`.gold`), an LLM judge's grade (:mod:`.judge`), TREC RAG's nugget recall
(:mod:`.nuggets`), context utility U (:mod:`.utility`) and correlations between per-query scores
(:mod:`.correlation`). Modules are imported when first used."""
from .._lazy import lazy_module

_MODULES = ('bertscore', 'correlation', 'fbert', 'gold', 'judge', 'nuggets', 'utility')
__all__ = list(_MODULES)
__getattr__, __dir__ = lazy_module(globals(), {}, _MODULES)
