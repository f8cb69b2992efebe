"""The one factory of reader backends: a reader name to its backend, for the command line, the Python API
and Ray's actors alike, by the engine's description (:mod:`~pyterrier_utility.engines`)."""
from typing import Optional, Sequence, Union

from pyterrier_rag.backend import Backend

from .. import engines
from ..errors import SettingError


def get_backend(spec: Union[str, Backend], *, base_urls: Optional[Sequence[str]] = None, **kwargs) -> Backend:
    """A reader backend from a name, with the decoding settings in ``kwargs`` (temperature, top_k,
    max_new_tokens, ...), all honoured by every engine; the rest of the decoding is the engine's
    (:mod:`~pyterrier_utility.engines`: the offline models' own, the paper's for a named model).

    ``'gemma3-270m'`` and ``'smollm2-135m'``: the offline models; ``'huggingface:MODEL'``:
    :class:`~pyterrier_utility.backends.CausalLMBackend`; ``'openai:MODEL'``:
    :class:`~pyterrier_utility.backends.OpenAICompatibleBackend` over ``base_urls``; ``'vllm:MODEL'``:
    :class:`~pyterrier_utility.backends.VLLMBackend`; ``'llamacpp:MODEL'``:
    :class:`~pyterrier_utility.backends.LlamaCppServerBackend` over ``base_urls``.

    Example::

        get_backend('openai:meta-llama/Meta-Llama-3-8B-Instruct', base_urls=['http://127.0.0.1:8000/v1'],
                    temperature=0.3, top_k=50, max_new_tokens=300, concurrency=16)
    """
    if isinstance(spec, Backend):
        return spec
    if not isinstance(spec, str):
        raise SettingError(f'reader must be a name or a Backend, got {spec!r}; names: {engines.reader_names()}')
    engine = engines.engine_of(spec)
    if base_urls is not None:
        if not engine.server:
            raise SettingError(f'base URLs are for {" and ".join(f"{e}:MODEL" for e in engines.server_engines())} '
                               f'readers, not {spec!r}')
        kwargs['base_urls'] = base_urls
    return engine.build(spec, **kwargs)
