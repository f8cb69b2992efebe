"""A model on this machine's CPU as processes of one thread each: a replica of the backend per core.

A CPU's cores serve a small model better as replicas than as threads of one process: a decode step
of a few rows leaves most of a second thread idle, while a replica of its own keeps its core busy, and
on one thread every product sums in one order, so an answer needs no care for the thread count. The
answers are those of one replica: the backend's batches are the ones it forms in process, each answered
whole by one replica, and a batch-invariant backend gives each prompt the same answer whatever batch
it is in.

Each replica is a new Python process (running :func:`serve`: a process
forked from one whose torch has started its threads can hang, and one started by ``multiprocessing``'s
``spawn`` would run the caller's script again), connected to this one by a socket pair; it builds
its backend once, on one torch thread, and answers whole batches until the pool is closed, or this
process ends.
"""
import os
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from pyterrier_rag.backend import Backend

from .._checks import check_int
from ..errors import BackendError
from ._replica import QUIET, Profile, Replica, ReplicatedBackend, Schedule, backend_factory, cpu_device, queries_of

#: The environment a replica starts with: one thread for every library that would start more (and
#: :data:`~._replica.QUIET` unless the pool is verbose).
ONE_THREAD = {'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1'}


def _here() -> Tuple[Dict[str, Any], str]:
    """Where a replica runs: its process and the CPU."""
    return {'pid': os.getpid(), 'device': cpu_device()}, f'replica process {os.getpid()}'


def serve(fd: int) -> None:
    """A replica's life: on its end ``fd`` of the socket pair, builds the backend it is sent
    (``(factory, kwargs)``) on one torch thread, then answers what the pool asks (``('describe',
    changes)`` or ``('run', changes, call, prompts, seeds)``) until the connection closes. Each answer
    is ``('ok', result)`` or ``('error', message)``. A Ctrl-C is the pool's to handle: it closes the
    replicas."""
    import torch
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)
    conn = Connection(fd)
    factory, kwargs = conn.recv()
    replica = Replica(factory, kwargs, _here)
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if request[0] == 'describe':
                result: Any = replica.describe(request[1])
            else:
                result = replica.run(*request[1:])
            conn.send(('ok', result))
        except BackendError as e:
            conn.send(('error', str(e)))
        except Exception as e:  # the pool names the replica; the message says what failed
            conn.send(('error', f'{type(e).__name__}: {e}'))


def cpu_replicas() -> int:
    """The replicas that use this machine's CPU as torch would: one per thread torch runs."""
    import torch
    return torch.get_num_threads()


