"""What the backends of this package share: a :class:`~pyterrier_utility.settings.Decoding` value
from which the generation key is derived, the scheduling of prompts into batches, and answers that
say whether they were cut at ``max_new_tokens`` and, where the engine gives it, their log-probability."""
import copy
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from pyterrier_rag.backend import Backend, BackendOutput

from ..errors import SettingError
from ..protocols import BatchedBackend, DecodingBackend, OrderedBackend
from ..settings import FIELDS, Decoding


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

    Subclasses declare ``DECODING_FIELDS`` (the decoding settings they honour; any other set is an
    error when the backend is built), ``DECODING_OWN_WAY`` (settings they apply their own way,
    with how: ``decoding_notes`` says which of them are set) and ``ENGINE_FIELDS`` (attributes that
    change answers), as their engine's description says (:mod:`~pyterrier_utility.engines`).
    """
    supports_seeds = True
    DECODING_FIELDS = frozenset(FIELDS)
    DECODING_OWN_WAY: Dict[str, str] = {}
    ENGINE_FIELDS: Tuple[str, ...] = ()
    #: The prompt format the model needs (a name of :data:`~pyterrier_utility.prompts.PROMPT_FORMATS`),
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

    def _call(self, inps, seeds, return_logprobs: bool, num_responses: int, max_new_tokens, stop_sequences):
        """The backend that answers a ``generate`` call (this one, or its copy with the call's
        ``max_new_tokens`` and ``stop_sequences``: :func:`with_call_settings`) and the seeds (0 for every
        prompt when none are given). A backend reads its length and stops from its decoding alone."""
        if return_logprobs or num_responses != 1:
            raise ValueError(f'{self!r} returns one answer per prompt, without logprobs')
        seeds = list(seeds) if seeds is not None else [0] * len(inps)
        return with_call_settings(self, max_new_tokens, stop_sequences), seeds

    def _copied(self) -> None:
        """Resets what a copy must not share (connections, locks)."""


def _call_changes(decoding: Decoding, max_new_tokens: Optional[int],
                  stop_sequences: Optional[Sequence[str]]) -> Dict[str, object]:
    """What a call's ``max_new_tokens`` and ``stop_sequences`` change in ``decoding``. A setting the call
    leaves ``None`` or ``0`` tokens is the decoding's; ``[]`` stops nowhere."""
    changes: Dict[str, object] = {}
    if max_new_tokens and max_new_tokens != decoding.max_new_tokens:
        changes['max_new_tokens'] = max_new_tokens
    # As a decoding takes them: a string is one stop sequence.
    stop = None if stop_sequences is None else Decoding(stop=stop_sequences).stop  # type: ignore[arg-type]
    if stop is not None and stop != decoding.stop:
        changes['stop'] = stop
    return changes


def with_call_settings(backend, max_new_tokens: Optional[int], stop_sequences: Optional[Sequence[str]]):
    """The backend that answers with a call's ``max_new_tokens`` and ``stop_sequences``: the one rule by
    which call-level settings (pyterrier-rag's ``generate`` arguments) become decoding settings. A
    backend holding a :class:`Decoding` (:class:`~pyterrier_utility.protocols.DecodingBackend`, the
    generation cache over one too) is itself when they change nothing, else its ``with_settings``
    copy, whose decoding holds them; another backend (pyterrier-rag's, which take them per call) is
    as it is. The :class:`~pyterrier_utility.Reader` resolves its length and stops so once, when
    built: the cache key, the backend and Ray's actors then read that decoding alone. The generation
    cache and the backends resolve them only for a caller that gives them per call."""
    if not isinstance(backend, DecodingBackend):
        return backend
    changes = _call_changes(backend.decoding, max_new_tokens, stop_sequences)
    return backend.with_settings(**changes) if changes else backend


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
