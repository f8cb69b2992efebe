"""Bias-free bfloat16 linear layers computed weight-major (``w @ x.T``) for the few rows of a decode
step, bit for bit what ``linear`` gives there."""
import copy

import torch

#: The most rows a linear layer computes as ``w @ x.T`` (see :func:`weight_major`).
WEIGHT_MAJOR_ROWS = 32


class _WeightMajorLinear(torch.nn.Linear):
    """A bias-free linear layer computing ``w @ x.T`` for up to ``WEIGHT_MAJOR_ROWS`` rows.

    The product comes out transposed: the decoder's layers make it contiguous (the next operations
    view it); the output layer (``transposed_output``) returns it as a view, left for
    :func:`float_rows` to transpose while it converts to float32, one pass over the logits instead
    of two."""
    transposed_output = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        if rows > WEIGHT_MAJOR_ROWS:
            return torch.nn.functional.linear(x, self.weight)
        out = (self.weight @ x.reshape(rows, x.shape[-1]).T).T
        if not self.transposed_output:
            out = out.contiguous()
        return out.reshape(*x.shape[:-1], self.weight.shape[0])


def float_rows(logits: torch.Tensor) -> torch.Tensor:
    """The last position's logits of each row, in float32 and contiguous, whatever their layout."""
    return logits[:, -1].to(torch.float32, memory_format=torch.contiguous_format)


def weight_major(model):
    """``model`` with its bias-free bfloat16 linear layers computing ``w @ x.T`` for up to
    ``WEIGHT_MAJOR_ROWS`` rows: the same values as ``linear`` (bit for bit there, tested), faster on
    CPUs for the few rows of a decode step, where ``linear`` streams the weights well below the
    machine's bandwidth (measured in ``benchmarks/`` and the docs' Performance page). A structural
    copy: the caller's model is left as it is; the weights are shared."""
    tensors = [*model.parameters(), *model.buffers()]
    model = copy.deepcopy(model, {id(t): t for t in tensors})
    for module in model.modules():
        if (type(module) is torch.nn.Linear and module.bias is None
                and module.weight.dtype == torch.bfloat16 and module.weight.device.type == 'cpu'):
            module.__class__ = _WeightMajorLinear
    head = model.get_output_embeddings() if hasattr(model, 'get_output_embeddings') else None
    if isinstance(head, _WeightMajorLinear):
        head.transposed_output = True
    return model
