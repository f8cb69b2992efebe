"""The readers' engines, each described once: its name, whether it is a server, the decoding settings
it honours and those it applies its own way, the study's options it takes, the prompt format and
decoding its models need, and how to build it.

The backends, :func:`~pyterrier_utility.backends.get_backend`, the Ray backend, the study's config and
its checks read these descriptions, as pyterrier-rag's backends dispatch on one description each.
Adding an engine is its backend's module and one :class:`Engine` in :data:`ENGINES_BY_NAME`. This
module imports no engine: a study's settings are checked before any is loaded.

Example::

    from pyterrier_utility.engines import engine_of
    engine_of('vllm:meta-llama/Meta-Llama-3-8B-Instruct').server       # False: in process
    engine_of('gemma3-270m').prompt_format                              # 'example'
"""
import dataclasses
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Tuple

from .errors import SettingError
from .settings import FIELDS, ONE_LINE_STOP, Decoding


@dataclass(frozen=True)
class EngineOptions:
    """The study's options for the engines, one value (``StudyConfig.engine``); a reader's backend is
    given those its engine's description takes (:attr:`Engine.options`), and one set for a reader whose
    engine does not take it is refused.

    Args:
        base_urls: the servers, each ending in ``/v1`` (empty: each server engine's own default port).
        concurrency: requests in flight.
        endpoint: ``'completions'`` (the raw prompt) or ``'chat'`` (a chat message).
        tensor_parallel_size: GPUs per vLLM model.
        chat_template: wrap the prompt in the model's chat template.
        reproducible: fresh answers the same on every run (each engine's ``reproducibility`` says how).
        timeout: seconds per request.
        max_retries: retries of a failed request.
        retry_deadline: seconds after a prompt's first attempt when it is not tried again (``None``: none).

    Example::

        StudyConfig(readers=('openai:m',), engine=EngineOptions(base_urls=('http://gpu1:8000/v1',), concurrency=32))
    """
    base_urls: Tuple[str, ...] = ()
    concurrency: int = 8
    endpoint: str = 'completions'
    tensor_parallel_size: int = 1
    chat_template: bool = False
    reproducible: bool = False
    timeout: float = 600.0
    max_retries: int = 5
    retry_deadline: Optional[float] = None

    def __post_init__(self):
        object.__setattr__(self, 'base_urls', tuple(self.base_urls))

    def replace(self, **changes) -> 'EngineOptions':
        """A copy with some options changed."""
        return dataclasses.replace(self, **changes)

    def refused_by(self, engine: 'Engine') -> Tuple[str, ...]:
        """The options set to other than their defaults that ``engine`` does not take. Fresh answers
        that are the same on every run (``reproducible``) are asked of every engine: those that give
        them unasked (the offline and Hugging Face models) take no such option, and are not refused it."""
        return tuple(name for name in ENGINE_OPTION_NAMES if name != 'reproducible' and not engine.takes(name)
                     and getattr(self, name) != getattr(_DEFAULT_OPTIONS, name))

    def for_engine(self, engine: 'Engine') -> Dict[str, Any]:
        """The backend keywords of ``engine``: the options it takes (``base_urls`` a list, left out when
        empty so that each server engine uses its own default port)."""
        options: Dict[str, Any] = {name: getattr(self, name) for name in engine.options}
        if 'base_urls' in options:
            options['base_urls'] = list(self.base_urls)
            if not self.base_urls:
                del options['base_urls']
        return options


#: The names of :class:`EngineOptions`, which ``StudyConfig`` also takes one by one.
ENGINE_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(EngineOptions))
_DEFAULT_OPTIONS = EngineOptions()
#: What a pool of servers is told: where they are, how many requests fly at once, how they are asked,
#: how long to wait and how often to try again.
SERVER_OPTIONS = ('base_urls', 'concurrency', 'endpoint', 'timeout', 'max_retries', 'retry_deadline')
#: The decoding settings that tell a base model's needs from an instruction-tuned one's: the study gives
#: a reader of another kind than its preset's these from the reader's engine (see :func:`kind_decoding`).
KIND_FIELDS = ('repetition_penalty', 'repeat_last_n', 'stop')
#: A penalty window is llama.cpp's (``penalty_last_n``); vLLM counts every prompt and output token.
_NO_WINDOW = frozenset(FIELDS) - {'repeat_last_n'}

#: What the offline base models need, chosen by measurement on the study's main job
#: (``benchmarks/bench_offline_reader.py``; the docs' Getting started, the offline reader): at most 96 new
#: tokens, a repetition penalty over the last 64 tokens (over every prompt token, the longer the context
#: the likelier an empty answer) and the answer ended at its line's end, as the worked example of their
#: prompt format shows (they repeat themselves and ignore "STOP").
OFFLINE_DECODING = Decoding(max_new_tokens=96, repetition_penalty=1.2, repeat_last_n=64, stop=ONE_LINE_STOP)


