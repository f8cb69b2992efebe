"""Batch-invariant forward passes: the values computed for a row (its logits, hence its answer and
log-probabilities) depend on that row's own tokens alone, never on the rows decoded beside it.

Two things in a plain batched decode step make a row's values depend on its batch mates:

- **Attention over a padded cache.** Rows of different prompts are padded on the left to the longest,
  and a kernel's reductions over the keys (the softmax's sum, the weighted sum of values) group the
  row's terms differently when the padded length changes; torch's fused CPU kernel also splits the
  keys between threads for a single query. Here each row attends over its own keys only (no padding,
  no mask), by matrix products whose shapes are the row's own, on one thread (a BLAS splits a long sum
  over the keys between threads for some shapes): the same values alone or in any batch, on any number
  of threads. A batch-invariant decode holds each prompt's keys once, whatever its number of samples
  (:func:`~.kv.shared`): a row's products are over its prompt's keys and over its own decoded ones,
  apart (:func:`_attend_shared`); a padded batch's rows (layers that cannot be shared) attend in runs
  of rows over the same span of keys.
- **Matrix products whose kernel changes with the number of rows.** A CPU's BLAS picks another kernel
  (another order of summing) for a few rows than for many: in float32 on AVX2 CPUs one, two and three
  rows each differ from four or more; on others the change comes at 2 and 16 rows. Decode-step linear
  layers here compute at least ``row_tile`` rows (padding with zero rows), where ``row_tile`` is the
  fewest rows from which every row count up to the batch gives each row the same values, measured on
  the model's own layer shapes when the backend is built (:func:`row_tile`).

- **Sums split between threads.** torch sums one long row (a lone answer's 262k logits) on several
  threads, in another order than a row among others; the log-probabilities' normaliser is a sum of
  integers here, exact in any order (:func:`row_logsumexp`).

The prefill of a prompt is one prompt alone, in chunks fixed by its own lines: its shapes are its
own already. But a chunk can be hundreds of rows, and past a few dozen rows a CPU's BLAS splits the
rows between threads, giving the rows at the split another kernel than on one thread (measured on a
Xeon with AMX in bfloat16: from 79 rows for one layer shape of Gemma 3 270M). So every linear layer
computes in blocks of at most :data:`PROBE_ROWS` rows, the row counts the tile is measured at: a row's
values are then those it gets in its block alone, on any number of threads where the tile holds across
them. Everything else after the logits (the repetition penalty, top-k, the Gumbel race) is computed
element by element or exactly (a maximum, a selection).
"""
import contextlib
import copy
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch.nn import functional as F

from . import exact_ops

#: The name the batch-invariant attention is registered under with transformers.
ATTENTION = 'pyterrier_utility_batch_invariant'
#: The row tiles tried, smallest first (:func:`row_tile`).
TILES = (1, 2, 4, 8, 16, 32, 64)
#: The most rows the tile is measured at, and the most a linear layer computes at once: decode batches and
#: prefill chunks, which are longer, are computed in blocks of this many rows (a multiple of every tile).
PROBE_ROWS = 64
#: Output rows of each weight used to measure a layer shape's kernels (the kernel depends on the
#: rows and the inner size; the full output layer is checked at the tile found).
PROBE_OUTPUTS = 512


@contextlib.contextmanager
def one_thread():
    """torch's CPU operations inside run on one thread (its number of threads is restored after)."""
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _attend(tile: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float,
            mask: Optional[torch.Tensor], softcap: Optional[float]) -> torch.Tensor:
    """Attention by matrix products, grouped-query heads folded onto their key head: ``query``
    (B, H, Q, D), ``key``/``value`` (B, KV, L, D), an additive or boolean ``mask`` (B, 1, Q, L) or
    none; returns (B, Q, H, D). On a CPU the products run on one thread: their inner size is the
    number of keys, which a BLAS splits between threads for some shapes (measured on a Xeon with AMX
    in bfloat16: 36 rows over 1000 keys), so that several threads would sum a row in another order."""
    if query.device.type == 'cpu':
        with one_thread():
            return _attended(tile, query, key, value, scaling, mask, softcap)
    return _attended(tile, query, key, value, scaling, mask, softcap)


