"""The dtype a causal LM runs in: bfloat16 on CPUs with bf16 matrix instructions, else float32 there;
the model's own on an accelerator."""
import re
from pathlib import Path
from typing import Optional, Union

import torch

from ..._checks import check

#: dtypes a backend can be asked for by name.
DTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16, 'float16': torch.float16}
#: The name of exact forward passes (:mod:`~.exact`): integer products, float parts in a fixed order.
EXACT = 'exact'


def cpu_has_fast_bf16() -> bool:
    """True when this CPU has bfloat16 matrix instructions (AMX-BF16 or AVX512-BF16), which torch
    uses for bf16 matmuls (several times fp32's speed); read from ``/proc/cpuinfo`` (Linux)."""
    try:
        flags = Path('/proc/cpuinfo').read_text()
    except OSError:
        return False
    return re.search(r'\b(amx_bf16|avx512_bf16)\b', flags) is not None


def resolve_dtype(dtype: Union[str, torch.dtype, None],
                  device: Union[str, torch.device, None]) -> Optional[torch.dtype]:
    """The dtype a model runs in: ``'auto'`` is bfloat16 on a CPU with fast bf16 and float32 on
    other CPUs; on an accelerator, the model's own dtype (``None`` here: left as loaded)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, 'auto'):
        if device is not None and torch.device(device).type != 'cpu':
            return None
        return torch.bfloat16 if cpu_has_fast_bf16() else torch.float32
    check(dtype in DTYPES, 'CausalLMBackend', f"dtype must be 'auto', {EXACT!r}, one of {list(DTYPES)} or a "
                                              f'torch.dtype, got {dtype!r}')
    return DTYPES[dtype]


def run_dtype(dtype: Union[str, torch.dtype, None],
              device: Union[str, torch.device, None]) -> Union[torch.dtype, str]:
    """What a model runs in: :data:`EXACT` when asked, else :func:`resolve_dtype`'s (``'auto'`` on an
    accelerator: the model's own)."""
    if dtype == EXACT:
        return EXACT
    return resolve_dtype(dtype, device) or 'auto'
