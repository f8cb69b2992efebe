"""What the backends of this package share: a :class:`~pyterrier_utility.settings.Decoding` value held
by the backend, from which the generation key is derived and by which it answers (``generate``'s one
prologue, here), the scheduling of prompts into batches, and answers that say whether they were cut at
``max_new_tokens`` and, where the engine gives it, their log-probability."""
import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from pyterrier_rag.backend import Backend, BackendOutput

from ..errors import SettingError
from ..protocols import BatchedBackend, OrderedBackend
from ..settings import FIELDS, Decoding

#: Seconds between the waits of a thread that collects answers from others (a pool's requests, replica
#: threads or processes). Ctrl-C reaches that thread only while it runs: the kernel may deliver SIGINT
#: to another thread, and a wait with no end is then never woken (seen under load: the interrupt took
#: effect when the hung requests ended, 60 s later).
SIGNAL_POLL = 0.1


@dataclass
class Answer(BackendOutput):
    """A backend's answer and what the engine says about it.

    Attributes:
        truncated: generation stopped at ``max_new_tokens`` (the server's ``finish_reason: length``,
            or a local model's last token not an end of text or stop sequence); ``None``: unknown (a
            third-party backend, or an answer cached before this was recorded).
        logprob: the sequence log-probability: the sum, over the generated tokens (an end-of-text
            token included, tokens past a stop sequence's start too), of the model's log-probability
            of the chosen token before temperature, top-k or penalties; ``None`` where the engine
            gives none.
        tokens: the number of tokens ``logprob`` sums over.
        token_logprobs: each of those tokens' log-probability, in order (``logprob`` is their sum);
            ``None`` where the engine reports only the sum, or nothing.
    """
    truncated: Optional[bool] = False
    logprob: Optional[float] = None
    tokens: Optional[int] = None
    token_logprobs: Optional[Tuple[float, ...]] = None

    @property
    def mean_logprob(self) -> Optional[float]:
        """The mean token log-probability (``logprob / tokens``); ``None`` when unknown."""
        return self.logprob / self.tokens if self.logprob is not None and self.tokens else None


def split_decoding(owner: str, decoding: Optional[Decoding], default: Decoding, kwargs: dict) -> Decoding:
    """The decoding of a backend built with ``decoding`` and/or single fields among ``kwargs``
    (``temperature=0``), which are taken out of ``kwargs``."""
    changes = {name: kwargs.pop(name) for name in FIELDS if name in kwargs}
    if decoding is not None and not isinstance(decoding, Decoding):
        raise SettingError(f'{owner}: decoding must be a Decoding, got {decoding!r}')
    return (decoding or default).replace(**changes)


class DecodingBackendBase(Backend):
    """A backend whose answers are determined by its model, its :class:`Decoding` and the engine
    fields it names (``ENGINE_FIELDS``); its ``generation_key`` is derived from exactly these.

    The decoding is held, not given with each call: ``generate`` (written once, here) checks the call
    and hands prompts and seeds to the engine's ``_generate``, which applies :attr:`decoding`; another
    decoding is another backend (:meth:`with_settings`, the model shared).

    Subclasses declare ``DECODING_FIELDS`` (the decoding settings they honour; any other set is an
    error when the backend is built), ``DECODING_OWN_WAY`` (settings they apply their own way,
    with how: ``decoding_notes`` says which of them are set) and ``ENGINE_FIELDS`` (attributes that
    change answers), as their engine's description says (:mod:`~pyterrier_utility.engines`), and
    implement ``_generate``.
    """
    supports_seeds = True
    DECODING_FIELDS = frozenset(FIELDS)
    DECODING_OWN_WAY: Dict[str, str] = {}
    ENGINE_FIELDS: Tuple[str, ...] = ()
    #: The prompt format the model needs (a name of :data:`~pyterrier_utility.prompt_formats.PROMPT_FORMATS`),
    #: which :class:`~pyterrier_utility.Reader` takes unless given another; ``None``: the Reader's own
    #: (``'plain'``). The offline base models need ``'example'``.
    prompt_format: Optional[str] = None

    @classmethod
    def for_reader(cls, model: str, **kwargs) -> 'DecodingBackendBase':
        """The backend of ``model`` (a reader name's part after ``ENGINE:``) with the backend's keywords:
        how :meth:`Engine.build <pyterrier_utility.engines.Engine.build>` builds it."""
        return cls(model, **kwargs)

    def _set_decoding(self, decoding: Decoding) -> None:
        self.decoding_notes = decoding.check_honoured(f'{type(self).__name__}({self.model_id!r})',
                                                      self.DECODING_FIELDS, self.DECODING_OWN_WAY)
        self.decoding = decoding
        # pyterrier-rag's Backend names its length so; the decoding's, for code that reads it there.
        self.max_new_tokens = decoding.max_new_tokens

    @property
    def generation_key(self) -> Dict[str, object]:
        """Everything besides prompt and seed that determines an answer."""
        key = {'backend': type(self).__name__, 'model': self.model_id, 'decoding': self.decoding.as_dict()}
        key.update({name: getattr(self, name) for name in self.ENGINE_FIELDS})
        return key

    def with_settings(self, **changes) -> 'DecodingBackendBase':
        """A copy with other decoding settings, the model (or servers) shared; its answers are
        cached under their own key.

        Example::

            gold_backend = backend.with_settings(temperature=0.5)
        """
        clone = copy.copy(self)
        clone._set_decoding(self.decoding.replace(**changes))
        clone._copied()
        return clone

    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None, return_logprobs: bool = False,
                 max_new_tokens: Optional[int] = None, stop_sequences: Optional[List[str]] = None,
                 num_responses: int = 1, **options) -> list:
        """Answers ``inps``, one seed each (0 for every prompt when none are given), by the backend's
        decoding alone: ``max_new_tokens`` and ``stop_sequences`` are pyterrier-rag's arguments, taken
        when they say what the decoding says (:func:`check_call_settings`). ``options`` go to the
        engine (:class:`~pyterrier_utility.backends.OpenAICompatibleBackend`'s ``on_answers``)."""
        if return_logprobs or num_responses != 1:
            raise ValueError(f'{self!r} returns one answer per prompt, without logprobs')
        check_call_settings(self, max_new_tokens, stop_sequences)
        return self._generate(list(inps), list(seeds) if seeds is not None else [0] * len(inps), **options)

    def _generate(self, inps: List[str], seeds: List[int], **options) -> list:
        """The engine's answers to ``inps``, one per seed, with :attr:`decoding` applied."""
        raise NotImplementedError

    def _copied(self) -> None:
        """Resets what a copy must not share (connections, locks)."""


