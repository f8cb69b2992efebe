"""The logits a decode step reads."""
from typing import Optional

import torch


def float_rows(logits: torch.Tensor, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The last position's logits of each row, in float32 and contiguous, whatever their layout; written
    into the first rows of ``out`` (a float32 buffer of at least as many rows) where given."""
    last = logits[:, -1]
    if out is None:
        return last.to(torch.float32, memory_format=torch.contiguous_format)
    return out[:last.shape[0]].copy_(last)
