"""A model on this machine's CPU as processes of one thread each: a replica of the backend per core.

A CPU's cores serve a small model better as replicas than as threads of one process: a decode step
of a few rows leaves most of a second thread idle, while a replica of its own keeps its core busy, and
on one thread every product sums in one order, so an answer needs no care for the thread count. The
answers are those of one replica: the backend's batches are the ones it forms in process, each answered
whole by one replica, and a batch-invariant backend gives each prompt the same answer whatever batch
it is in.

The pool starts one new Python process, the zygote (running :func:`zygote`: a process forked from the
caller, whose torch may have started its threads, can hang, and one started by ``multiprocessing``'s
``spawn`` would run the caller's script again). It builds the backend once, on one torch thread, and
forks the replicas from itself: they share its imported modules, tokenizer and weights page for page
(copy-on-write), so a replica adds to the machine's memory only what its batches and caches write.
Each replica is connected to this process by a socket pair and answers whole batches until the pool
is closed, or this process ends; the zygote waits for them and says how each ended. Forking is safe
only from a process running one thread: where the backend's build left others running (a library's
worker thread), the zygote starts each replica as a new process building its own copy instead, and
the pool says so.
"""
import atexit
import ctypes
import gc
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection, wait
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from pyterrier_rag.backend import Backend

from .._messages import warn
from ..errors import BackendError
from ._base import SIGNAL_POLL
from ._replica import QUIET, Profile, Replica, ReplicatedBackend, Schedule, cpu_device, local_pool, queries_of

#: The environment the pool's processes start with: one thread for every library that would start more
#: (and :data:`~._replica.QUIET` unless the pool is verbose).
ONE_THREAD = {'OMP_NUM_THREADS': '1', 'MKL_NUM_THREADS': '1', 'OPENBLAS_NUM_THREADS': '1',
              'TOKENIZERS_PARALLELISM': 'false'}
#: How long the zygote waits for the threads it ended to be gone before it forks (seconds).
THREADS_GONE_S = 2.0


def _here() -> Tuple[Dict[str, Any], str]:
    """Where a replica runs: its process and the CPU."""
    return {'pid': os.getpid(), 'device': cpu_device()}, f'replica process {os.getpid()}'


def _one_thread() -> None:
    """This process on one torch thread, deaf to Ctrl-C: the pool's process handles it, and closes the replicas."""
    import torch
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(1)


def _answered(conn: Connection, replica: Replica) -> None:
    """Answers what the pool asks on ``conn`` (``('describe', changes)`` or ``('run', changes, call, prompts,
    seeds)``), each with ``('ok', result)`` or ``('error', message)``, until the connection closes."""
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


def serve(fd: int, setup: int) -> None:
    """A replica started as a new process (where the zygote cannot fork): builds the backend it is sent on
    ``setup`` (``(factory, kwargs)``) on one torch thread, then answers the pool on its end ``fd`` of the
    socket pair."""
    _one_thread()
    with Connection(setup) as sent:
        factory, kwargs = sent.recv()
    _answered(Connection(fd), Replica(factory, kwargs, _here))


def _threads() -> int:
    """The threads this process runs (the kernel's count; Python's where the kernel does not say)."""
    try:
        return len(os.listdir('/proc/self/task'))
    except OSError:
        return threading.active_count()


def _end_openmp_threads() -> None:
    """Ends the worker threads of the OpenMP runtimes loaded: a backend's build may compute on several
    threads (the row tile is checked on two) and OpenMP keeps its workers waiting after, which a fork
    would leave without their threads. ``omp_pause_resource_all(omp_pause_hard)`` frees them; the
    runtime starts new ones if asked again."""
    try:
        with open('/proc/self/maps') as maps:
            paths = {line.split()[-1] for line in maps if any(n in line for n in ('libgomp', 'libiomp', 'libomp'))}
    except OSError:
        return
    for path in paths:
        try:
            ctypes.CDLL(path).omp_pause_resource_all(2)
        except (OSError, AttributeError):
            pass


