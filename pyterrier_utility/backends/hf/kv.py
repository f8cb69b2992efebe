"""KV cache layers that decode into buffers allocated once per batch, where Hugging Face's dynamic
layers concatenate (a copy of the whole cache per step and layer). Written against the layer classes
of the transformers versions the project pins (``DynamicLayer``, ``DynamicSlidingWindowLayer``)."""
from typing import Optional, Sequence

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
