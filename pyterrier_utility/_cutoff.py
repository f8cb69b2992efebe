"""Rank cutoffs fused into transformers that return a given number of documents."""
import copy


def with_fewer_results(transformer, k: int):
    """``transformer`` itself when it returns at most ``k`` documents, else a copy returning ``k``: the
    ``fuse_rank_cutoff`` of transformers whose top k is exactly what ``num_results=k`` gives."""
    if k >= transformer.num_results:
        return transformer
    fused = copy.copy(transformer)
    fused.num_results = k
    return fused