class ProcessBackend(ReplicatedBackend):
    """A backend of a model computed on this machine's CPU as ``replicas`` processes of one thread each.

    The replicas share the backend's batches (:class:`~pyterrier_utility.backends.work_batches`): the
    consecutive batches of a k-sweep go to the same replica, whose prefix cache then serves them, and a
    replica done with its own takes the last batches of the busiest. Each answer is computed on one
    thread, in the batch the backend forms in process, so a batch-invariant backend
    (:class:`~pyterrier_utility.backends.CausalLMBackend` on a CPU) gives the answers of one replica,
    bit for bit, whatever the number of replicas. Its ``generation_key`` is the backend's: one cache
    serves a run in process and on replicas alike. Each replica holds its own copy of the model.

    A replica that dies (killed, out of memory) ends the pool's work: the batches in flight on the
    others are stored, and a :class:`~pyterrier_utility.errors.BackendError` names the replica and the
    queries it held; a re-run generates only what is missing.

    Args:
        backend: a reader name (``'gemma3-270m'``, ``'huggingface:MODEL'``), or a picklable function
            building a backend of this package from ``backend_kwargs``.
        replicas: the processes (default: one per thread torch would use, :func:`cpu_replicas`).
        verbose: the replicas' transformers progress bars and notices shown.
        **backend_kwargs: the backend's settings (``temperature``, ``max_new_tokens``, ``batch_size``, ...).

    Example::

        backend = ProcessBackend('gemma3-270m', replicas=2)
        reader = pyterrier_utility.Reader(pyterrier_utility.GenerationCache(backend))
    """

    def __init__(self, backend: Union[str, Callable[..., Backend]], replicas: Optional[int] = None, *,
                 verbose: bool = False, **backend_kwargs):
        replicas = cpu_replicas() if replicas is None else check_int('ProcessBackend', 'replicas', replicas, 1)
        factory = backend_factory('ProcessBackend', backend, 'in each replica')
        self._name = backend if isinstance(backend, str) else getattr(backend, '__name__', repr(backend))
        environ = dict(os.environ, **ONE_THREAD, **({} if verbose else QUIET))
        self._conns: List[Connection] = []
        self._processes: List[subprocess.Popen] = []
        for _ in range(replicas):
            mine, theirs = socket.socketpair()
            with mine, theirs:
                self._processes.append(subprocess.Popen(
                    [sys.executable, '-c', f'from {__name__} import serve; serve({theirs.fileno()})'],
                    env=environ, stdin=subprocess.DEVNULL, pass_fds=(theirs.fileno(),)))
                self._conns.append(Connection(mine.detach()))
            self._conns[-1].send((factory, backend_kwargs))
        try:
            described = [self._ask(r, ('describe', {})) for r in range(replicas)]
        except BackendError as e:
            self.close()
            raise BackendError(f'ProcessBackend({self._name!r}) {e}') from None
        #: Each replica's process and device (``settings.json`` records them).
        self.nodes = [node for _, node in described]
        self._start([profile for profile, _ in described], self._where, verbose)

    def _where(self, replica: int) -> str:
        return f'replica {replica} (process {self._processes[replica].pid})'

    def _ask(self, replica: int, request: tuple) -> Any:
        """Sends ``request`` to a replica and waits for its answer."""
        self._conns[replica].send(request)
        return self._received(replica)

    def _received(self, replica: int) -> Any:
        """A replica's next answer; a :class:`BackendError` for a failure it reports, or for its death."""
        try:
            status, result = self._conns[replica].recv()
        except (EOFError, OSError):
            code = self._processes[replica].wait(timeout=10)
            raise BackendError(f'{self._where(replica)} died (exit code {code}: killed, or out of memory)') from None
        if status == 'error':
            raise BackendError(result)
        return result

    def _describe(self, changes: Dict[str, Any]) -> Profile:
        return self._ask(0, ('describe', changes))[0]

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        return (f'{self.profile.reproducibility or "not stated by the backend"}; in {len(self._processes)} replica '
                'processes of one thread each, each batch the one the backend forms in process, answered whole by '
                'one replica')

    @property
    def placement(self) -> Dict[str, object]:
        """Where answers are computed, for ``settings.json``: the replica processes and their device."""
        return {'runner': 'processes', 'replicas': len(self.nodes), 'threads_each': 1, 'actors': list(self.nodes)}

    def stream(self, call: Callable[[Backend, List[str], List[int]], list],
               batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]:
        """Runs ``call(backend, prompts, seeds)`` for each batch on the replicas, each batch whole on one,
        and yields ``(index, result)`` as each completes.

        On a failure nothing more is sent, the batches in flight finish and are yielded, then a
        :class:`~pyterrier_utility.errors.BackendError` names the replica and what failed. A replica's
        answers come back in the order it was sent its batches."""
        dead = [r for r, process in enumerate(self._processes) if process.poll() is not None]
        if dead or not self._processes:
            raise BackendError(f'{self!r}: ' + (f'{self._where(dead[0])} has died' if dead else 'closed')
                               + '; build a new pool')
        schedule = Schedule(len(self._conns), len(batches))
        sent: Dict[int, List[int]] = {r: [] for r in range(len(self._conns))}

        def send(replica: int) -> None:
            while (i := schedule.next_for(replica)) is not None:
                prompts, seeds = batches[i]
                self._conns[replica].send(('run', self._changes, call, prompts, seeds))
                sent[replica].append(i)

        try:
            for replica in range(len(self._conns)):
                send(replica)
            yield from self._collected(schedule, sent, send, batches)
        finally:
            self._drain(sent)

    def _collected(self, schedule: Schedule, sent: Dict[int, List[int]], send: Callable[[int], None],
                   batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]:
        """:meth:`stream`'s results as they come back, sending each replica more as it frees."""
        failure: Optional[BackendError] = None
        while any(sent.values()):
            busy = {self._conns[r]: r for r, held in sent.items() if held}
            for conn in wait(list(busy)):
                replica = busy[conn]  # type: ignore[index]
                i = sent[replica].pop(0)
                schedule.done(i)
                try:
                    result = self._received(replica)
                except BackendError as e:
                    if self._processes[replica].poll() is not None:
                        held = [i] + sent[replica]
                        prompts = [p for j in held for p in batches[j][0]]
                        sent[replica] = []
                        e = BackendError(f'{self!r}: {e}, holding {len(held)} batch{"es" * (len(held) > 1)} of '
                                         f'{len(prompts)} prompts (queries {queries_of(prompts)})')
                    failure = failure or BackendError(f'{self!r} {e}' if str(e).startswith('on ') else str(e))
                    continue
                yield i, result
                if failure is None:
                    send(replica)
        if failure is not None:
            raise failure

    def _drain(self, sent: Dict[int, List[int]]) -> None:
        """Waits for the answers of batches sent and not collected (the caller stopped early: an error, a
        Ctrl-C), discarding them, so that the next call reads its own."""
        for replica, held in sent.items():
            for _ in held:
                try:
                    self._received(replica)
                except BackendError:
                    pass
            held.clear()

    def close(self) -> None:
        """Ends the replica processes (copies made by :meth:`with_settings` share them)."""
        for conn in self._conns:
            conn.close()
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._conns, self._processes = [], []

    def __repr__(self):
        return f'ProcessBackend({self.profile.name if hasattr(self, "profile") else self._name}, ' \
               f'replicas={len(self._processes)})'

