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


class CutAsFused:
    """A transformer whose ``% k`` is its own cut (its ``fuse_rank_cutoff``) whether or not the pipeline is
    compiled: ``pt.Experiment`` runs a pipeline as it is built, and the fused cut is the one that says
    which queries get fewer than k documents. ``% k`` is PyTerrier's, compiled at once."""

    def __mod__(self, k: int):
        return super().__mod__(k).compile()  # type: ignore[misc]  # beside pt.Transformer
