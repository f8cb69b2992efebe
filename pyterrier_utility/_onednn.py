"""The caches of compiled matrix-product kernels torch keeps on CPUs, bounded for a reader's decode.

torch computes bfloat16 products on CPUs through oneDNN, which compiles a kernel (a primitive) for each
shape it meets. Two caches keep them, 1024 each by default: oneDNN's own, and the one torch's oneDNN
bindings (ideep) keep of the products they built, with their descriptions and work buffers. A decode
meets a new shape at nearly every step (attention over one more key; rows leaving the batch), so both
fill with kernels used once: for the offline reader's two replica threads, about 0.4 GiB in oneDNN's
cache and 0.6 GiB more in torch's. A few dozen hold every shape a step reuses; see the docs'
Performance page. Both variables are read at the process's first bfloat16 product, so a process that
computed with torch before importing this package keeps both defaults.
"""
import os

#: The most kernels each cache keeps (their own defaults are 1024); a variable of :data:`VARIABLES` set
#: before the first product overrides it.
PRIMITIVE_CACHE_CAPACITY = 64

#: oneDNN's cache, then torch's (ideep's ``LRU_CACHE_CAPACITY``).
VARIABLES = ('ONEDNN_PRIMITIVE_CACHE_CAPACITY', 'LRU_CACHE_CAPACITY')
#: The variables :func:`bound_primitive_cache` set (one the environment gave is left alone).
_set_here: set = set()


def bound_primitive_cache() -> None:
    """Bounds both kernel caches at :data:`PRIMITIVE_CACHE_CAPACITY` unless the environment sets them:
    each is read when the first kernel is compiled, so this runs when the package is imported. The
    values computed are the same at any capacity (a kernel evicted is compiled again alike)."""
    for variable in VARIABLES:
        if variable not in os.environ:
            os.environ[variable] = str(PRIMITIVE_CACHE_CAPACITY)
            _set_here.add(variable)


def engine_environment(environment: dict) -> dict:
    """``environment`` for another engine's process (a vLLM or llama.cpp server): without the bounds this
    package set, so that the engine runs at its own defaults; a value the user gave is kept."""
    return {k: v for k, v in environment.items()
            if not (k in _set_here and v == str(PRIMITIVE_CACHE_CAPACITY))}