def _attended(tile: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, scaling: float,
              mask: Optional[torch.Tensor], softcap: Optional[float]) -> torch.Tensor:
    batch, heads, length, dim = query.shape
    kv = key.shape[1]
    group = heads // kv
    q = query.reshape(batch, kv, group * length, dim)
    scores = tiled_matmul(q, key.transpose(-1, -2), tile).float() * scaling
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    scores = scores.view(batch, kv, group, length, -1)
    if mask is not None:
        mask = mask[:, :, None]  # (B, 1, 1, Q, L): every head of a group
        scores = scores.masked_fill(~mask, float('-inf')) if mask.dtype == torch.bool else scores + mask
    weights = torch.softmax(scores, dim=-1).to(value.dtype).view(batch, kv, group * length, -1)
    # The product's rows are a slice of a padded one: the heads fold back by copying where padding was added.
    out = tiled_matmul(weights, value, tile).reshape(batch, heads, length, dim)
    return out.transpose(1, 2).contiguous()


def _attend_shared(tile: int, query: torch.Tensor, layer, scaling: float, softcap: Optional[float]) -> torch.Tensor:
    """A decode step's attention over a shared layer (:func:`~.kv.shared`): each row over its prompt's
    keys, held once, and its own decoded keys; ``query`` (B, H, 1, D); returns (B, 1, H, D). Each row's
    products are its own, of the shapes it has alone (a BLAS sums a product of more rows in another
    order); the softmax is over both parts at once, and the two parts' weighted values are summed in
    float32. On a CPU on one thread, as :func:`_attend`."""
    if query.device.type == 'cpu':
        with one_thread():
            return _attended_shared(tile, query, layer, scaling, softcap)
    return _attended_shared(tile, query, layer, scaling, softcap)


def _attended_shared(tile: int, query: torch.Tensor, layer, scaling: float, softcap: Optional[float]) -> torch.Tensor:
    rows, heads, _, dim = query.shape
    own_keys, own_values = layer.decoded()  # (rows, KV, own, D)
    kv, own = own_keys.shape[1], own_keys.shape[-2]
    group = heads // kv
    q = query.reshape(rows, kv, group, dim)
    flat = q.reshape(rows * kv, group, dim)
    # The rows' own keys, one product for all (each row its own batch entry): with one key, a second (zero)
    # one, as a lone row's product with one key is summed otherwise (float32, AMD EPYC).
    keys_t = own_keys.reshape(rows * kv, own, dim).transpose(1, 2)
    if own == 1:
        keys_t = torch.cat([keys_t, torch.zeros_like(keys_t)], dim=-1)
    own_scores = tiled_bmm(flat, keys_t, tile)[..., :own].view(rows, kv, group, own)
    prompt_outs, own_weights = [], []
    for first, end, keys, values in layer.prompt_spans():
        # The prompt's keys, held once: a product per row (a batch of them would copy the keys for each).
        length, prompt_t, values = keys.shape[-2], keys[0].transpose(1, 2), values[0]
        scores = torch.cat([torch.stack([tiled_bmm(q[row], prompt_t, tile) for row in range(first, end)]),
                            own_scores[first:end]], dim=-1).float() * scaling
        if softcap:
            scores = torch.tanh(scores / softcap) * softcap
        weights = torch.softmax(scores, dim=-1).to(values.dtype)  # (rows, KV, group, prompt + own)
        prompt_outs += [tiled_bmm(w[..., :length], values, tile) for w in weights]
        own_weights.append(weights[..., length:])
    mine = tiled_bmm(torch.cat(own_weights).reshape(rows * kv, group, own),
                     own_values.reshape(rows * kv, own, dim), tile)
    out = torch.stack(prompt_outs).float() + mine.view(rows, kv, group, dim).float()
    return out.reshape(rows, 1, heads, dim).to(query.dtype)


def _spans(mask: Optional[torch.Tensor], rows: int, length: int) -> List[Tuple[int, int, int]]:
    """``(first row, end row, first key)``: runs of consecutive decode rows attending to the same
    contiguous span of keys (a left-padded row starts after its padding; a sliding window cuts it)."""
    if mask is None:
        return [(0, rows, 0)]
    valid = mask[:, 0, -1, :]
    if valid.dtype != torch.bool:
        valid = valid == 0
    counts = valid.sum(-1)
    starts = (length - counts).tolist()
    if not bool((valid.int().argmax(-1) == length - counts).all()) or 0 in counts.tolist():
        raise RuntimeError('batch-invariant attention: a row attends to keys that are not one span ending at the last')
    spans, first = [], 0
    for row in range(1, rows + 1):
        if row == rows or starts[row] != starts[first]:
            spans.append((first, row, starts[first]))
            first = row
    return spans


