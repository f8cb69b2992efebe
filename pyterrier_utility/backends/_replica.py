"""A backend as a pool of replicas, each holding its own copy of one of this package's backends: what
runs on each replica (:class:`Replica`, which builds its backend once and answers whole batches, and the
:class:`Profile` of that backend it reports), how batches are shared among replicas (:class:`Schedule`),
and what a pool does whatever its replicas are (:class:`ReplicatedBackend`): threads or processes of one
torch thread on this machine (:class:`~pyterrier_utility.backends.ThreadBackend`,
:class:`~pyterrier_utility.backends.ProcessBackend`) or Ray's actors
(:class:`~pyterrier_utility.backends.RayBackend`)."""
import copy
import functools
import inspect
import platform
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple

from pyterrier_rag.backend import Backend

from .._checks import check, check_int
from ..errors import BackendError, SettingError
from ..protocols import BatchedBackend, DecodingBackend, OrderedBackend
from ..settings import Decoding
from ._base import DecodingBackendBase, query_of, work_batches

#: The environment of a quiet replica (``verbose=False``): transformers' progress bars and notices off,
#: as the command line has them in its own process.
QUIET = {'HF_HUB_DISABLE_PROGRESS_BARS': '1', 'TRANSFORMERS_VERBOSITY': 'error'}
#: Batches sent ahead to each replica: one being answered and one waiting, so that no replica idles
#: between two batches; at most these are lost when the pool's process dies.
AHEAD = 2


@dataclass(frozen=True)
class Profile:
    """What the driver knows of the actors' backend: what determines its answers (``generation_key``,
    ``decoding``) and how it orders, batches and fits prompts, as the actor that built it reports."""
    name: str
    model_id: str
    generation_key: Dict[str, object]
    decoding: Decoding
    decoding_fields: frozenset
    batch_size: Optional[int]
    order: Optional[Callable[[str], Any]]
    tokenizer: Any
    max_input_length: int
    reproducibility: Optional[str]
    engine_settings: Optional[Dict[str, object]]
    prompt_format: Optional[str] = None


def backend_factory(pool: str, backend: Any, where: str) -> Callable[..., Backend]:
    """What builds ``backend`` on each replica of a ``pool``: a reader name's builder (the name checked
    here), or the picklable function given; a :class:`SettingError` for anything else."""
    if isinstance(backend, str):
        from ..engines import engine_of
        from .factory import get_backend
        engine_of(backend)
        return functools.partial(get_backend, backend)
    if callable(backend) and not isinstance(backend, Backend):
        return backend
    raise SettingError(f'{pool}: backend must be a reader name or a function building a backend {where}, got '
                       f'{backend!r}')


def cpu_device() -> str:
    """The CPU a replica computes on, and torch's threads."""
    import torch
    try:
        with open('/proc/cpuinfo') as info:
            cpu = next(line.split(':', 1)[1].strip() for line in info if line.startswith('model name'))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    return f'CPU {cpu}, {torch.get_num_threads()} torch threads'


def local_pool(pool: str, backend: Any, replicas: Optional[int], where: str) -> Tuple[int, Callable[..., Backend], str]:
    """What a pool on this machine starts from: its number of replicas (checked; default
    :func:`cpu_replicas`), what builds the backend on each (:func:`backend_factory`) and the backend's name
    for messages."""
    count = cpu_replicas() if replicas is None else check_int(pool, 'replicas', replicas, 1)
    name = backend if isinstance(backend, str) else getattr(backend, '__name__', repr(backend))
    return count, backend_factory(pool, backend, where), name


def cpu_replicas() -> int:
    """The replicas that use this machine's CPU as torch would: one per thread torch runs."""
    import torch
    return torch.get_num_threads()


def queries_of(prompts: Sequence[str]) -> str:
    """The queries of a batch's prompts, for messages (the first three)."""
    distinct = list(dict.fromkeys(prompts))
    more = f' and {len(distinct) - 3} more' if len(distinct) > 3 else ''
    return ', '.join(query_of(p) for p in distinct[:3]) + more


