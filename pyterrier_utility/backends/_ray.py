"""Generation past one machine: a pool of Ray actors, each holding one of this package's backends.

This process (the driver) forms the batches the backend would form in process
(:func:`~pyterrier_utility.backends.work_batches`), sends each whole to one actor, and hands
each batch's answers to the generation cache, the one writer, as it completes: actors never touch
the cache file, and a driver or actor that dies loses at most the batches in flight. Each actor
builds its backend once and keeps it for the life of the :class:`RayBackend`.

Ray's actors, not Ray Data's ``map_batches``: a Ray Data actor pool lives for one execution of a
dataset (measured with Ray 2.60: a second ``map_batches`` started new actors), so every call of the
reader (a study makes several, a notebook many) would load the model again on every actor; and Ray
Data hands a block to whichever actor is free, while prompts sharing a prefix should reach the actor
that holds its KV cache. Nothing else is needed: ``ray.wait`` streams the results in the order they
complete, and an actor's ``max_restarts`` and ``max_task_retries`` bound its restarts.
"""
import os
import socket
import sys
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from pyterrier_rag.backend import Backend

from .._checks import check, check_int, check_number
from ..errors import BackendError
from ..vocabulary import RAY_ADDRESSES, RAY_CONNECT_TIMEOUT
from ._base import SIGNAL_POLL
from ._replica import QUIET, Profile, Replica, ReplicatedBackend, Schedule, backend_factory, cpu_device, queries_of

#: Set to ``'0'`` before Ray is imported, it keeps every node of a cluster started here on 127.0.0.1
#: (Ray reads it once, when imported; by default a node advertises the machine's network address).
LOOPBACK = 'RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'


def connect(address: Optional[str] = None):
    """The ``ray`` module, connected: ``address`` ``'auto'`` joins the cluster this machine is a node
    of (``ray start``), ``'local'`` starts one in this process with every node on 127.0.0.1, and
    ``'HOST:PORT'`` or ``'ray://HOST:PORT'`` names one (a :class:`~pyterrier_utility.errors.BackendError`
    naming it when nothing there answers within :data:`~pyterrier_utility.vocabulary.RAY_CONNECT_TIMEOUT`
    seconds); ``None`` keeps the cluster this process is
    connected to, else leaves the choice to Ray (``$RAY_ADDRESS``, a cluster started on this machine,
    else a new one). A process connected already stays on its cluster."""
    if address == 'local' and 'ray' not in sys.modules:
        os.environ.setdefault(LOOPBACK, '0')
    try:
        import ray
    except ImportError as e:
        raise ImportError("RayBackend needs Ray: pip install 'pyterrier-utility[ray]'") from e
    if not ray.is_initialized():
        if address == 'local':
            ray.init(address=address, include_dashboard=False)
        else:
            if address == 'auto':
                found = _auto_address()
                if found:
                    _reachable(found, f'auto ({found})')
            elif address is not None and address not in RAY_ADDRESSES:
                _reachable(address)
            ray.init(address=address)
    return ray


def _auto_address() -> Optional[str]:
    """The cluster ``'auto'`` joins, as Ray finds it (``$RAY_ADDRESS``, else the address the last
    ``ray start`` on this machine recorded, else a running one), or ``None`` where this Ray cannot say
    (``ray.init`` then decides); a :class:`~pyterrier_utility.errors.BackendError` where it finds none."""
    try:
        from ray._private.services import get_ray_address_from_environment
    except ImportError:
        return None
    try:
        found = get_ray_address_from_environment('auto', None)
    except ConnectionError:
        raise BackendError('RayBackend: --ray auto: no Ray cluster on this machine: start one (ray start --head) '
                           'or give its address') from None
    return found if found and found != 'auto' else None


def _reachable(address: str, shown: Optional[str] = None) -> None:
    """A :class:`~pyterrier_utility.errors.BackendError` naming ``address`` (``[ray://]HOST:PORT``; as
    ``shown`` where given) unless it accepts a connection within
    :data:`~pyterrier_utility.vocabulary.RAY_CONNECT_TIMEOUT` seconds: ``ray.init`` would retry for
    minutes (a cluster whose head died leaves its address recorded for ``auto``)."""
    host, _, port = address.split('://', 1)[-1].rpartition(':')
    check(bool(host) and port.isdigit(), 'RayBackend', f'a cluster\'s address is HOST:PORT, got {address!r}')
    try:
        socket.create_connection((host.strip('[]'), int(port)), timeout=RAY_CONNECT_TIMEOUT).close()
    except OSError as e:
        why = 'no answer' if isinstance(e, socket.timeout) else (e.strerror or type(e).__name__).lower()
        raise BackendError(f'RayBackend: no Ray cluster at {shown or address} ({why} within {RAY_CONNECT_TIMEOUT} '
                           's): start one there (ray start --head) or give the address its head node printed') from None