def batch_invariant_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              attention_mask: Optional[torch.Tensor], dropout: float = 0.0,
                              scaling: Optional[float] = None, softcap: Optional[float] = None,
                              **kwargs) -> Tuple[torch.Tensor, None]:
    """transformers' attention interface, batch-invariant for decode steps (one query per row): each
    run of rows over its own keys; a prefill (several queries: one prompt's chunk) by the same matrix
    products under its causal mask."""
    if dropout:
        raise ValueError('batch-invariant attention is for inference: dropout must be 0')
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    tile = getattr(module, 'row_tile', 1)
    if query.shape[2] > 1:
        mask = attention_mask
        if mask is None:
            mask = torch.ones(query.shape[2], key.shape[-2], dtype=torch.bool, device=query.device).tril(
                key.shape[-2] - query.shape[2])[None, None]
        return _attend(tile, query, key, value, scale, mask, softcap), None
    shared = getattr(key, 'shared_kv', None)
    if shared is not None:
        return _attend_shared(tile, query, shared, scale, softcap), None
    length = key.shape[-2]
    mask = None if attention_mask is None else attention_mask[..., -length:]
    parts = [_attend(tile, query[a:b], key[a:b, :, start:], value[a:b, :, start:], scale, None, softcap)
             for a, b, start in _spans(mask, query.shape[0], length)]
    return (parts[0] if len(parts) == 1 else torch.cat(parts)), None


#: Columns :func:`row_logsumexp` exponentiates at a time: a whole row of a large vocabulary's terms is never
#: held at once.
SUM_CHUNK = 65536
#: The unit :func:`row_logsumexp` counts its terms in (each at most 1): 2**-30.
SUM_UNITS = 2**30


def row_logsumexp(x: torch.Tensor) -> torch.Tensor:
    """The log-sum-exp of each row of a 2-D float tensor, the same bits for a row alone or among any
    others, on any number of threads and any CPU: each term ``exp(x - max)`` (at most 1) is rounded to a
    whole number of 2**-30ths and the integers are summed exactly (in any order), :data:`SUM_CHUNK`
    columns at a time. torch's own sum adds in an order set by the threads and the vector width.

    A term is ``expm1(x - max) + 1`` in float64 (:func:`~.exact_ops.exp`), so its integer is that of
    ``expm1`` plus one unit's count, and the logarithm is :func:`~.exact_ops.log`: ``torch.exp`` and
    ``torch.log`` call MKL, whose last bits depend on the CPU."""
    top = x.amax(dim=-1, keepdim=True)  # exact in any order
    total = torch.zeros(x.shape[0], dtype=torch.int64, device=x.device)
    for start in range(0, x.shape[1], SUM_CHUNK):
        below = (x[:, start:start + SUM_CHUNK].float() - top).double()
        terms = torch.expm1(below).mul_(SUM_UNITS).round_()  # in [-SUM_UNITS, 0]: the term less one
        total += terms.to(torch.int32).sum(-1, dtype=torch.int64) + below.shape[1] * SUM_UNITS
    return top[:, 0].float() + exact_ops.log(total.to(torch.float64) / SUM_UNITS).to(torch.float32)


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    AttentionInterface.register(ATTENTION, batch_invariant_attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)


class TiledLinear(torch.nn.Linear):
    """A linear layer computing a whole number of ``row_tile`` rows (positions), padded with zero rows,
    so that every row is summed by the same kernel whatever the batch or the number of threads.

    With ``weight_major`` (bias-free bfloat16 layers on a CPU), a decode step (one position per row)
    is computed as ``w @ x.T``, which streams the weights faster than ``linear`` for a few rows; the
    output layer (``transposed_output``) then returns the product as a view, left for
    :func:`~.layers.float_rows` to transpose while it converts to float32."""
    row_tile = 1
    weight_major = False
    transposed_output = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // x.shape[-1]
        major = self.weight_major and x.dim() == 3 and x.shape[-2] == 1
        out = _product(self.weight, self.bias, x.reshape(rows, x.shape[-1]), self.row_tile, major)
        if major and not self.transposed_output:
            out = out.contiguous()
        return out.reshape(*x.shape[:-1], self.weight.shape[0])


