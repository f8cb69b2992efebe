"""What runs on each actor of a :class:`~pyterrier_utility.backends.RayBackend`: the replica that builds
its backend once and answers whole batches, and the profile of that backend it reports to the driver."""
import inspect
import platform
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from pyterrier_rag.backend import Backend

from .._checks import check
from ..errors import BackendError
from ..protocols import BatchedBackend, DecodingBackend, OrderedBackend
from ..settings import Decoding
from ._base import query_of


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


def _device() -> str:
    """The device an actor computes on: the GPUs Ray gave it, else the CPU and torch's threads."""
    import ray
    import torch
    if ray.get_gpu_ids() and torch.cuda.is_available():
        return 'GPU ' + ', '.join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    try:
        with open('/proc/cpuinfo') as info:
            cpu = next(line.split(':', 1)[1].strip() for line in info if line.startswith('model name'))
    except (OSError, StopIteration):
        cpu = platform.processor() or platform.machine()
    return f'CPU {cpu}, {torch.get_num_threads()} torch threads'


def queries_of(prompts: Sequence[str]) -> str:
    """The queries of a batch's prompts, for messages (the first three)."""
    distinct = list(dict.fromkeys(prompts))
    more = f' and {len(distinct) - 3} more' if len(distinct) > 3 else ''
    return ', '.join(query_of(p) for p in distinct[:3]) + more


class Replica:
    """One actor of a :class:`~pyterrier_utility.backends.RayBackend`: builds the backend once (the
    copies with other decoding settings when first asked for) and answers whole batches. A failure to
    build is reported when the driver first asks, naming the node."""

    def __init__(self, factory: Callable[..., Backend], kwargs: Dict[str, Any]):
        import ray
        self.node = {'node_id': ray.get_runtime_context().get_node_id(), 'ip': ray.util.get_node_ip_address(),
                     'device': _device()}
        self.where = f"node {self.node['node_id'][:12]} ({self.node['ip']})"
        self.variants: Dict[tuple, Backend] = {}
        self.failure: Optional[str] = None
        try:
            backend = factory(**kwargs)
            check(isinstance(backend, DecodingBackend), 'RayBackend',
                  f'runs the backends of this package (a Decoding and a generation key), not {backend!r}')
            self.variants[()] = backend
        except Exception as e:
            self.failure = f'on {self.where}: the backend could not be built: {type(e).__name__}: {e}'

    def _backend(self, changes: Dict[str, Any]) -> Backend:
        if self.failure is not None:
            raise BackendError(self.failure)
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
