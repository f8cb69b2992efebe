"""oneDNN's cache of compiled matrix-product kernels, bounded for a reader's decode.

torch computes bfloat16 products on CPUs through oneDNN, which compiles a kernel (a primitive) for each
shape it meets and keeps up to 1024 of them. A decode meets a new shape at nearly every step (attention
over one more key; rows leaving the batch), so the cache fills with kernels used once, about 0.4 GiB of
them for the offline reader. A few dozen hold every shape a step reuses; see the docs' Performance page.
"""
import os

#: The most compiled kernels oneDNN keeps (its own default is 1024); ``ONEDNN_PRIMITIVE_CACHE_CAPACITY``
#: set before the first product overrides it.
PRIMITIVE_CACHE_CAPACITY = 64


VARIABLE = 'ONEDNN_PRIMITIVE_CACHE_CAPACITY'
#: Whether :func:`bound_primitive_cache` set the variable (a value the environment gave is left alone).
_set_here = False


def bound_primitive_cache() -> None:
    """Bounds oneDNN's kernel cache at :data:`PRIMITIVE_CACHE_CAPACITY` unless the environment sets it:
    oneDNN reads the variable when it compiles its first kernel, so this runs when the package is
    imported. The values computed are the same at any capacity (a kernel evicted is compiled again alike)."""
    global _set_here
    if VARIABLE not in os.environ:
        os.environ[VARIABLE] = str(PRIMITIVE_CACHE_CAPACITY)
        _set_here = True


def engine_environment(environment: dict) -> dict:
    """``environment`` for another engine's process (a vLLM or llama.cpp server): without the bound this
    package set, so that the engine runs at its own defaults; a value the user gave is kept."""
    if _set_here and environment.get(VARIABLE) == str(PRIMITIVE_CACHE_CAPACITY):
        return {k: v for k, v in environment.items() if k != VARIABLE}
    return environment
