"""A causal-LM inference runtime for the study's reader on CPUs and GPUs, behind the narrow interface
every backend has (``generate(prompts, seeds=...)`` -> answers, ``generation_key``).

- ``backend``: :class:`CausalLMBackend`, prefill per prompt and batching;
- ``loop``: the decode loop;
- ``sampling``: the seeded sampler, top-p, min-p and the repetition penalty;
- ``kv``: KV cache layers decoding into preallocated buffers, a prompt's keys held once for its samples;
- ``layers``: weight-major linear layers for decode steps;
- ``prefix``: line chunks and the LRU of prefix KV caches;
- ``dtype``: the dtype a model runs in.
"""
from .backend import CausalLMBackend
from .dtype import DTYPES, cpu_has_fast_bf16, resolve_dtype

__all__ = ['CausalLMBackend', 'DTYPES', 'cpu_has_fast_bf16', 'resolve_dtype']
