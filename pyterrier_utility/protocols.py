"""The optional abilities of the objects the study composes, declared in one place.

PyTerrier declares what a transformer may do beyond ``transform`` as ``@runtime_checkable``
protocols (``pyterrier.transformer.SupportsFuseRankCutoff``), and pyterrier-rag's backends declare
``supports_*`` class attributes. This module does both for the abilities this package relies on;
code asks ``isinstance(backend, KeyedBackend)`` (or the accessors below) and nothing else.

Every ability is optional: any :class:`pyterrier_rag.backend.Backend` drives the Reader, with
defaults that are always correct (one prompt order, no seeds, no prompt fitting).
"""
from typing import (
    Any,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Protocol,
    Sequence,
    Tuple,
    runtime_checkable,
)

import numpy as np

from .settings import Decoding


@runtime_checkable
class KeyedBackend(Protocol):
    """Says what, besides the prompt and the seed, determines its answers; the generation cache keys
    answers by it. The backends of this package derive it from their :class:`Decoding` and their
    engine fields, so nothing that changes an answer can be left out."""

    @property
    def generation_key(self) -> Dict[str, object]: ...


@runtime_checkable
class DecodingBackend(KeyedBackend, Protocol):
    """Holds its decoding settings as one :class:`Decoding` value and answers by it alone (a call gives
    prompts and seeds), honours ``DECODING_FIELDS`` of it, and gives copies sharing the model with other
    settings (``with_settings``)."""
    decoding: Decoding
    DECODING_FIELDS: frozenset

    def with_settings(self, **changes) -> 'DecodingBackend': ...


@runtime_checkable
class BatchedBackend(Protocol):
    """Answers best ``batch_size`` answers at a time (pyterrier-rag's backends have it too)."""
    batch_size: int


@runtime_checkable
class OrderedBackend(Protocol):
    """Answers best in its own prompt order (a sort key: prompts sharing a prefix together)."""

    def prompt_order(self, prompt: str): ...


@runtime_checkable
class StreamingBackend(Protocol):
    """Answers many batches at once on workers of its own, each holding a copy of a backend
    (:class:`~pyterrier_utility.backends.RayBackend`): ``call(backend, prompts, seeds)`` runs for each
    batch, whole, on one worker, and ``(index, result)`` comes back as each completes, in any order.
    The generation cache stays the one writer: it stores each batch's answers as they arrive."""

    def stream(self, call: Callable[[Any, List[str], List[int]], list],
               batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]: ...


@runtime_checkable
class TokenizingBackend(Protocol):
    """Has a tokenizer and an input limit, so the Reader can fit prompts by truncating documents."""
    tokenizer: Any
    max_input_length: int


@runtime_checkable
class BatchTexts(Protocol):
    """A docno -> text mapping that fetches many texts at once (a docstore)."""

    def get_many(self, docnos: Iterable[str]) -> Mapping[str, str]: ...


@runtime_checkable
class IndexedTexts(Protocol):
    """A docno -> text mapping that names its i-th document without enumerating the corpus (an
    ir_datasets docstore), so unjudged documents can be drawn by random index."""

    def __len__(self) -> int: ...

    def docno_at(self, i: int) -> str: ...


def supports_seeds(backend) -> bool:
    """Whether ``generate(..., seeds=...)`` is honoured (the class attribute ``supports_seeds``)."""
    return bool(getattr(type(backend), 'supports_seeds', False))


def answers_each(backend) -> bool:
    """Whether ``generate(..., on_answers=f)`` hands answers back as their requests complete (the class
    attribute ``answers_each``: :class:`~pyterrier_utility.backends.OpenAICompatibleBackend`, whose
    requests of one call answer over seconds or minutes): ``f({index: answer})`` runs in the calling
    thread with what arrived together, so the generation cache stores each answer at once and a
    process killed mid-call loses none that came back."""
    return bool(getattr(type(backend), 'answers_each', False))


def deterministic(backend) -> bool:
    """Whether answers ignore the seed (greedy decoding): then one answer serves every sample."""
    if isinstance(backend, DecodingBackend):
        return backend.decoding.greedy
    return bool(getattr(backend, 'deterministic', False))


def changes_contexts_with_cutoff(system) -> bool:
    """Whether ``system % k`` gives other documents than the top k of ``system`` (COS-Mix: its
    validation depends on k), declared by the class attribute ``cutoff_changes_contexts``; such a
    system runs once per k in a study."""
    return bool(getattr(type(system), 'cutoff_changes_contexts', False))


@runtime_checkable
class AnswerScorer(Protocol):
    """Scores answers to queries, P(a), as :class:`~pyterrier_utility.UtilityEvaluator` needs:
    :class:`~pyterrier_utility.FBertScorer` (against relevant documents) and
    :class:`~pyterrier_utility.GoldAnswerScorer` (against gold answers). A scorer may also name the
    quality it computes (``quality``, a name of :data:`~pyterrier_utility.qualities.QUALITIES_BY_NAME`),
    which names its measures (:attr:`~pyterrier_utility.UtilityEvaluator.measures`)."""
    #: What it scores (``'FBERT'``, ``'EM'``, ...) and against what (``'label>=2'``, ``'gold answers'``),
    #: in messages: attributes or read-only properties.
    @property
    def measure(self) -> str: ...

    @property
    def references(self) -> str: ...

    def score_with_reference(self, qids: Sequence, answers: Sequence[str]) -> Tuple[np.ndarray, List[Optional[str]]]:
        """P of each (qid, answer) pair (NaN: no reference) and the reference that gave it."""
