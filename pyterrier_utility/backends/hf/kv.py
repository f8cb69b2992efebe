"""KV cache layers that decode into buffers allocated once per batch, where Hugging Face's dynamic
layers concatenate (a copy of the whole cache per step and layer). Written against the layer classes
of the transformers versions the project pins (``DynamicLayer``, ``DynamicSlidingWindowLayer``).

- buffered layers (:func:`buffered`) hold a padded batch: each prompt's keys and values repeated for
  each of its rows, left-padded to the longest, as Hugging Face's attention reads them;
- shared layers (:func:`shared`) hold each prompt's keys and values once, however many rows (samples)
  decode from it, and each row's decoded tokens apart: read by the batch-invariant attention
  (:func:`~.invariant.batch_invariant_attention`), which attends over the two parts.
"""
from typing import Any, Iterator, List, Optional, Sequence, Tuple

import torch
from transformers.cache_utils import DynamicLayer, DynamicSlidingWindowLayer


class _Buffered:
    """A KV cache layer that decodes into a preallocated buffer: each step writes its token in place
    where Hugging Face's dynamic layers concatenate (a copy of the whole cache per step and layer).
    The keys and values it returns are the same tensors' values, as views of the buffer."""

    def start_buffer(self, keys: torch.Tensor, values: torch.Tensor, room: int) -> None:
        self.start_merged([(keys, values, keys.shape[0])], room)

    def start_merged(self, parts: Sequence[tuple], room: int) -> None:
        """The buffer of several caches' ``(keys, values, rows)``, one under the other, each repeated
        to its ``rows`` and left-padded with zeros to the longest, with ``room`` tokens to decode into:
        one copy of each cache."""
        keys = parts[0][0]
        size = max(k.shape[-2] for k, _, _ in parts)
        shape = [sum(n for _, _, n in parts), *keys.shape[1:]]
        shape[-2] = size + room
        self._k, self._v = keys.new_empty(shape), keys.new_empty(shape)
        row = 0
        for k, v, n in parts:
            pad = size - k.shape[-2]
            if pad:
                self._k[row:row + n, ..., :pad, :] = 0
                self._v[row:row + n, ..., :pad, :] = 0
            self._k[row:row + n, ..., pad:size, :] = k
            self._v[row:row + n, ..., pad:size, :] = v
            row += n
        self._n = size
        self.keys, self.values = self._k[..., :size, :], self._v[..., :size, :]

    def _append(self, key_states: torch.Tensor, value_states: torch.Tensor):
        n, t = self._n, key_states.shape[-2]
        if n + t > self._k.shape[-2]:  # past the room asked for: grow
            self.start_buffer(self._k[..., :n, :], self._v[..., :n, :], max(t, n))
        self._k[..., n:n + t, :] = key_states
        self._v[..., n:n + t, :] = value_states
        self._n = n + t
        return self._k[..., :n + t, :], self._v[..., :n + t, :]

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        kept = self.keys.shape[-2]  # a sliding-window layer keeps only its last tokens
        self._k, self._v = self._k[indices], self._v[indices]
        self.keys, self.values = self._k[..., self._n - kept:self._n, :], self._v[..., self._n - kept:self._n, :]


class _BufferedLayer(_Buffered, DynamicLayer):
    def update(self, key_states, value_states, *args, **kwargs):
        self.keys, self.values = self._append(key_states, value_states)
        return self.keys, self.values


class _BufferedSlidingLayer(_Buffered, DynamicSlidingWindowLayer):
    def update(self, key_states, value_states, *args, **kwargs):
        # As the sliding-window layer: attention sees the kept window plus the new tokens, and
        # the last ``sliding_window - 1`` tokens are kept.
        kept = self.keys.shape[-2]
        self.cumulative_length += key_states.shape[-2]
        keys, values = self._append(key_states, value_states)
        seen = kept + key_states.shape[-2]
        keys, values = keys[..., -seen:, :], values[..., -seen:, :]
        self.keys, self.values = keys[..., -self.sliding_window + 1:, :], values[..., -self.sliding_window + 1:, :]
        return keys, values


