"""Prefill in fixed chunks at line boundaries, reusing the KV cache of prefixes seen before.

The prompts of a k-sweep nest: the prompt at k=3 starts with the k=1 prompt's instructions and
Context 1. A prompt is prefilled chunk by chunk, each chunk ending at a line boundary, and the KV
cache after each chunk is kept (least recently used evicted first). Chunks are a function of the
prompt's own tokens only, so a prompt is computed by the same sequence of forward passes whether
its prefix came from the cache or not: its answer never depends on what was cached before.
"""
import copy
import hashlib
import threading
from collections import OrderedDict
from typing import List, Optional, Sequence, Tuple

import torch


def line_chunks(text: str, offsets: Sequence[Tuple[int, int]], min_tokens: int) -> List[int]:
    """The token positions where chunks end (the last is ``len(offsets)``).

    A chunk ends before a token that starts a line, once the chunk holds at least ``min_tokens``
    tokens. Scanning from the left, the chunks of a prefix of whole lines are the same in every
    prompt that starts with it.
    """
    ends, start = [], 0
    for t, (begin, _) in enumerate(offsets):
        if t - start >= min_tokens and begin > 0 and text[begin - 1] == '\n':
            ends.append(t)
            start = t
    ends.append(len(offsets))
    return ends


def _digest(ids: torch.Tensor) -> bytes:
    return hashlib.blake2b(ids.to(torch.int64).cpu().numpy().tobytes(), digest_size=16).digest()


def _copy(cache):
    """A copy of a KV cache whose tensors are compact: a sliding-window layer's tensors are views of
    a larger one, which a deep copy would keep whole."""
    kept = copy.copy(cache)
    kept.layers = []
    for layer in cache.layers:
        layer = copy.copy(layer)
        for name, tensor in vars(layer).items():
            if isinstance(tensor, torch.Tensor):
                setattr(layer, name, tensor.clone())
        kept.layers.append(layer)
    return kept


def _nbytes(cache) -> int:
    return sum(tensor.numel() * tensor.element_size() for layer in getattr(cache, 'layers', ())
               for tensor in vars(layer).values() if isinstance(tensor, torch.Tensor))


class PrefixCache:
    """KV caches of prompt prefixes, keyed by their token ids, within a memory budget (LRU).

    Args:
        max_bytes: the most bytes of KV tensors kept; ``0`` keeps nothing (every prompt is
            prefilled from its first token, in the same chunks).
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: 'OrderedDict[bytes, Tuple[object, int]]' = OrderedDict()
        #: Threads answering with one backend's copies share the cache: one looks up or stores at a time.
        self._lock = threading.Lock()

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != '_lock'}

    def __setstate__(self, state):
        self.__dict__.update(state, _lock=threading.Lock())

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.bytes = 0

    def longest(self, ids: torch.Tensor, ends: Sequence[int]) -> Tuple[int, Optional[object]]:
        """The longest cached prefix ``ids[:end]`` among the chunk ends (the last excluded, whose
        logits are needed): its end and a copy of its KV cache, or ``(0, None)``."""
        for end in reversed(ends[:-1]):
            key = _digest(ids[:end])
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return end, _copy(self._entries[key][0])
        return 0, None

    def put(self, ids: torch.Tensor, end: int, cache) -> None:
        """Keeps a copy of the KV cache of ``ids[:end]``."""
        key = _digest(ids[:end])
        if self.max_bytes <= 0 or key in self._entries:
            return
        size = _nbytes(cache)
        if size > self.max_bytes:
            return
        kept = _copy(cache)
        with self._lock:
            if key in self._entries:
                return
            while self._entries and self.bytes + size > self.max_bytes:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.bytes -= dropped
            self._entries[key] = (kept, size)
            self.bytes += size
