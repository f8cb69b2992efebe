"""Reader backends, one module per engine, and :func:`get_backend` to build one from a name.

- :class:`CausalLMBackend`: a Hugging Face causal LM in this process (CPU or GPU).
- :class:`OpenAICompatibleBackend`: any OpenAI-compatible server, or a pool of them.
- :class:`VLLMBackend`: vLLM in this process, on one GPU node or with vLLM's CPU build.
- :class:`LlamaCppServerBackend`: llama.cpp's server, the decoding under its field names.
- :class:`ThreadBackend`: a model on this machine's CPU as threads of this process, one torch thread each,
  one per core; :class:`ProcessBackend`: the same as processes, each holding its own interpreter.
- :class:`RayBackend`: any of these as a pool of Ray actors, past one machine.
- :func:`gemma3_270m`, :func:`smollm2_135m`: the offline models shipped in PyPI wheels.

What the backends share is public here: :class:`Answer` (an answer and what the engine says about it),
:func:`work_batches` (the batches prompts are answered in) and :func:`check_call_settings` (a backend
answers by the decoding it holds, not by a length or stops given with a call). Any other
:class:`pyterrier_rag.backend.Backend` drives the Reader too.
"""
from ..engines import reader_names
from ._base import Answer, check_call_settings, cut_at_stop, work_batches
from ._llamacpp import LlamaCppServerBackend
from ._offline import gemma3_270m, gemma3_270m_gguf, gemma3_270m_path, smollm2_135m
from ._openai import OpenAICompatibleBackend
from ._processes import ProcessBackend
from ._ray import RayBackend
from ._replica import cpu_replicas
from ._threads import ThreadBackend
from ._vllm import VLLMBackend
from .factory import get_backend
from .hf import CausalLMBackend

__all__ = ['Answer', 'CausalLMBackend', 'LlamaCppServerBackend', 'OpenAICompatibleBackend', 'ProcessBackend',
           'RayBackend', 'ThreadBackend', 'VLLMBackend', 'check_call_settings', 'cpu_replicas', 'cut_at_stop',
           'gemma3_270m', 'gemma3_270m_gguf', 'gemma3_270m_path', 'get_backend', 'reader_names', 'smollm2_135m',
           'work_batches']