def check_call_settings(backend, max_new_tokens: Optional[int], stop_sequences: Optional[Sequence[str]]) -> None:
    """Refuses a call's ``max_new_tokens`` or ``stop_sequences`` (pyterrier-rag's ``generate`` arguments)
    that differ from the decoding ``backend`` holds: a backend of this package answers by its
    :class:`Decoding` alone, and another length or stops is another backend (``with_settings``), so the
    generation cache keys and the engine applies one value. ``None`` (pyterrier-rag's "the backend's
    own") and the decoding's own values are taken."""
    decoding = backend.decoding
    given = {name: value for name, value in (('max_new_tokens', max_new_tokens),
                                             ('stop', None if stop_sequences is None else tuple(stop_sequences)))
             if value is not None and value != getattr(decoding, name)}
    if given:
        held = ', '.join(f'{name}={getattr(decoding, name)!r}' for name in given)
        shown = ', '.join(f'{name}={value!r}' for name, value in given.items())
        raise SettingError(f'{backend!r} answers by its decoding ({held}), not by settings given with a call '
                           f'({shown}): answer with backend.with_settings({shown})')


def sampling_fields(decoding: Decoding) -> Dict[str, object]:
    """The decoding's sampling settings as vLLM and OpenAI-compatible servers name them: every field
    that is set, but the length and the stop sequences (sent on their own); ``top_k`` 0 as -1 (all
    tokens). A decoding setting added to :class:`~pyterrier_utility.settings.Decoding` under the
    engines' own name is sent by both without a change here."""
    fields = {name: value for name, value in decoding.as_dict().items()
              if name not in ('max_new_tokens', 'stop') and value is not None}
    if fields.get('top_k') == 0:
        fields['top_k'] = -1
    return fields


def cut_at_stop(text: str, stop_sequences: Optional[Sequence[str]]) -> str:
    """The text before the first stop sequence, stripped."""
    for stop in stop_sequences or ():
        text = text.split(stop, 1)[0]
    return text.strip()


def query_of(prompt: str) -> str:
    """A prompt's question, for messages: what follows its last ``Question:`` (every prompt format puts
    the question last), to the end of that line; without one, the prompt's last 80 characters."""
    _, found, rest = prompt.rpartition('Question:')
    lines = rest.strip().splitlines()
    return repr(lines[0].strip().strip('"')[:200]) if found and lines else f'(the prompt ending {prompt[-80:]!r})'


def work_batches(backend: Backend, prompts: Sequence[str], answers: Sequence[int]) -> List[List[int]]:
    """The indices of ``prompts`` in the order and groups a backend answers them best: ordered by its
    ``prompt_order`` (:class:`~pyterrier_utility.protocols.OrderedBackend`: prompts sharing a prefix
    together), else by length (batches of similar lengths pad little); each group holds about the
    backend's ``batch_size`` answers (:class:`~pyterrier_utility.protocols.BatchedBackend`, else 8)
    (``answers[i]`` for prompt ``i``), never splitting a prompt's.

    The one place where prompts are grouped: the generation cache groups what it must generate, and
    a backend called directly groups what it is given (a group from the cache stays one group)."""
    size = max(1, int((backend.batch_size if isinstance(backend, BatchedBackend) else 8) or 8))
    order_key = backend.prompt_order if isinstance(backend, OrderedBackend) else len
    order = sorted(range(len(prompts)), key=lambda i: order_key(prompts[i]))
    groups: List[List[int]] = []
    rows = 0
    for i in order:
        if not groups or rows + answers[i] > size:
            groups.append([])
            rows = 0
        groups[-1].append(i)
        rows += answers[i]
    return groups