@dataclass(frozen=True)
class Engine:
    """One engine of readers, described once.

    Attributes:
        name: the engine's part of a reader name (``ENGINE:MODEL``); ``'offline'`` for the models that
            ship in PyPI wheels, named alone.
        builder: ``'module:attribute'`` of what builds its backend, called with the model and the
            backend's keywords (the offline models' with the keywords alone); imported when first used.
        server: reached over HTTP, as a pool of servers (``base_urls``, ``concurrency``, retries).
        honours: the :class:`~pyterrier_utility.settings.Decoding` fields it honours (its backend's
            ``DECODING_FIELDS``); any other set is refused, unless it is in ``own_way``.
        own_way: fields it has no means to honour exactly and applies its own way, with how (said
            wherever the settings are printed, and in ``settings.json``).
        options: the study options (:class:`EngineOptions`) it takes, ``reproducible`` among them where
            it must be asked for answers that are the same on every run.
        decoding: how its models decode unless told otherwise: a backend built without a decoding
            takes it, and so does a study's reader of this kind (:func:`kind_decoding`).
        prompt_format: the prompt format its models need (a name of
            :data:`~pyterrier_utility.prompts.PROMPT_FORMATS`), which :class:`~pyterrier_utility.Reader`
            takes unless given another.
    """
    name: str
    builder: str
    server: bool = False
    honours: FrozenSet[str] = frozenset(FIELDS)
    own_way: Mapping[str, str] = field(default_factory=dict)
    options: Tuple[str, ...] = ()
    decoding: Decoding = Decoding()
    prompt_format: str = 'plain'

    def build(self, reader: str, **kwargs) -> Any:
        """The backend of the reader named ``reader`` (``ENGINE:MODEL``, or an offline reader's name),
        with the backend's keywords; a decoding not given is the engine's (:attr:`decoding`)."""
        if self.name == 'offline':
            return _imported(OFFLINE_MODELS[reader])(**kwargs)
        return _imported(self.builder)(reader.partition(':')[2], **kwargs)

    def takes(self, option: str) -> bool:
        """Whether a study option (see :class:`EngineOptions`) is given to this engine's backend."""
        return option in self.options


def _imported(path: str) -> Callable[..., Any]:
    module, _, attribute = path.partition(':')
    found: Any = importlib.import_module(module)
    for part in attribute.split('.'):
        found = getattr(found, part)
    return found


_BACKENDS = 'pyterrier_utility.backends'
#: The offline readers by name: small models that ship inside PyPI wheels, and what builds each.
OFFLINE_MODELS: Dict[str, str] = {'gemma3-270m': f'{_BACKENDS}._offline:gemma3_270m',
                                  'smollm2-135m': f'{_BACKENDS}._offline:smollm2_135m'}
#: The offline readers' names.
OFFLINE_READERS = tuple(OFFLINE_MODELS)
#: Every engine, by name.
ENGINES_BY_NAME: Dict[str, Engine] = {engine.name: engine for engine in (
    Engine('offline', builder='', decoding=OFFLINE_DECODING, prompt_format='example'),
    Engine('huggingface', builder=f'{_BACKENDS}.hf:CausalLMBackend.from_pretrained', options=('chat_template',)),
    Engine('openai', builder=f'{_BACKENDS}._openai:OpenAICompatibleBackend', server=True, honours=_NO_WINDOW,
           own_way={'repeat_last_n': "sent as repeat_last_n, which llama.cpp's server applies; vLLM's server "
                                     'ignores it and counts every prompt and output token'},
           options=SERVER_OPTIONS + ('reproducible',)),
    # vLLM's repetition penalty counts every token of the prompt and the output (``apply_penalties`` in
    # vllm/model_executor/layers/utils.py: its prompt and output masks), no window.
    Engine('vllm', builder=f'{_BACKENDS}._vllm:VLLMBackend', honours=_NO_WINDOW,
           own_way={'repeat_last_n': "not applied: vLLM's repetition penalty counts every prompt and output token"},
           options=('tensor_parallel_size', 'chat_template', 'reproducible')),
    Engine('llamacpp', builder=f'{_BACKENDS}._llamacpp:LlamaCppServerBackend', server=True,
           options=SERVER_OPTIONS + ('reproducible',)),
)}
#: The engines a reader name may start with (``ENGINE:MODEL``).
ENGINES = tuple(name for name in ENGINES_BY_NAME if name != 'offline')
#: The engines reached over HTTP, a pool of servers each.
SERVER_ENGINES = tuple(name for name in ENGINES if ENGINES_BY_NAME[name].server)


def build_backend(reader: str, **kwargs) -> Any:
    """The backend of a reader name, with the backend's keywords (see :meth:`Engine.build`)."""
    return engine_of(reader).build(reader, **kwargs)


def reader_names() -> str:
    """The reader names accepted, for messages."""
    return ', '.join(list(OFFLINE_READERS) + [f'{e}:MODEL' for e in ENGINES_BY_NAME if e != 'offline'])


def engine_name(reader: str) -> str:
    """``'offline'`` for an offline reader, else the engine of ``ENGINE:MODEL``; a
    :class:`~pyterrier_utility.errors.SettingError` lists the names accepted."""
    return engine_of(reader).name


def engine_of(reader: str) -> Engine:
    """The :class:`Engine` of a reader name; a :class:`~pyterrier_utility.errors.SettingError` lists the
    names accepted, and the nearest one to a mistyped name."""
    if reader in OFFLINE_READERS:
        return ENGINES_BY_NAME['offline']
    engine, _, model = reader.partition(':') if isinstance(reader, str) else ('', '', '')
    if engine in ENGINES_BY_NAME and engine != 'offline' and model:
        return ENGINES_BY_NAME[engine]
    import difflib
    near = difflib.get_close_matches(reader, OFFLINE_READERS, n=1) if isinstance(reader, str) else []
    hint = f' (did you mean {near[0]!r}?)' if near else ''
    raise SettingError(f'unknown reader {reader!r}{hint}; choose from {reader_names()}')


def kind_decoding(reader: str) -> Dict[str, Any]:
    """The decoding fields (:data:`KIND_FIELDS`) a reader's kind needs: a base model's penalty and stop,
    or an instruction-tuned model's none and the study's ``STOP``."""
    decoding = engine_of(reader).decoding
    return {name: getattr(decoding, name) for name in KIND_FIELDS}