def _on_ray() -> Tuple[Dict[str, Any], str]:
    """Where an actor runs: its node (id, address) and device (the GPUs Ray gave it, else the CPU)."""
    import ray
    import torch
    if ray.get_gpu_ids() and torch.cuda.is_available():
        device = 'GPU ' + ', '.join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    else:
        device = cpu_device()
    node = {'node_id': ray.get_runtime_context().get_node_id(), 'ip': ray.util.get_node_ip_address(),
            'device': device}
    return node, f"node {node['node_id'][:12]} ({node['ip']})"


class RayBackend(ReplicatedBackend):
    """One of this package's backends as a pool of Ray actors (replicas), on one machine or a cluster.

    Each actor builds the backend once (``get_backend(backend, **backend_kwargs)``, or the function
    given) and answers whole batches. Behind a :class:`~pyterrier_utility.GenerationCache` the
    batches are those the backend forms in process, prompts sharing a prefix together (the k-sweep of
    one system and query): consecutive batches go to the same actor, so its prefix cache serves them,
    and an actor done with its own takes the last batches of the busiest. The driver stores each
    batch's answers as it arrives. Its ``generation_key`` and ``decoding`` are the backend's, so one
    cache file serves a run in process and on Ray alike, and a study resumes on either.

    Failures: an actor whose process dies (killed, out of memory, its node lost) is restarted up to
    ``max_restarts`` times and the batches it held are sent to it again; past that, or when the backend
    raises on a prompt, nothing more is sent, the batches in flight finish and are stored, and a
    :class:`~pyterrier_utility.errors.BackendError` names the node and the prompt's query (a batch's
    prompts are tried one at a time to find it). A re-run generates only what is missing.

    Args:
        backend: a reader name (``'gemma3-270m'``, ``'vllm:MODEL'``, ``'openai:MODEL'``, ...), or a
            picklable function building a backend of this package from ``backend_kwargs``.
        replicas: the actors, each with its own copy of the backend (and model).
        num_gpus: GPUs per actor (vLLM's ``tensor_parallel_size`` of them for ``vllm:``).
        num_cpus: CPUs per actor; Ray gives an actor's torch that many threads.
        address: the cluster: ``'auto'`` (this machine's, started with ``ray start``), ``'local'`` (a new
            one here, on 127.0.0.1), ``'HOST:PORT'``; ``None``: the one this process is connected to, else
            Ray's choice (see :func:`connect`).
        max_restarts: restarts of an actor whose process died, each resending the batches it held.
        verbose: the actors' transformers progress bars and notices shown (off: as the command line
            has them).
        **backend_kwargs: the backend's settings (``temperature``, ``max_new_tokens``, ``batch_size``,
            ``base_urls``, ...), given to it on every actor.

    Example::

        backend = RayBackend('gemma3-270m', replicas=2, address='auto', max_new_tokens=48)
        reader = pyterrier_utility.Reader(pyterrier_utility.GenerationCache(backend, 'answers.sqlite'))
    """

    def __init__(self, backend: Union[str, Callable[..., Backend]], replicas: int = 1, *, num_gpus: float = 0,
                 num_cpus: float = 1, address: Optional[str] = None, max_restarts: int = 2, verbose: bool = False,
                 **backend_kwargs):
        check_int('RayBackend', 'replicas', replicas, 1)
        check_int('RayBackend', 'max_restarts', max_restarts, 0)
        check_number('RayBackend', 'num_cpus', num_cpus, 0, exclusive=True)
        check_number('RayBackend', 'num_gpus', num_gpus, 0)
        factory = backend_factory('RayBackend', backend, 'on each actor')
        ray = connect(address)
        total = ray.cluster_resources()
        short = [f'{replicas * need:g} {name}s' for name, need in (('CPU', num_cpus), ('GPU', num_gpus))
                 if replicas * need > total.get(name, 0)]
        check(not short, 'RayBackend', f'{replicas} replicas of {num_cpus:g} CPUs and {num_gpus:g} GPUs each need '
                                       f'{" and ".join(short)}; the cluster has {total.get("CPU", 0):g} CPUs and '
                                       f'{total.get("GPU", 0):g} GPUs')
        self.num_cpus, self.num_gpus, self.max_restarts = num_cpus, num_gpus, max_restarts
        actor = ray.remote(Replica).options(num_cpus=num_cpus, num_gpus=num_gpus, max_restarts=max_restarts,
                                            max_task_retries=max_restarts,
                                            runtime_env=None if verbose else {'env_vars': QUIET})
        self._actors = [actor.remote(factory, backend_kwargs, _on_ray) for _ in range(replicas)]
        try:
            described = [ray.get(a.describe.remote({})) for a in self._actors]
        except ray.exceptions.RayTaskError as e:
            self.close()
            raise BackendError(f'RayBackend({backend!r}) {e.cause}') from None
        #: Each actor's node: its id, address and device (``settings.json`` records them).
        self.nodes = [node for _, node in described]
        self._start([profile for profile, _ in described], self._where, verbose)

    def _describe(self, changes: Dict[str, Any]) -> Profile:
        import ray
        return ray.get(self._actors[0].describe.remote(changes))[0]

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        return (f'{self.profile.reproducibility or "not stated by the backend"}; on Ray, each batch is the one the '
                f'backend forms in process and is answered whole by one actor (torch with {self.num_cpus:g} threads '
                'per CPU actor), so fresh answers equal an in-process run\'s on the same device and torch build; '
                'across nodes with other devices they are not promised; answers in the generation cache are '
                'reproducible, always')

    @property
    def placement(self) -> Dict[str, object]:
        """Where answers are computed, for ``settings.json``: Ray, the replicas and each one's node and device."""
        return {'runner': 'ray', 'replicas': len(self.nodes), 'num_cpus': self.num_cpus, 'num_gpus': self.num_gpus,
                'max_restarts': self.max_restarts, 'actors': list(self.nodes)}

    def _where(self, actor: int) -> str:
        node = self.nodes[actor]
        return f"node {node['node_id'][:12]} ({node['ip']})"

    def stream(self, call: Callable[[Backend, List[str], List[int]], list],
               batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]:
        """Runs ``call(backend, prompts, seeds)`` for each batch on the actors, each batch whole on one,
        and yields ``(index, result)`` as each completes.

        Batch i of n goes first to actor ``i * replicas // n``; an actor done with its own takes the last
        batch of the actor with the most left. On a failure nothing more is sent, the batches in flight
        finish and are yielded, then a :class:`~pyterrier_utility.errors.BackendError` names the node and
        what failed. Closing the generator (an error in the caller, Ctrl-C) cancels the batches not
        yet begun."""
        import ray
        schedule = Schedule(len(self._actors), len(batches))
        pending: Dict[Any, int] = {}
        failure: Optional[BackendError] = None

        def send(actor: int) -> None:
            while (i := schedule.next_for(actor)) is not None:
                prompts, seeds = batches[i]
                pending[self._actors[actor].run.remote(self._changes, call, prompts, seeds)] = i

        try:
            for actor in range(len(self._actors)):
                send(actor)
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=SIGNAL_POLL)
                if not ready:
                    continue
                [ref] = ready
                i = pending.pop(ref)
                actor = schedule.done(i)
                try:
                    result = ray.get(ref)
                except ray.exceptions.RayTaskError as e:
                    failure = failure or BackendError(f'{self!r} {e.cause}' if isinstance(e.cause, BackendError)
                                                      else f'{self!r}: {type(e.cause).__name__}: {e.cause}')
                    continue
                except ray.exceptions.RayActorError:
                    # Which of the batches it held was being answered is not known: all are named.
                    held = sorted([i] + schedule.held_by(actor))
                    prompts = [p for j in held for p in batches[j][0]]
                    failure = failure or BackendError(
                        f'{self!r}: the actor on {self._where(actor)} died (its process killed, out of memory, or its '
                        f'node lost) holding {len(held)} batch{"es" * (len(held) > 1)} of {len(prompts)} prompts '
                        f'(queries {queries_of(prompts)}), restarted {self.max_restarts} times before (max_restarts)')
                    continue
                yield i, result
                if failure is None:
                    send(actor)
        finally:
            for ref in pending:
                ray.cancel(ref)
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Ends the actors, freeing their resources (copies made by :meth:`with_settings` share them)."""
        import ray
        for actor in self._actors:
            ray.kill(actor)
        self._actors = []

    def __repr__(self):
        return f'RayBackend({self.profile.name if hasattr(self, "profile") else "..."}, replicas={len(self._actors)})'
