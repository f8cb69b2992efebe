"""Prefill chunks at line boundaries and the LRU cache of prefix KV caches."""
from types import SimpleNamespace

import torch

from pyterrier_utility.backends.hf.prefix import PrefixCache, line_chunks


def offsets_of(words):
    """Offsets of one token per word of ``words`` (a word may end with a newline)."""
    out, at = [], 0
    for w in words:
        out.append((at, at + len(w)))
        at += len(w)
    return ''.join(words), out


def test_chunks_end_at_line_starts_once_long_enough():
    text, offsets = offsets_of(['a', 'b\n', 'c', 'd', 'e\n', 'f\n', 'g', 'h'])
    assert line_chunks(text, offsets, 1) == [2, 5, 6, 8]
    assert line_chunks(text, offsets, 3) == [5, 8]  # 'a b' is too short to end at 'c'
    assert line_chunks(text, offsets, 100) == [8]


def test_chunks_of_a_shared_prefix_are_shared():
    short, a = offsets_of(['h', 'h\n', 'x', 'x', 'x\n', 'q', 'q'])
    longer, b = offsets_of(['h', 'h\n', 'x', 'x', 'x\n', 'y', 'y\n', 'q', 'q'])
    ends_a, ends_b = line_chunks(short, a, 2), line_chunks(longer, b, 2)
    assert ends_a[:-1] == ends_b[:len(ends_a) - 1] == [2, 5]


def fake_cache(tokens: int):
    """A cache-like object of ``tokens`` positions, 4 bytes each for keys and for values."""
    tensor = torch.zeros(tokens, dtype=torch.float32)
    return SimpleNamespace(layers=[SimpleNamespace(keys=tensor, values=tensor.clone())])


def test_longest_cached_prefix_is_found_and_copied():
    cache = PrefixCache(10_000)
    ids = torch.arange(10)
    cache.put(ids, 3, fake_cache(3))
    cache.put(ids, 6, fake_cache(6))
    end, kv = cache.longest(ids, [3, 6, 10])
    assert end == 6 and kv.layers[0].keys.shape == (6,)
    kv.layers[0].keys += 1  # a copy: the cached state is not changed by the caller
    assert cache.longest(ids, [3, 6, 10])[1].layers[0].keys.sum() == 0
    assert cache.longest(ids, [3, 10])[0] == 3
    other = torch.arange(10) + 1
    assert cache.longest(other, [3, 6, 10]) == (0, None)


def test_last_chunk_is_never_taken_from_the_cache():
    cache = PrefixCache(10_000)
    ids = torch.arange(6)
    cache.put(ids, 6, fake_cache(6))
    assert cache.longest(ids, [3, 6]) == (0, None)  # its logits are needed


def test_memory_is_bounded_least_recently_used_first():
    cache = PrefixCache(100)  # bytes: 12 tokens of the fake caches
    ids = torch.arange(20)
    cache.put(ids, 5, fake_cache(5))    # 40 bytes
    cache.put(ids, 6, fake_cache(6))    # 48 bytes
    cache.longest(ids, [5, 20])         # 5 is now the most recently used
    cache.put(ids, 4, fake_cache(4))    # 32 bytes: 6 is evicted
    assert cache.bytes == 72 and len(cache) == 2
    assert cache.longest(ids, [6, 20]) == (0, None)
    cache.put(ids, 15, fake_cache(15))  # larger than the whole budget: not kept
    assert cache.bytes == 72
    assert PrefixCache(0).max_bytes == 0
    nothing = PrefixCache(0)
    nothing.put(ids, 5, fake_cache(5))
    assert len(nothing) == 0