def _padded(x: torch.Tensor, tile: int) -> torch.Tensor:
    """``x`` with zero rows (second to last dimension) added up to a multiple of ``tile``."""
    pad = -x.shape[-2] % tile
    return torch.cat([x, x.new_zeros(*x.shape[:-2], pad, x.shape[-1])], dim=-2) if pad else x


def tiled_matmul(a: torch.Tensor, b: torch.Tensor, tile: int) -> torch.Tensor:
    """``a @ b`` with ``a``'s rows padded to a multiple of ``tile`` (see :class:`TiledLinear`)."""
    rows = a.shape[-2]
    return torch.matmul(_padded(a, tile), b)[..., :rows, :]


def tiled_bmm(a: torch.Tensor, b: torch.Tensor, tile: int) -> torch.Tensor:
    """:func:`tiled_matmul` of two batches of matrices (3-D) by ``torch.bmm``: ``matmul`` computes a batch of
    one as a single product, which for a transposed ``b`` in bfloat16 copies it first (ten times slower)."""
    rows = a.shape[-2]
    return torch.bmm(_padded(a, tile), b)[:, :rows, :]


def _product(weight: torch.Tensor, bias: Optional[torch.Tensor], x: torch.Tensor, tile: int,
             major: bool) -> torch.Tensor:
    """``x`` times ``weight`` (plus ``bias``), its rows padded with zero rows to a multiple of ``tile``;
    ``major``: computed as ``w @ x.T`` and returned as a transposed view. More than :data:`PROBE_ROWS`
    rows are computed in blocks of that many."""
    rows = x.shape[0]
    if rows > PROBE_ROWS:
        return torch.cat([_product(weight, bias, x[start:start + PROBE_ROWS], tile, major)
                          for start in range(0, rows, PROBE_ROWS)])
    x = _padded(x, tile)
    if major:
        return (weight @ x.T)[:, :rows].T
    return F.linear(x, weight, bias)[:rows]


def _tile_holds(weight: torch.Tensor, rows: int, tile: int, major: bool,
                counts: Optional[Sequence[int]] = None, threads: Optional[Sequence[int]] = None) -> bool:
    """Whether, padded to multiples of ``tile``, each row count of ``counts`` (default: every one up to
    ``rows``) gives each row the values it gets among ``rows`` rows, at each number of ``threads``
    (default: one and several, this process's or two), random inputs in the weight's dtype."""
    x = torch.randn(rows, weight.shape[1], generator=torch.Generator().manual_seed(rows))
    x = x.to(weight.device, weight.dtype)
    current = torch.get_num_threads()
    full = _product(weight, None, x, tile, major)
    try:
        for count in threads or (1, max(current, 2)):
            torch.set_num_threads(count)
            if not all(torch.equal(_product(weight, None, x[:m], tile, major), full[:m])
                       for m in counts or _counts(rows)):
                return False
    finally:
        torch.set_num_threads(current)
    return True


def _counts(rows: int) -> List[int]:
    """The row counts a tile is checked at: each up to 24 (where kernels change), then every fifth."""
    return sorted({*range(1, min(rows, 24) + 1), *range(24, rows, 5), rows})


class Tiling(NamedTuple):
    """How a model's products are made batch-invariant (:func:`row_tile`)."""
    #: Every product's rows are padded to a multiple of it.
    tile: int
    #: The output layer's decode steps computed as ``w @ x.T`` (see :class:`TiledLinear`).
    head_major: bool
    #: ``None``: each row gets the same values on any number of threads; else on this many only (the
    #: process's own, where no tile holds across thread counts).
    threads: Optional[int]


#: Tilings found, by the layer shapes, rows and threads they were measured for.
_TILES: Dict[tuple, Optional[Tiling]] = {}