def _why_not_forked() -> Optional[str]:
    """``None`` where this process can fork its replicas (one thread, ``os.fork``); else why not."""
    if not hasattr(os, 'fork') or not os.path.isdir('/proc/self/task'):
        return 'this system cannot count a process\'s threads before forking it'
    _end_openmp_threads()
    deadline = time.monotonic() + THREADS_GONE_S
    while _threads() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    if _threads() == 1 and threading.active_count() == 1:
        return None
    names = sorted({t.name for t in threading.enumerate()} - {threading.current_thread().name})
    return (f'the process that built the backend runs {_threads()} threads'
            + (f' (Python\'s {", ".join(names)})' if names else '') + ', and a process forked from it could hang')


def _forked(conns: List[Connection], control: Connection, replica: Replica) -> List[int]:
    """The replicas forked from this process, each answering on its connection; their process ids."""
    gc.collect()
    # The objects built so far are never collected again: a collection would write to every page holding them,
    # and each replica would then copy those pages.
    gc.freeze()
    sys.stdout.flush()  # else what is buffered would be written by each replica too
    sys.stderr.flush()
    pids = []
    for i, conn in enumerate(conns):
        pid = os.fork()
        if pid == 0:
            try:
                control.close()
                for other in conns[:i] + conns[i + 1:]:
                    other.close()
                replica.node, replica.where = _here()
                _answered(conn, replica)
            finally:
                os._exit(0)
        pids.append(pid)
    return pids


def _spawned(conns: List[Connection], factory: Callable[..., Backend], kwargs: Dict[str, Any]) -> List[int]:
    """The replicas started as new processes (running :func:`serve`), each building its backend; their ids."""
    pids = []
    for conn in conns:
        mine, theirs = socket.socketpair()
        with mine, theirs:
            fds = (conn.fileno(), theirs.fileno())
            pids.append(subprocess.Popen([sys.executable, '-c', f'from {__name__} import serve; serve{fds}'],
                                         stdin=subprocess.DEVNULL, pass_fds=fds).pid)
            Connection(mine.detach()).send((factory, kwargs))
    return pids


def zygote(control_fd: int, fds: Sequence[int]) -> None:
    """The pool's first process: on ``control_fd`` it is sent ``(factory, kwargs)``, builds the backend on one
    torch thread and forks a replica for each of ``fds`` (one end of each replica's socket pair); it
    answers ``('started', pids, why_not_forked)``, then ``('exited', replica, exit_code)`` as each
    replica ends, and ends after the last."""
    _one_thread()
    control = Connection(control_fd)
    try:
        factory, kwargs = control.recv()
    except EOFError:  # the pool was closed before it was started
        return
    replica = Replica(factory, kwargs, _here)
    conns = [Connection(fd) for fd in fds]
    why = _why_not_forked()
    if why is None:
        pids = _forked(conns, control, replica)
    else:
        del replica
        gc.collect()
        pids = _spawned(conns, factory, kwargs)
    for conn in conns:
        conn.close()
    left = {pid: i for i, pid in enumerate(pids)}
    try:
        control.send(('started', pids, why))
    except OSError:  # the pool's process has gone: the replicas end as their connections close
        pass
    while left:
        pid, status = os.wait()
        if pid in left:
            try:
                control.send(('exited', left.pop(pid), os.waitstatus_to_exitcode(status)))
            except OSError:
                pass


