"""How much prefix cache a study needs: the grid's prompts replayed through ``PrefixCache``.

The prompts of the paper-shaped grid (``bench_generation.grid_prompts``) are tokenized and chunked
exactly as ``CausalLMBackend`` does and looked up and stored in alphabetical order, as it answers
them, under several budgets. No model runs: each stored prefix has the size Gemma 3 270M's KV cache
would have (from its config, in bfloat16), so this replays the cache's decisions, not the prefill.
At the default budget it reproduces the prefilled token count ``bench_generation.py`` measures.

Usage: python benchmarks/bench_prefix_memory.py [--queries 2] [--k-max 10]
"""
import argparse

import torch
from bench_generation import grid_prompts


class _Sized:
    """Stands in for a KV cache of ``tokens`` tokens in the replay."""

    def __init__(self, tokens: int):
        self.tokens = tokens


def kv_bytes(config, tokens: int, element_size: int = 2) -> int:
    """The bytes of a KV cache of ``tokens`` tokens: sliding-window layers keep ``window - 1``."""
    window = getattr(config, 'sliding_window', None)
    kinds = getattr(config, 'layer_types', None) or ['full_attention'] * config.num_hidden_layers
    kept = sum(min(tokens, window - 1) if kind == 'sliding_attention' and window else tokens for kind in kinds)
    return kept * 2 * config.num_key_value_heads * config.head_dim * element_size


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--queries', type=int, default=2)
    parser.add_argument('--k-max', type=int, default=10)
    parser.add_argument('--depth', type=int, default=20)
    parser.add_argument('--budgets-mb', type=int, nargs='+', default=[0, 32, 64, 128, 256, 512, 1024])
    args = parser.parse_args()
    import pyterrier_utility as pu
    from pyterrier_utility.backends.hf import prefix as _prefix
    backend = pu.backends.gemma3_270m()
    config = backend.model.config.get_text_config()
    prompts = sorted(grid_prompts(args.queries, range(1, args.k_max + 1), args.depth), key=backend.prompt_order)
    chunked = []
    for prompt in prompts:
        ids, ends = backend._tokenize(prompt)
        chunked.append((ids, ends))
    asked = sum(len(ids) for ids, _ in chunked)
    print(f'{len(prompts)} distinct prompts ({args.queries} queries, k=1..{args.k_max}, 6 systems + 0-shot), '
          f'{asked} prompt tokens; prefix sizes of Gemma 3 270M in bfloat16 ({kv_bytes(config, 1) // 1024} KiB '
          f'a token below its sliding window)')
    sizes, copies = _prefix._nbytes, _prefix._copy
    _prefix._nbytes = lambda cache: kv_bytes(config, cache.tokens)
    _prefix._copy = lambda cache: cache
    try:
        for mb in args.budgets_mb:
            cache = _prefix.PrefixCache(mb * 2**20)
            prefilled = 0
            for ids, ends in chunked:
                start, _ = cache.longest(ids, ends)
                prefilled += len(ids) - start
                for end in ends[:-1]:
                    if end > start:
                        cache.put(ids, end, _Sized(end))
            print(f'prefix_cache_mb={mb:5d}: {prefilled:7d} tokens prefilled ({asked / prefilled:4.2f}x fewer '
                  f'than asked), {cache.bytes / 2**20:6.0f} MiB kept in {len(cache)} prefixes')
    finally:
        _prefix._nbytes, _prefix._copy = sizes, copies


if __name__ == '__main__':
    torch.set_grad_enabled(False)
    main()