def row_tile(model, rows: int) -> Optional[Tiling]:
    """The :class:`Tiling` of :class:`TiledLinear` for ``model``'s decode steps of up to ``rows`` rows
    (and prefill chunks): the smallest tile in :data:`TILES` with which each row's values are the same
    at every row count up to ``rows`` or :data:`PROBE_ROWS`, on one thread as on several (this process's
    number, at least two),
    measured on each layer shape (the first :data:`PROBE_OUTPUTS` outputs of its weight; the output
    layer whole at a few row counts, weight-major or not); where none holds across thread counts, the
    smallest that holds at this process's; ``None`` where none holds at all. Measured once per process
    for each set of shapes (a few seconds for a small model)."""
    rows = max(rows, PROBE_ROWS)
    shapes: Dict[tuple, Tuple[torch.Tensor, bool]] = {}
    head = model.get_output_embeddings()
    for m in model.modules():
        if isinstance(m, TiledLinear) and m is not head:
            shapes.setdefault((tuple(m.weight.shape), m.weight.dtype, m.weight_major), (m.weight, m.weight_major))
    threads = torch.get_num_threads()
    key = (tuple(sorted(shapes, key=str)), rows, threads, str(next(model.parameters()).device))
    if key not in _TILES:
        _TILES[key] = _measured_tile(list(shapes.values()), rows, head, None)
        if _TILES[key] is None:
            _TILES[key] = _measured_tile(list(shapes.values()), rows, head, threads)
    return _TILES[key]


def _measured_tile(weights: Sequence[Tuple[torch.Tensor, bool]], rows: int, head,
                   threads: Optional[int]) -> Optional[Tiling]:
    counts = None if threads is None else [threads]
    head_majors = [True, False] if isinstance(head, TiledLinear) and head.weight_major else [False]
    for tile in TILES:
        # A weight-major layer computes a decode step as ``w @ x.T`` and a prefill chunk as ``linear``: both.
        if not all(_tile_holds(w[:PROBE_OUTPUTS], rows, tile, way, threads=counts)
                   for w, major in weights for way in ((True, False) if major else (False,))):
            continue
        if head is None:
            return Tiling(tile, False, threads)
        for major in head_majors:
            if (_tile_holds(head.weight[:PROBE_OUTPUTS], rows, tile, major, threads=counts)
                    and _tile_holds(head.weight, 2 * tile + 1, tile, major, (1, tile + 1), threads=counts)):
                return Tiling(tile, major, threads)
    return None


def tiled(model, weight_major: bool = False):
    """A structural copy of ``model`` (the weights shared; the caller's model is left as it is) with
    :class:`TiledLinear` layers, ``weight_major`` for its bias-free bfloat16 ones, at a row tile of 1
    (every product as ``linear`` computes it; :func:`batch_invariant` sets the tile)."""
    tensors = [*model.parameters(), *model.buffers()]
    model = copy.deepcopy(model, {id(t): t for t in tensors})
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.__class__ = TiledLinear
            # torch's Module types attributes as tensors or modules: set the layer's own plainly.
            module.__dict__.update(row_tile=1, transposed_output=False,
                                   weight_major=bool(weight_major and module.bias is None
                                                     and module.weight.dtype == torch.bfloat16))
    head = model.get_output_embeddings() if hasattr(model, 'get_output_embeddings') else None
    if isinstance(head, TiledLinear) and head.weight_major:
        head.transposed_output = True
    for sub in model.modules():  # a model made batch-invariant before attends as transformers does
        config = getattr(sub, 'config', None)
        if config is not None and getattr(config, '_attn_implementation', None) == ATTENTION:
            config._attn_implementation = 'sdpa'
    return model


def batch_invariant(model, rows: int) -> Optional[Tiling]:
    """Makes a :func:`tiled` model's forward passes batch-invariant for batches of up to ``rows`` rows,
    in place: its attention is :func:`batch_invariant_attention` and its layers compute whole tiles
    of rows, as :func:`row_tile` measured. Returns the tiling: ``None`` where no tile holds, and then
    only a batch of one row is batch-invariant (its products are each row's own, at this process's
    threads)."""
    _register()
    tiling = row_tile(model, rows)
    head = model.get_output_embeddings()
    for module in model.modules():
        if isinstance(module, TiledLinear) or hasattr(module, 'q_proj'):  # the linear layers, the attention
            module.row_tile = tiling.tile if tiling else 1
    if tiling is not None and isinstance(head, TiledLinear) and head.weight_major and not tiling.head_major:
        head.weight_major = head.transposed_output = False  # the output layer holds as ``linear`` computes it
    for sub in model.modules():  # a multimodal model's text config is its own
        config = getattr(sub, 'config', None)
        if config is not None:
            config._attn_implementation = ATTENTION
    return tiling


def threads_text(count: int) -> str:
    """``'1 thread'``, ``'2 threads'``."""
    return f'{count} thread' + ('' if count == 1 else 's')
