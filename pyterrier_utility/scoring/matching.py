"""BERTScore's greedy matching: each token matched to its most similar token on the other side,
weighted (idf or uniform, special tokens 0), as bert_score's ``greedy_cos_idf``, for many
candidates against many references in one tensor operation."""
from typing import List, Tuple

import torch


def padded(embeddings: List[torch.Tensor], weights: List[torch.Tensor]) -> Tuple[torch.Tensor, ...]:
    """Unit token embeddings padded into one tensor (texts x tokens x dimension), their weights
    normalised to sum to 1 per text, and the mask of real tokens."""
    lens = [e.shape[0] for e in embeddings]
    dim = embeddings[0].shape[1]
    emb = torch.zeros(len(embeddings), max(lens), dim)
    w = torch.zeros(len(embeddings), max(lens))
    mask = torch.zeros(len(embeddings), max(lens), dtype=torch.bool)
    for i, (e, wi) in enumerate(zip(embeddings, weights)):
        emb[i, :lens[i]] = e
        w[i, :lens[i]] = wi
        mask[i, :lens[i]] = True
    return emb, w / w.sum(dim=1, keepdim=True), mask


def greedy_match(candidates: Tuple[torch.Tensor, ...], references: Tuple[torch.Tensor, ...]
                 ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Precision, recall and F1 of every candidate against every reference (each candidates x
    references), from the :func:`padded` candidates and references."""
    cand_emb, cand_w, cand_mask = candidates
    ref_emb, ref_w, ref_mask = references
    # sim[c, r, a, l]: token a of candidate c against token l of reference r
    sim = torch.einsum('cad,rld->cral', cand_emb, ref_emb)
    pair_mask = cand_mask[:, None, :, None] & ref_mask[None, :, None, :]
    sim = sim.masked_fill(~pair_mask, float('-inf'))
    precision = (sim.max(dim=3).values.nan_to_num(0, neginf=0) * cand_w[:, None, :]).sum(-1)
    recall = (sim.max(dim=2).values.nan_to_num(0, neginf=0) * ref_w[None, :, :]).sum(-1)
    f1 = (2 * precision * recall / (precision + recall)).nan_to_num(0.0)
    return precision, recall, f1