def _compact(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` alone: a sliding-window layer's keys are a view of the whole prefill chunk's, which the
    view would otherwise keep."""
    whole = tensor.untyped_storage().nbytes()
    return tensor if whole == tensor.numel() * tensor.element_size() else tensor.clone()


class _Shared:
    """A KV cache layer whose rows decode from prompts held once: each prompt's keys and values (one
    row, as its prefill left them) and, apart, each row's decoded tokens, in a buffer with room for
    them. Rows of a prompt are consecutive. The keys :meth:`update` returns are the rows' decoded
    ones, marked with the layer (``shared_kv``) for the attention to find the prompts'. The masks
    Hugging Face builds keep the padded batch's sizes (the prompts padded to the longest); the
    attention reads the layer instead."""
    keys: Optional[torch.Tensor]
    values: Optional[torch.Tensor]

    def start_shared(self, prompts: Sequence[Tuple[torch.Tensor, torch.Tensor]], counts: Sequence[int],
                     room: int, longest: int) -> None:
        self.prompts: List[Optional[Tuple[torch.Tensor, torch.Tensor]]] = [
            (_compact(k), _compact(v)) for k, v in prompts]
        self._set_owner([i for i, n in enumerate(counts) for _ in range(n)])
        keys = prompts[0][0]
        shape = (len(self.owner), keys.shape[1], room, keys.shape[-1])
        self._k, self._v = keys.new_empty(shape), keys.new_empty(shape)
        self._n = 0
        self.padded = longest
        self.keys, self.values = self._k[..., :0, :], self._v[..., :0, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        n, t = self._n, key_states.shape[-2]
        if n + t > self._k.shape[-2]:  # past the room asked for: grow
            more = (*self._k.shape[:2], max(n, t), self._k.shape[-1])
            self._k = torch.cat([self._k[..., :n, :], self._k.new_empty(more)], dim=-2)
            self._v = torch.cat([self._v[..., :n, :], self._v.new_empty(more)], dim=-2)
        self._k[..., n:n + t, :] = key_states
        self._v[..., n:n + t, :] = value_states
        self._n = n + t
        if hasattr(self, 'cumulative_length'):
            self.cumulative_length += t
        self.keys, self.values = self._k[..., :self._n, :], self._v[..., :self._n, :]
        keys, values = self.decoded()
        keys.shared_kv = self  # type: ignore[attr-defined]  # read by the batch-invariant attention
        return keys, values

    def _visible(self) -> Tuple[Optional[int], int]:
        """How many of each prompt's tokens and of the decoded ones the last token attends to
        (``None``: all of the prompt's): a sliding window's last tokens only."""
        window = getattr(self, 'sliding_window', None)
        if window is None:
            return None, self._n
        return max(0, window - self._n), min(self._n, window)

    def decoded(self) -> Tuple[torch.Tensor, torch.Tensor]:
        """The rows' decoded keys and values the last token attends to, (rows, heads, tokens, dim)."""
        own = self._visible()[1]
        return self._k[..., self._n - own:self._n, :], self._v[..., self._n - own:self._n, :]

    def prompt_spans(self) -> Iterator[Tuple[int, int, torch.Tensor, torch.Tensor]]:
        """``(first row, end row, keys, values)``: each run of rows decoding from one prompt, with the
        prompt's keys and values the last token attends to, (1, heads, tokens, dim)."""
        limit = self._visible()[0]
        for first, end in self._runs:
            keys, values = self.prompts[self.owner[first]]  # type: ignore[misc]  # an owner's prompt is kept
            if limit is not None:
                start = max(0, keys.shape[-2] - limit)
                keys, values = keys[..., start:, :], values[..., start:, :]
            yield first, end, keys, values

    def _set_owner(self, owner: List[int]) -> None:
        """Each row's prompt, and the runs of rows of one prompt (``(first, end)``), found once per batch
        and after rows leave it, not at each step and layer."""
        self.owner, self._runs, first = owner, [], 0
        for row in range(1, len(owner) + 1):
            if row == len(owner) or owner[row] != owner[first]:
                self._runs.append((first, row))
                first = row

    def get_seq_length(self) -> int:
        return self.padded + self._n

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._k, self._v = self._k[indices], self._v[indices]
        self._set_owner([self.owner[i] for i in indices.tolist()])
        kept = set(self.owner)
        self.prompts = [p if i in kept else None for i, p in enumerate(self.prompts)]
        self.keys, self.values = self._k[..., :self._n, :], self._v[..., :self._n, :]


class _SharedLayer(_Shared, DynamicLayer):
    pass


class _SharedSlidingLayer(_Shared, DynamicSlidingWindowLayer):
    def get_seq_length(self) -> int:
        return self.cumulative_length


def shared(layer, prompts: Sequence[Tuple[torch.Tensor, torch.Tensor]], counts: Sequence[int], room: int,
           longest: int):
    """A dynamic layer as a shared one (:class:`_Shared`): ``prompts``' keys and values (each of its
    own prefill, one row) decoded from by ``counts`` rows each, with ``room`` tokens for each row to
    decode into; ``longest``: the longest prompt's length, the padded batch's that Hugging Face's masks
    are built for. ``None`` for another kind of layer."""
    kind: Any = {_BufferedLayer: _SharedLayer, _BufferedSlidingLayer: _SharedSlidingLayer}.get(buffer_kind(layer))
    if kind is None:
        return None
    layer_shared = kind.__new__(kind)
    layer_shared.__dict__.update(layer.__dict__)
    layer_shared.start_shared(prompts, counts, room, longest)
    if hasattr(layer_shared, 'cumulative_length'):
        layer_shared.cumulative_length = longest
    return layer_shared


def buffer_kind(layer):
    """The buffered class for a dynamic layer, or ``None`` for another kind of layer."""
    if type(layer) is DynamicLayer:
        return _BufferedLayer
    if type(layer) is DynamicSlidingWindowLayer and not layer.record_past:
        return _BufferedSlidingLayer
    return None


def buffered(layer, room: int, parts: Optional[Sequence[tuple]] = None):
    """A dynamic layer as a buffered one with ``room`` tokens to decode into, holding ``parts``
    (``(keys, values, rows)`` of several caches, see :meth:`_Buffered.start_merged`) or the layer's
    own keys and values; another kind of layer is returned as it is, to decode as its class does."""
    kind = buffer_kind(layer)
    if kind is None:
        return layer
    buffered = kind.__new__(kind)
    buffered.__dict__.update(layer.__dict__)
    buffered.start_merged(parts or [(layer.keys, layer.values, layer.keys.shape[0])], room)
    return buffered
