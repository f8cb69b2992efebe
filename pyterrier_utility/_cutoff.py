"""Rank cutoffs fused into transformers that return a given number of documents."""
import copy

from ._checks import check_k


def with_fewer_results(transformer, k: int):
    """``transformer`` itself when it returns at most ``k`` documents, else a copy returning ``k``: the
    ``fuse_rank_cutoff`` of transformers whose top k is exactly what ``num_results=k`` gives (``k``
    checked as every k is, :func:`~pyterrier_utility._checks.check_k`)."""
    check_k(f'{type(transformer).__name__} % k', k)
    if k >= transformer.num_results:
        return transformer
    fused = copy.copy(transformer)
    fused.num_results = k
    return fused
