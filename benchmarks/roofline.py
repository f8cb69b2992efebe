"""The machine's limit for a causal LM's work, measured: a roofline floor for generation.

Two rates are measured on this machine, in the model's dtype:

- **matmul rate**: the best FLOP/s of ``torch.nn.functional.linear`` over the shapes the model's
  layers run at (prefill chunks of tens to hundreds of tokens; decode batches of 1 to 32 rows);
- **memory bandwidth**: the best bytes/s of reading a weight-sized tensor once (a sum over it).

Every forward pass of the model is recorded while the project answers (hooks on the decoder and
the output layer: rows, new tokens, cached tokens). A pass cannot take less than the larger of its
FLOPs at the matmul rate and its bytes at the bandwidth:

- FLOPs: 2 x tokens x the decoder's linear weights, attention (4 x heads x head size x new tokens x
  visible tokens per layer, a sliding-window layer seeing at most its window), and the output layer
  for the rows whose logits are kept (2 x rows x hidden x vocabulary);
- bytes: the decoder's weights, the output layer's when it runs, and the KV cache that attention
  reads (rows x visible tokens x KV heads x head size x 2 for keys and values).

The floor is the sum over passes. It leaves out what is not a matrix product or a weight read:
norms, activations, sampling, the Python around the model. It is a floor, not an estimate.

The exact reader (:mod:`pyterrier_utility.backends.hf.exact`) computes each layer's product as two int8
products (an activation's high and low 7-bit parts against 8-bit weights), so its floor is twice the
products' operations at the best int8 rate: ``int8_rates`` measures both of its kernels, oneDNN's quantized
linear layer on packed weights (``exact_ops.packed_product``) and ``torch._int_mm``, at the model's shapes.

Usage: python benchmarks/roofline.py [--tflop 52] [--threads N]
       (prints the rates, and the floor of that many TFLOP of a layer's products in bfloat16 and in the
       exact reader's int8 parts)
"""
import argparse
import time
from dataclasses import dataclass, field
from typing import List, Tuple

import torch


def _best(fn, repeats: int = 5, min_seconds: float = 0.2) -> float:
    """The fastest of ``repeats`` timings of ``fn``, each repeated for at least ``min_seconds``."""
    fn()
    best = float('inf')
    for _ in range(repeats):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = min(best, elapsed / n)
    return best


def matmul_rates(hidden: int, intermediate: int, dtype=torch.bfloat16) -> List[Tuple[int, int, int, float]]:
    """``(rows, in, out, FLOP/s)`` of ``linear`` at the model's shapes."""
    rates = []
    for rows in (1, 8, 32, 128, 512):
        for n_in, n_out in ((hidden, intermediate), (intermediate, hidden)):
            x = torch.randn(rows, n_in, dtype=dtype)
            w = torch.randn(n_out, n_in, dtype=dtype)
            seconds = _best(lambda: torch.nn.functional.linear(x, w))
            rates.append((rows, n_in, n_out, 2 * rows * n_in * n_out / seconds))
    return rates


def int8_rates(hidden: int, intermediate: int) -> List[Tuple[str, int, int, int, float]]:
    """``(kernel, rows, in, out, operations/s)`` of the exact reader's int8 products at the model's shapes: each
    of ``rows`` activation rows is two int8 rows (its high and low parts), so one call does
    ``2 * 2 * rows * in * out`` operations."""
    from pyterrier_utility.backends.hf import exact_ops
    rates = []
    for rows in (1, 8, 32, 128, 512):
        for n_in, n_out in ((hidden, intermediate), (intermediate, hidden)):
            weight = torch.randint(-exact_ops.WEIGHT_LIMIT, exact_ops.WEIGHT_LIMIT + 1, (n_out, n_in), dtype=torch.int8)
            q = torch.randint(-exact_ops.ACTIVATION_LIMIT, exact_ops.ACTIVATION_LIMIT + 1, (rows, n_in)).float()
            ops = 2 * 2 * rows * n_in * n_out
            split = exact_ops.parts(q).view(2 * rows, n_in).t()
            seconds = _best(lambda: exact_ops.int_mm(weight, split))
            rates.append(('int_mm', rows, n_in, n_out, ops / seconds))
            if exact_ops.packable(weight):
                packed = exact_ops.packed(weight)
                unsigned = exact_ops.unsigned_parts(q).view(2 * rows, n_in)
                seconds = _best(lambda: exact_ops.packed_product(unsigned, packed, n_out))
                rates.append(('qlinear', rows, n_in, n_out, ops / seconds))
    return rates


