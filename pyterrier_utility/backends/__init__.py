"""Reader backends, one module per engine, and :func:`get_backend` to build one from a name.

- :class:`CausalLMBackend`: a Hugging Face causal LM in this process (CPU or GPU).
- :class:`OpenAICompatibleBackend`: any OpenAI-compatible server, or a pool of them.
- :class:`VLLMBackend`: vLLM in this process, on one GPU node or with vLLM's CPU build.
- :class:`LlamaCppServerBackend`: llama.cpp's server, the decoding under its field names.
- :class:`RayBackend`: any of these as a pool of Ray actors, past one machine.
- :func:`gemma3_270m`, :func:`smollm2_135m`: the offline models shipped in PyPI wheels.

Any other :class:`pyterrier_rag.backend.Backend` drives the Reader too.
"""
from typing import Optional, Sequence, Union

from pyterrier_rag.backend import Backend

from .. import engines
from ..errors import SettingError
from ._base import Answer, call_changes, call_settings, cut_at_stop, work_batches
from ._llamacpp import LlamaCppServerBackend
from ._offline import gemma3_270m, gemma3_270m_gguf, gemma3_270m_path, smollm2_135m
from ._openai import OpenAICompatibleBackend
from ._ray import RayBackend
from ._vllm import VLLMBackend
from .hf import CausalLMBackend

#: The engines a reader name may start with.
ENGINES = engines.ENGINES
#: The reader names accepted, for messages.
reader_names = engines.reader_names


def get_backend(spec: Union[str, Backend], *, base_urls: Optional[Sequence[str]] = None, **kwargs) -> Backend:
    """A reader backend from a name, with the decoding settings in ``kwargs`` (temperature, top_k,
    max_new_tokens, ...), all honoured by every engine; the rest of the decoding is the engine's
    (:mod:`~pyterrier_utility.engines`: the offline models' own, the paper's for a named model).

    ``'gemma3-270m'`` and ``'smollm2-135m'``: the offline models; ``'huggingface:MODEL'``:
    :class:`CausalLMBackend`; ``'openai:MODEL'``: :class:`OpenAICompatibleBackend` over ``base_urls``;
    ``'vllm:MODEL'``: :class:`VLLMBackend`; ``'llamacpp:MODEL'``: :class:`LlamaCppServerBackend` over
    ``base_urls``.

    Example::

        get_backend('openai:meta-llama/Meta-Llama-3-8B-Instruct', base_urls=['http://127.0.0.1:8000/v1'],
                    temperature=0.3, top_k=50, max_new_tokens=300, concurrency=16)
    """
    if isinstance(spec, Backend):
        return spec
    if not isinstance(spec, str):
        raise SettingError(f'reader must be a name or a Backend, got {spec!r}; names: {reader_names()}')
    engine = engines.engine_of(spec)
    if base_urls is not None:
        if not engine.server:
            raise SettingError(f'base URLs are for {" and ".join(f"{e}:MODEL" for e in engines.SERVER_ENGINES)} '
                               f'readers, not {spec!r}')
        kwargs['base_urls'] = base_urls
    return engine.build(spec, **kwargs)


__all__ = ['Answer', 'CausalLMBackend', 'ENGINES', 'LlamaCppServerBackend', 'OpenAICompatibleBackend', 'RayBackend',
           'VLLMBackend', 'call_changes', 'call_settings', 'cut_at_stop', 'gemma3_270m', 'gemma3_270m_gguf',
           'gemma3_270m_path', 'get_backend', 'reader_names', 'smollm2_135m', 'work_batches']
