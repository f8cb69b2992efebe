"""A model on this machine's CPU as replicas that are threads of this process, one torch thread each.

A CPU's cores serve a small model better as replicas than as torch threads of one product: a decode
step of a few rows leaves most of a second torch thread idle, while a replica of its own keeps its core
busy, and on one thread every product sums in one order, so an answer needs no care for the thread
count. Replicas that are threads of one process hold one model: its weights, tokenizer and torch are
in memory once, as is the prefix cache; each replica adds only what its batches write (a batch's KV
cache and logits), and no process has to start. Python's lock is released inside every torch operation,
which is where a decode step spends its time, so the replicas compute at once.

The answers are those of one replica: the backend's batches are the ones it forms in process, each
answered whole by one replica, and a batch-invariant backend gives each prompt the same answer
whatever batch it is in.
"""
import copy
import ctypes
import queue
import threading
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from pyterrier_rag.backend import Backend

from .._checks import check
from ..errors import BackendError
from ._base import SIGNAL_POLL
from ._replica import Profile, Replica, ReplicatedBackend, Schedule, cpu_device, local_pool

#: Seconds a call stopped early waits for the replicas it stopped to end: each ends at its next step,
#: and one still inside a longer one (a long prompt's prefill) is waited for by the next call.
STOP_S = 10.0


class SerialTokenizer:
    """A tokenizer shared by threads, called by one at a time: a fast (Rust) tokenizer sets its
    truncation and padding on itself at each call, which another thread's call must not meet."""

    def __init__(self, tokenizer: Any):
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        with self._lock:
            return self._tokenizer(*args, **kwargs)

    def __getattr__(self, name: str):
        value = getattr(self._tokenizer, name)
        if not callable(value):
            return value

        def serial(*args, **kwargs):
            with self._lock:
                return value(*args, **kwargs)
        return serial

    def __reduce__(self):  # a copy in another process needs no lock of this one's
        return copy.copy, (self._tokenizer,)