def bandwidth(nbytes: int = 512 * 2**20, dtype=torch.bfloat16) -> float:
    """Bytes/s of reading a tensor of ``nbytes`` once (larger than any cache)."""
    x = torch.ones(nbytes // torch.tensor([], dtype=dtype).element_size(), dtype=dtype)
    return nbytes / _best(lambda: x.sum(), repeats=5, min_seconds=0.5)


@dataclass
class Shape:
    """What the roofline needs of a model (read from its config and weights)."""
    decoder_params: int
    head_params: int
    hidden: int
    intermediate: int
    vocab: int
    layers: List[int]  # each layer's window (0: full attention)
    heads: int
    kv_heads: int
    head_dim: int
    itemsize: int

    @classmethod
    def of(cls, model) -> 'Shape':
        config = model.config
        decoder = model.get_decoder()
        linear = sum(m.weight.numel() for m in decoder.modules() if isinstance(m, torch.nn.Linear))
        head = model.get_output_embeddings().weight
        window = getattr(config, 'sliding_window', None) or 0
        types = getattr(config, 'layer_types', None) or ['full_attention'] * config.num_hidden_layers
        return cls(decoder_params=linear, head_params=head.numel(), hidden=config.hidden_size,
                   intermediate=getattr(config, 'intermediate_size', 4 * config.hidden_size),
                   vocab=head.shape[0], layers=[window if t == 'sliding_attention' else 0 for t in types],
                   heads=config.num_attention_heads, kv_heads=config.num_key_value_heads,
                   head_dim=getattr(config, 'head_dim', config.hidden_size // config.num_attention_heads),
                   itemsize=head.element_size())


@dataclass
class Passes:
    """The forward passes of a model, recorded by hooks: ``(rows, new tokens, cached tokens)`` for
    the decoder and the rows of the output layer (0 where the pass kept no logits)."""
    decoder: List[Tuple[int, int, int]] = field(default_factory=list)
    head_rows: List[int] = field(default_factory=list)
    _handles: list = field(default_factory=list)

    def attach(self, model) -> 'Passes':
        def on_decoder(module, args, kwargs):
            ids = kwargs.get('input_ids', args[0] if args else None)
            past = kwargs.get('past_key_values')
            cached = past.get_seq_length() if past is not None else 0
            self.decoder.append((ids.shape[0], ids.shape[1], int(cached)))
            self.head_rows.append(0)

        def on_head(module, args):
            self.head_rows[-1] = args[0].shape[0] * args[0].shape[1]

        self._handles = [model.get_decoder().register_forward_pre_hook(on_decoder, with_kwargs=True),
                         model.get_output_embeddings().register_forward_pre_hook(on_head)]
        return self

    def detach(self):
        for handle in self._handles:
            handle.remove()

    def floor(self, shape: Shape, rate: float, bytes_per_s: float) -> dict:
        """The roofline floor in seconds, with its parts (compute- and memory-bound passes)."""
        total = compute = memory = 0.0
        flops_all = bytes_all = 0
        for (rows, new, cached), head_rows in zip(self.decoder, self.head_rows):
            tokens = rows * new
            flops = 2 * tokens * shape.decoder_params
            nbytes = shape.decoder_params * shape.itemsize
            for window in shape.layers:
                # each new token sees the cached tokens and the new ones before it (mean over the chunk)
                seen = cached + (new + 1) / 2
                visible = min(seen, window) if window else seen
                flops += 4 * shape.heads * shape.head_dim * tokens * visible
                kv = min(cached + new, window) if window else cached + new
                nbytes += rows * kv * shape.kv_heads * shape.head_dim * 2 * shape.itemsize
            if head_rows:
                flops += 2 * head_rows * shape.hidden * shape.vocab
                nbytes += shape.head_params * shape.itemsize
            t_compute, t_memory = flops / rate, nbytes / bytes_per_s
            total += max(t_compute, t_memory)
            compute += t_compute if t_compute >= t_memory else 0.0
            memory += t_memory if t_memory > t_compute else 0.0
            flops_all += flops
            bytes_all += nbytes
        return {'seconds': total, 'compute_bound_s': compute, 'memory_bound_s': memory,
                'flops': flops_all, 'bytes': bytes_all, 'passes': len(self.decoder)}


def machine(shape: Shape, dtype=torch.bfloat16) -> Tuple[float, float, list]:
    """The best matmul rate at the model's shapes, the bandwidth, and every rate measured."""
    rates = matmul_rates(shape.hidden, shape.intermediate, dtype)
    return max(r for *_, r in rates), bandwidth(dtype=dtype), rates


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--tflop', type=float, default=52.0,
                        help="TFLOP of the layers' products to give the floor of")
    parser.add_argument('--threads', type=int, default=None, help="torch's threads (default: torch's own)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f'{torch.get_num_threads()} threads')
    bf16 = matmul_rates(640, 2048)
    for rows, n_in, n_out, rate in bf16:
        print(f'linear bf16 {rows:4d} x {n_in:5d} -> {n_out:5d}: {rate / 1e12:6.3f} TFLOP/s')
    int8 = int8_rates(640, 2048)
    for kernel, rows, n_in, n_out, rate in int8:
        print(f'exact int8 {kernel:8s} {rows:4d} x {n_in:5d} -> {n_out:5d}: {rate / 1e12:6.3f} Tops/s '
              '(two int8 products a row)')
    for dtype in (torch.bfloat16, torch.float32):
        print(f'read once ({dtype}): {bandwidth(dtype=dtype) / 1e9:6.1f} GB/s')
    best_bf16 = max(r for *_, r in bf16)
    best_int8 = max(r for *_, r in int8)
    print(f'floor of {args.tflop:g} TFLOP of products: bfloat16 {args.tflop * 1e12 / best_bf16:.1f} s at '
          f'{best_bf16 / 1e12:.3f} TFLOP/s; exact int8 parts ({2 * args.tflop:g} Tops) '
          f'{2 * args.tflop * 1e12 / best_int8:.1f} s at {best_int8 / 1e12:.3f} Tops/s')


if __name__ == '__main__':
    main()