class Replica:
    """One replica of a pool (a Ray actor, or a process of this machine): builds the backend once (the
    copies with other decoding settings when first asked for) and answers whole batches. A failure to
    build is reported when the pool first asks, naming where it ran.

    Args:
        factory: builds the backend from ``kwargs``.
        kwargs: the backend's settings.
        locate: says where the replica runs: a dict with ``device`` and whatever names its place
            (a node's ``node_id`` and ``ip``, a process's ``pid``), and the place in words.
    """

    def __init__(self, factory: Callable[..., Backend], kwargs: Dict[str, Any],
                 locate: Callable[[], Tuple[Dict[str, Any], str]]):
        self.node, self.where = locate()
        self.variants: Dict[tuple, Backend] = {}
        self.failure: Optional[str] = None
        try:
            backend = factory(**kwargs)
            check(isinstance(backend, DecodingBackend), 'RayBackend',
                  f'runs the backends of this package (a Decoding and a generation key), not {backend!r}')
            self.variants[()] = backend
        except Exception as e:
            self.failure = f'the backend could not be built: {type(e).__name__}: {e}'

    def _backend(self, changes: Dict[str, Any]) -> Backend:
        if self.failure is not None:  # named where it is reported: a replica forked after the build runs elsewhere
            raise BackendError(f'on {self.where}: {self.failure}')
        key = tuple(sorted(changes.items()))
        if key not in self.variants:
            self.variants[key] = self.variants[()].with_settings(**changes)  # type: ignore[attr-defined]
        return self.variants[key]

    def describe(self, changes: Dict[str, Any]) -> Tuple[Profile, Dict[str, str]]:
        """The profile of the backend with ``changes`` to its decoding, and this actor's node."""
        backend = self._backend(changes)
        order = None
        if isinstance(backend, OrderedBackend):
            order = inspect.getattr_static(type(backend), 'prompt_order')
            check(isinstance(order, staticmethod), 'RayBackend',
                  f'{backend!r} orders prompts with a method of the instance; the driver needs a staticmethod')
            order = type(backend).prompt_order
        return Profile(name=repr(backend), model_id=backend.model_id, generation_key=backend.generation_key,
                       decoding=backend.decoding, decoding_fields=frozenset(backend.DECODING_FIELDS),
                       batch_size=backend.batch_size if isinstance(backend, BatchedBackend) else None, order=order,
                       tokenizer=getattr(backend, 'tokenizer', None), max_input_length=backend.max_input_length,
                       reproducibility=getattr(backend, 'reproducibility', None),
                       engine_settings=getattr(backend, 'engine_settings', None),
                       prompt_format=getattr(backend, 'prompt_format', None)), self.node

    def run(self, changes: Dict[str, Any], call: Callable, prompts: List[str], seeds: List[int]) -> list:
        """``call(backend, prompts, seeds)``; a failure as one line naming the node and the query."""
        backend = self._backend(changes)
        try:
            return call(backend, prompts, seeds)
        except Exception as e:
            raise BackendError(self._failed(backend, call, prompts, seeds, e)) from None

    def _failed(self, backend: Backend, call: Callable, prompts: List[str], seeds: List[int], error: Exception) -> str:
        """What failed, on one line. In a batch of several prompts, an error that does not come from the
        backend's own checks (a BackendError says what failed) is found by answering each prompt alone,
        the answers discarded; the first that fails is named."""
        distinct = list(dict.fromkeys(prompts))
        culprit = distinct[0] if len(distinct) == 1 else None
        if culprit is None and not isinstance(error, BackendError):
            for prompt in distinct:
                rows = [i for i, p in enumerate(prompts) if p == prompt]
                try:
                    call(backend, [prompt] * len(rows), [seeds[i] for i in rows])
                except Exception:
                    culprit = prompt
                    break
        what = (f'the prompt of the query {query_of(culprit)}' if culprit is not None
                else f'a batch of {len(distinct)} prompts (queries {queries_of(prompts)})')
        said = ' '.join(f'{type(error).__name__}: {error}'.split())
        return f'on {self.where}, answering {what}: {said}'


