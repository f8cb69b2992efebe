"""BERTScore's greedy matching: each token matched to its most similar token on the other side,
weighted (idf or uniform, special tokens 0), as bert_score's ``greedy_cos_idf``.

Each (candidate, reference) pair is matched on its own tensors, of the pair's own shapes: no padding
enters a product or a sum, so a pair's values are the same bits whatever else is scored beside it
(padding changes the length of a sum, and with it the order its terms are added in)."""
from typing import Sequence, Tuple

import torch

#: A text as the matching takes it: its unit token embeddings (tokens x dimension) and its tokens'
#: weights, normalised to sum to 1.
Matchable = Tuple[torch.Tensor, torch.Tensor]


def matchable(embedding: torch.Tensor, weights: torch.Tensor) -> Matchable:
    """A text's unit token embeddings with its weights normalised to sum to 1 (NaN where all are 0)."""
    return embedding, weights / weights.sum()


def greedy_match(candidates: Sequence[Matchable], references: Sequence[Matchable]) -> torch.Tensor:
    """Precision, recall and F1 of every candidate against every reference: a (3, candidates,
    references) float32 tensor, each pair computed alone."""
    out = torch.empty(3, len(candidates), len(references))
    for c, (cand, cand_w) in enumerate(candidates):
        for r, (ref, ref_w) in enumerate(references):
            sim = cand @ ref.T  # token a of the candidate against token l of the reference
            precision = (sim.max(dim=1).values * cand_w).sum()
            recall = (sim.max(dim=0).values * ref_w).sum()
            out[0, c, r], out[1, c, r] = precision, recall
    out[2] = (2 * out[0] * out[1] / (out[0] + out[1])).nan_to_num(0.0)
    return out
