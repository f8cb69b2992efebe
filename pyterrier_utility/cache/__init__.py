"""The generation cache: :class:`GenerationCache`, a backend wrapping another so that each distinct
(backend, settings, prompt, seed) is generated once; :mod:`~pyterrier_utility.cache.keys` says how an
answer is keyed and :mod:`~pyterrier_utility.cache.store` where it is kept (memory, or an SQLite file).
"""
from .backend import GenerationCache

__all__ = ['GenerationCache']