class ProcessBackend(ReplicatedBackend):
    """A backend of a model computed on this machine's CPU as ``replicas`` processes of one thread each.

    The replicas share the backend's batches (:class:`~pyterrier_utility.backends.work_batches`): the
    consecutive batches of a k-sweep go to the same replica, whose prefix cache then serves them, and a
    replica done with its own takes the last batches of the busiest. Each answer is computed on one
    thread, in the batch the backend forms in process, so a batch-invariant backend
    (:class:`~pyterrier_utility.backends.CausalLMBackend` on a CPU) gives the answers of one replica,
    bit for bit, whatever the number of replicas. Its ``generation_key`` is the backend's: one cache
    serves a run in process and on replicas alike. The replicas are forked from one process that built
    the backend, and share its model's memory (see the module).

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
        replicas, factory, self._name = local_pool('ProcessBackend', backend, replicas, 'in each replica')
        environ = dict(os.environ, **ONE_THREAD, **({} if verbose else QUIET))
        pairs = [socket.socketpair() for _ in range(replicas + 1)]
        theirs = [pair[1].fileno() for pair in pairs]
        try:
            #: The zygote: the process that builds the backend and forks the replicas (see the module).
            self.zygote = subprocess.Popen(
                [sys.executable, '-c', f'from {__name__} import zygote; zygote({theirs[0]}, {theirs[1:]})'],
                env=environ, stdin=subprocess.DEVNULL, pass_fds=theirs)
        finally:
            for mine, other in pairs:
                other.close()
        self._control, *self._conns = [Connection(mine.detach()) for mine, _ in pairs]
        #: How each replica ended, as the zygote says.
        self._exits: Dict[int, int] = {}
        self._pids: List[int] = []
        #: Each replica's batches sent and not yet read back (the answers of a call stopped early).
        self._unread: Dict[int, List[int]] = {}
        try:
            self._control.send((factory, backend_kwargs))
            self._pids, why = self._started()
            described = [self._ask(r, ('describe', {})) for r in range(replicas)]
        except BackendError as e:
            self.close()
            raise BackendError(f'ProcessBackend({self._name!r}) {e}') from None
        except BaseException:  # a factory that cannot be pickled, a Ctrl-C: no process left behind
            self.close()
            raise
        #: Whether the replicas were forked from the zygote, sharing its model (else each built its own).
        self.forked = why is None
        if why is not None:
            warn(f'ProcessBackend({self._name!r}): each replica holds its own copy of the model, as {why}')
        #: Each replica's process and device (``settings.json`` records them).
        self.nodes = [node for _, node in described]
        self._start([profile for profile, _ in described], self._where, verbose)
        atexit.register(self.close)  # replicas still answering a call stopped by Ctrl-C end with this process

    def _started(self) -> Tuple[List[int], Optional[str]]:
        """The replicas' process ids, once the zygote has started them, and why they were not forked."""
        try:
            _, pids, why = self._control.recv()
        except (EOFError, OSError):
            raise BackendError(f'on its zygote (process {self.zygote.pid}): it died before starting the replicas '
                               f'(exit code {self.zygote.wait()})') from None
        return pids, why

    def _where(self, replica: int) -> str:
        return f'replica {replica} (process {self._pids[replica]})'

    def _exit_code(self, replica: int, timeout: float = 0.0) -> Optional[int]:
        """How ``replica`` ended (its exit code; ``None`` while it runs), waiting up to ``timeout`` seconds for
        the zygote to say. Where the zygote itself has died, its replicas are taken as dead with its code."""
        deadline = time.monotonic() + timeout
        while replica not in self._exits:
            try:
                if not self._control.poll(max(0.0, deadline - time.monotonic())):
                    return None
                _, ended, code = self._control.recv()
            except (EOFError, OSError):
                code = self.zygote.wait()
                self._exits.update({r: code for r in range(len(self._pids)) if r not in self._exits})
                break
            self._exits[ended] = code
        return self._exits[replica]

    def _ask(self, replica: int, request: tuple) -> Any:
        """Sends ``request`` to a replica and waits for its answer."""
        self._conns[replica].send(request)
        return self._received(replica)

    def _received(self, replica: int) -> Any:
        """A replica's next answer; a :class:`BackendError` for a failure it reports, or for its death."""
        try:
            status, result = self._conns[replica].recv()
        except (EOFError, OSError):
            code = self._exit_code(replica, timeout=10)
            raise BackendError(f'{self._where(replica)} died (exit code {code}: killed, or out of memory)') from None
        if status == 'error':
            raise BackendError(result)
        return result

    def _describe(self, changes: Dict[str, Any]) -> Profile:
        return self._ask(0, ('describe', changes))[0]

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        return (f'{self.profile.reproducibility or "not stated by the backend"}; in {len(self._pids)} replica '
                'processes of one thread each, each batch the one the backend forms in process, answered whole by '
                'one replica')

    @property
    def placement(self) -> Dict[str, object]:
        """Where answers are computed, for ``settings.json``: the replica processes and their device."""
        return {'runner': 'processes', 'replicas': len(self.nodes), 'threads_each': 1, 'forked': self.forked,
                'actors': list(self.nodes)}

    def stream(self, call: Callable[[Backend, List[str], List[int]], list],
               batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]:
        """Runs ``call(backend, prompts, seeds)`` for each batch on the replicas, each batch whole on one,
        and yields ``(index, result)`` as each completes.

        On a failure nothing more is sent, the batches in flight finish and are yielded, then a
        :class:`~pyterrier_utility.errors.BackendError` names the replica and what failed. A replica's
        answers come back in the order it was sent its batches. A caller that stops early (an error, a
        Ctrl-C) is not kept waiting: the batches in flight finish in the replicas, and their answers are
        read and discarded by the next call (or the replicas killed by :meth:`close`)."""
        self._drain()
        dead = [r for r in range(len(self._pids)) if self._exit_code(r) is not None]
        if dead or not self._pids:
            raise BackendError(f'{self!r}: ' + (f'{self._where(dead[0])} has died' if dead else 'closed')
                               + '; build a new pool')
        schedule = Schedule(len(self._conns), len(batches))
        sent = self._unread  # shared with the copies made by with_settings, which use the same connections
        sent.update({r: [] for r in range(len(self._conns))})

        def send(replica: int) -> None:
            while (i := schedule.next_for(replica)) is not None:
                prompts, seeds = batches[i]
                self._conns[replica].send(('run', self._changes, call, prompts, seeds))
                sent[replica].append(i)

        for replica in range(len(self._conns)):
            send(replica)
        yield from self._collected(schedule, sent, send, batches)

    def _collected(self, schedule: Schedule, sent: Dict[int, List[int]], send: Callable[[int], None],
                   batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]:
        """:meth:`stream`'s results as they come back, sending each replica more as it frees."""
        failure: Optional[BackendError] = None
        while any(sent.values()):
            busy = {self._conns[r]: r for r, held in sent.items() if held}
            for conn in wait(list(busy), timeout=SIGNAL_POLL):
                replica = busy[conn]  # type: ignore[index]
                i = sent[replica][0]
                schedule.done(i)
                try:
                    result = self._received(replica)
                except BackendError as e:
                    sent[replica].pop(0)
                    if self._exit_code(replica) is not None:
                        held = [i] + sent[replica]
                        prompts = [p for j in held for p in batches[j][0]]
                        sent[replica] = []
                        e = BackendError(f'{self!r}: {e}, holding {len(held)} batch{"es" * (len(held) > 1)} of '
                                         f'{len(prompts)} prompts (queries {queries_of(prompts)})')
                    failure = failure or BackendError(f'{self!r} {e}' if str(e).startswith('on ') else str(e))
                    continue
                sent[replica].pop(0)  # read: not left for the next call to discard
                yield i, result
                if failure is None:
                    send(replica)
        if failure is not None:
            raise failure

    def _drain(self) -> None:
        """Waits for the answers of batches sent and not collected (the last call stopped early: an error,
        a Ctrl-C), discarding them, so that this call reads its own."""
        for replica, held in self._unread.items():
            for _ in held:
                try:
                    self._received(replica)
                except BackendError:
                    pass
            held.clear()

    def close(self) -> None:
        """Ends the replica processes and the zygote (copies made by :meth:`with_settings` share them)."""
        for conn in self._conns:
            conn.close()
        for replica, pid in enumerate(self._pids):
            # A replica still answering a batch nobody reads is killed at once; the others end as their
            # connection closes.
            if self._exit_code(replica, timeout=0 if self._unread.get(replica) else 10) is None:
                os.kill(pid, signal.SIGKILL)
                self._exit_code(replica, timeout=10)
        self._control.close()
        try:
            self.zygote.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.zygote.kill()
            self.zygote.wait()
        self._conns, self._pids = [], []
        self._unread.clear()
        atexit.unregister(self.close)

    def __repr__(self):
        return f'ProcessBackend({self.profile.name if hasattr(self, "profile") else self._name}, ' \
               f'replicas={len(self._pids)})'

