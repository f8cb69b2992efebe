"""A deprecated name of :mod:`pyterrier_utility.rerankers`, holding the same functions."""
from .rerankers import RERANKERS, cached_scorer, minilm_path, minilm_reranker, monot5_reranker, reranker

__all__ = ['RERANKERS', 'cached_scorer', 'minilm_path', 'minilm_reranker', 'monot5_reranker', 'reranker']
