"""The logits a decode step reads."""
import torch


def float_rows(logits: torch.Tensor) -> torch.Tensor:
    """The last position's logits of each row, in float32 and contiguous, whatever their layout."""
    return logits[:, -1].to(torch.float32, memory_format=torch.contiguous_format)