class Schedule:
    """Which replica answers which batch: batch i of n goes first to replica ``i * replicas // n`` (so
    consecutive batches, prompts sharing a prefix, meet the replica holding its KV cache), at most
    :data:`AHEAD` at a time to each; a replica done with its own takes the last batch of the replica
    with the most left."""

    def __init__(self, replicas: int, batches: int):
        self.queues: List[Deque[int]] = [deque(range(r * batches // replicas, (r + 1) * batches // replicas))
                                         for r in range(replicas)]
        #: The batches sent and not yet answered, each with its replica.
        self.held: Dict[int, int] = {}

    def next_for(self, replica: int) -> Optional[int]:
        """The next batch to send to ``replica``, now held by it; ``None`` when it holds :data:`AHEAD`
        already, or nothing is left."""
        if sum(r == replica for r in self.held.values()) >= AHEAD:
            return None
        queue = self.queues[replica] or max(self.queues, key=len)
        if not queue:
            return None
        i = queue.popleft() if queue is self.queues[replica] else queue.pop()
        self.held[i] = replica
        return i

    def done(self, batch: int) -> int:
        """Marks ``batch`` answered (or failed); returns the replica that held it."""
        return self.held.pop(batch)

    def held_by(self, replica: int) -> List[int]:
        """The batches ``replica`` holds, in order."""
        return sorted(i for i, r in self.held.items() if r == replica)


def _answered(backend: Backend, prompts: List[str], seeds: List[int]) -> list:
    """One batch answered by a replica's backend (with its decoding), for :meth:`ReplicatedBackend.generate`."""
    return backend.generate(prompts, seeds=seeds)


class ReplicatedBackend(DecodingBackendBase):
    """What a pool of replicas does whatever they are: it takes the profile of its replicas' backend
    (what determines its answers, how it orders and batches prompts), answers in that backend's batches,
    each whole on one replica, and makes copies with other decoding settings on the same replicas.
    Subclasses start the replicas, then call :meth:`_start`, and implement :meth:`stream`,
    :meth:`_describe` and :meth:`close`."""

    def _start(self, profiles: Sequence[Profile], where: Callable[[int], str], verbose: bool) -> None:
        """Takes the first replica's profile, once every replica's says the same of what determines its
        answers (else the replicas are closed and a :class:`SettingError` names two that differ)."""
        profile = profiles[0]
        other = next((i for i, p in enumerate(profiles) if p.generation_key != profile.generation_key), None)
        if other is not None:
            self.close()
            raise SettingError(f'{type(self).__name__}: the backends built on {where(0)} and {where(other)} differ in '
                               f'what determines their answers ({profile.generation_key} and '
                               f'{profiles[other].generation_key}): fix what differs (e.g. dtype=) or use alike '
                               'nodes')
        super().__init__(profile.model_id, max_input_length=profile.max_input_length, verbose=verbose)
        self._changes: Dict[str, Any] = {}
        self._apply(profile)

    def _apply(self, profile: Profile) -> None:
        self.profile = profile
        self.decoding = profile.decoding
        self.DECODING_FIELDS = profile.decoding_fields
        self.max_new_tokens = profile.decoding.max_new_tokens
        if profile.batch_size is not None:
            self.batch_size = profile.batch_size
        if profile.tokenizer is not None:
            self.tokenizer = profile.tokenizer
        if profile.engine_settings:
            self.engine_settings = profile.engine_settings
        #: The prompt format the backend's model needs (see ``DecodingBackendBase.prompt_format``).
        self.prompt_format = profile.prompt_format

    def _describe(self, changes: Dict[str, Any]) -> Profile:
        """The profile of the replicas' backend with ``changes`` to its decoding, as one replica says."""
        raise NotImplementedError

    def stream(self, call: Callable[[Backend, List[str], List[int]], list],
               batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]:
        """Runs ``call(backend, prompts, seeds)`` for each batch on the replicas, each batch whole on one
        (:class:`Schedule`), and yields ``(index, result)`` as each completes."""
        raise NotImplementedError

    def close(self) -> None:
        """Ends the replicas (copies made by :meth:`with_settings` share them)."""
        raise NotImplementedError

    @property
    def generation_key(self) -> Dict[str, object]:
        """The backend's: answers generated in process and by the replicas share a cache."""
        return self.profile.generation_key

    def prompt_order(self, prompt: str):
        """The backend's prompt order (by length when it has none, as in process)."""
        return self.profile.order(prompt) if self.profile.order is not None else len(prompt)

    def with_settings(self, **changes) -> 'ReplicatedBackend':
        """A copy answering with other decoding settings, on the same replicas (each makes its backend's
        ``with_settings`` copy, the model shared, when first asked).

        Example::

            greedy = backend.with_settings(temperature=0)
        """
        clone = copy.copy(self)
        clone._changes = dict(self._changes, **changes)
        clone._apply(self._describe(clone._changes))
        return clone

    def _generate(self, inps: List[str], seeds: List[int], **options) -> list:
        """Answers ``inps``, one seed each, in the backend's batches on the replicas."""
        groups = work_batches(self, inps, [1] * len(inps))
        answers: Dict[int, Any] = {}
        for i, outs in self.stream(_answered, [([inps[j] for j in g], [seeds[j] for j in g]) for g in groups]):
            answers.update(zip(groups[i], outs))
        return [answers[j] for j in range(len(inps))]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