class ThreadBackend(ReplicatedBackend):
    """A backend of a model computed on this machine's CPU as ``replicas`` threads of this process,
    each computing on one torch thread.

    The model is built once, on one torch thread as the replicas compute (what a backend measures of its
    kernels when built, such as the offline reader's row tile, holds there), and shared: each replica is a
    copy of the backend holding the same model and tokenizer and the same prefix cache. The replicas share
    the backend's batches (:class:`~pyterrier_utility.backends.work_batches`): the consecutive batches of a
    k-sweep go to the same replica, so that the prefixes it cached serve them, and a replica done with its
    own takes the last batches of the busiest. Each answer is computed on one thread, in the batch the backend forms in
    process, so a batch-invariant backend (:class:`~pyterrier_utility.backends.CausalLMBackend` on a
    CPU) gives the answers of one replica, bit for bit, whatever the number of replicas. Its
    ``generation_key`` is the backend's: one cache serves a run in process and on replicas alike.

    A replica that fails ends the pool's work: the batches the others are answering finish and are
    yielded, then a :class:`~pyterrier_utility.errors.BackendError` names the replica and the queries it
    held; a re-run generates only what is missing.

    Args:
        backend: a reader name (``'gemma3-270m'``, ``'huggingface:MODEL'``), or a function building a
            backend of this package from ``backend_kwargs`` whose ``thread_replica()`` gives a copy a
            thread can answer with beside it.
        replicas: the threads (default: one per thread torch would use, :func:`cpu_replicas`).
        verbose: unused; accepted as the other pools take it.
        **backend_kwargs: the backend's settings (``temperature``, ``max_new_tokens``, ``batch_size``, ...).

    Example::

        backend = ThreadBackend('gemma3-270m', replicas=2)
        reader = pyterrier_utility.Reader(pyterrier_utility.GenerationCache(backend))
    """

    def __init__(self, backend: Union[str, Callable[..., Backend]], replicas: Optional[int] = None, *,
                 verbose: bool = False, **backend_kwargs):
        import torch
        replicas, factory, self._name = local_pool('ThreadBackend', backend, replicas, 'in this process')
        threads = torch.get_num_threads()
        # Built on the one thread the replicas compute on: a backend measures its kernels there (the offline
        # reader's row tile, which on some CPUs holds at one number of threads only, and its batching says it).
        torch.set_num_threads(1)
        try:
            first = Replica(factory, backend_kwargs, _located(0))
        finally:
            torch.set_num_threads(threads)
        if first.failure is not None:
            raise BackendError(f'ThreadBackend({self._name!r}): {first.failure}')
        built = first.variants[()]
        check(callable(getattr(built, 'thread_replica', None)), f'ThreadBackend({self._name!r})',
              f'{built!r} cannot be shared by threads (it has no thread_replica()); run it in processes '
              '(ProcessBackend) instead')
        if getattr(built, 'tokenizer', None) is not None:
            built.tokenizer = SerialTokenizer(built.tokenizer)  # type: ignore[attr-defined]
        self._replicas = [first] + [Replica(built.thread_replica, {}, _located(r))  # type: ignore[attr-defined]
                                    for r in range(1, replicas)]
        #: Each replica's thread and device (``settings.json`` records them).
        self.nodes = [r.node for r in self._replicas]
        #: The threads of a call stopped early, still answering their last batch (copies share them).
        self._lingering: List[threading.Thread] = []
        self._start([r.describe({})[0] for r in self._replicas], self._where, verbose)

    def _where(self, replica: int) -> str:
        return self._replicas[replica].where

    def _describe(self, changes: Dict[str, Any]) -> Profile:
        return self._replicas[0].describe(changes)[0]

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        return (f'{self.profile.reproducibility or "not stated by the backend"}; in {len(self._replicas)} replica '
                'threads of one torch thread each, each batch the one the backend forms in process, answered whole '
                'by one replica')

    @property
    def placement(self) -> Dict[str, object]:
        """Where answers are computed, for ``settings.json``: the replica threads and their device."""
        return {'runner': 'threads', 'replicas': len(self._replicas), 'threads_each': 1, 'actors': list(self.nodes)}

    def stream(self, call: Callable[[Backend, List[str], List[int]], list],
               batches: Sequence[Tuple[List[str], List[int]]]) -> Iterator[Tuple[int, list]]:
        """Runs ``call(backend, prompts, seeds)`` for each batch on the replicas, each batch whole on one,
        and yields ``(index, result)`` as each completes.

        On a failure no replica starts another batch, the batches being answered finish and are yielded,
        then a :class:`~pyterrier_utility.errors.BackendError` names the replica and what failed. Torch
        runs one thread in this process until the last batch is answered. A caller that stops early (an
        error, a Ctrl-C) is not kept waiting for the batches being answered: no replica starts another,
        and each replica answering one is stopped as Ctrl-C stops a backend in the caller's own thread
        (a ``KeyboardInterrupt`` raised in it, taking effect at its next step, a decode step), its
        batch's answers discarded."""
        import torch
        check(bool(self._replicas), repr(self), 'closed; build a new pool')
        for worker in self._lingering:  # a replica stopped by the last call, still inside one long step
            worker.join()
        schedule = Schedule(len(self._replicas), len(batches))
        lock = threading.Lock()
        results: 'queue.SimpleQueue[Optional[tuple]]' = queue.SimpleQueue()
        stop = threading.Event()
        answering = [False] * len(self._replicas)  # under ``lock``: which replicas are inside a batch

        def work(replica: int) -> None:
            torch.set_num_threads(1)
            try:
                while True:
                    with lock:  # the caller stops the pool under it: no batch is taken after
                        i = None if stop.is_set() else schedule.next_for(replica)
                        answering[replica] = i is not None
                    if i is None:
                        break
                    try:
                        result = self._replicas[replica].run(self._changes, call, *batches[i])
                        with lock:  # the interrupt below is raised only before this ends
                            answering[replica] = False
                            schedule.done(i)
                    except BaseException as e:  # reported by the caller's thread; a KeyboardInterrupt: stopped
                        stop.set()
                        results.put((i, None, e))
                        break
                    results.put((i, result, None))
            finally:
                results.put(None)

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        workers = [threading.Thread(target=work, args=(r,), name=f'pyterrier-utility replica {r}', daemon=True)
                   for r in range(len(self._replicas))]
        failure: Optional[BaseException] = None
        running = len(workers)
        try:
            for worker in workers:
                worker.start()
            while running:
                try:
                    item = results.get(timeout=SIGNAL_POLL)
                except queue.Empty:
                    continue
                if item is None:
                    running -= 1
                    continue
                i, result, error = item
                if error is not None:
                    failure = failure or error
                    continue
                yield i, result
        finally:
            with lock:  # a caller stopping early (an error, a Ctrl-C): the replicas start nothing more
                stop.set()
                for worker, busy in zip(workers, answering):
                    if busy:
                        _interrupt(worker)
            if running:
                deadline = time.monotonic() + STOP_S
                for worker in workers:
                    worker.join(max(0.0, deadline - time.monotonic()))
            self._lingering[:] = [worker for worker in workers if worker.is_alive()]
            torch.set_num_threads(threads)
        if isinstance(failure, BackendError):
            raise BackendError(f'{self!r} {failure}' if str(failure).startswith('on ') else str(failure))
        if failure is not None:
            raise failure

    def close(self) -> None:
        """Drops the replicas (copies made by :meth:`with_settings` share them); the model is freed with the
        last reference to it."""
        self._replicas.clear()

    def __repr__(self):
        name = self.profile.name if hasattr(self, 'profile') else self._name
        return f'ThreadBackend({name}, replicas={len(self._replicas)})'


def _interrupt(thread: threading.Thread) -> None:
    """Raises ``KeyboardInterrupt`` in ``thread`` when it next runs Python code."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident or 0), ctypes.py_object(KeyboardInterrupt))


def _located(replica: int) -> Callable[[], Tuple[Dict[str, Any], str]]:
    """Where a replica runs: its thread of this process, and the CPU."""
    def locate():
        return {'thread': replica, 'device': cpu_device().rsplit(',', 1)[0] + ', 1 torch thread'}, \
            f'replica thread {replica}'
    return locate
