"""Answering prompts over a pool of HTTP servers through one :class:`httpx.Client` (its connection
pool, timeouts and errors). Requests are retried here, not by a client library, so that a retry can
go to another server of the pool and stop at a deadline of its own."""
import collections
import contextlib
import email.utils
import itertools
import json
import logging
import queue
import socket
import threading
import time
import weakref
from dataclasses import replace
from typing import Callable, Dict, List, Optional, Sequence

import httpx

from .._messages import inform
from ..errors import BackendError
from ._base import SIGNAL_POLL, Answer, DecodingBackendBase, cut_at_stop

#: HTTP statuses worth retrying: rate limits and server-side failures.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})

logger = logging.getLogger(__name__)


class _Retryable(Exception):
    """A failed attempt worth retrying: ``how`` a server failed without answering (which counts towards
    taking it out of the pool), or the ``status`` it answered and the ``retry_after`` seconds it asked."""

    def __init__(self, message: str, how: Optional[str] = None, status: Optional[int] = None,
                 retry_after: float = 0.0):
        super().__init__(message)
        self.how, self.status, self.retry_after = how, status, retry_after


class ServerPoolBackend(DecodingBackendBase):
    """A backend that answers each prompt with one JSON request to a pool of HTTP servers, as
    :class:`~pyterrier_utility.backends.OpenAICompatibleBackend` describes: up to ``concurrency`` in
    flight, each to the server with the fewest, retried elsewhere, answers handed on as they arrive.
    Subclasses set the settings (``base_urls``, ``api_key``, ``concurrency``, ``timeout``,
    ``max_retries``, ``backoff``, ``retry_deadline``), build the requests and read the answers
    (``request_path``, ``_answer``)."""
    #: Failures in a row (timeouts, connections refused) that take an endpoint out of the pool.
    breaker_failures = 3
    #: Seconds an endpoint stays out of the pool.
    breaker_cooldown = 60.0
    #: The answer of a response not to be retried (``where``, ``status``, ``reply``, ``body``), or a BackendError.
    _answer: Callable[[str, int, str, Dict[str, object]], Answer]

    @property
    def request_path(self) -> str:
        """The path each request goes to, after a server's URL."""
        raise NotImplementedError

    def _copied(self) -> None:
        """Makes afresh what a copy must not share, the private attributes: locks, counts, connections."""
        self._lock = threading.Lock()
        self._server_errors: List[str] = []
        self._in_flight = dict.fromkeys(self.base_urls, 0)
        self._strikes = dict.fromkeys(self.base_urls, 0)
        self._out_until = dict.fromkeys(self.base_urls, 0.0)
        self._said_until = dict.fromkeys(self.base_urls, 0.0)
        self._turn = itertools.count()
        self._streams: weakref.WeakSet = weakref.WeakSet()
        headers = {'Content-Type': 'application/json'}
        if self.api_key:
            headers['Authorization'] = f'Bearer {self.api_key}'
        # No bound on connections: a call's threads (concurrency) bound them. No proxy from the
        # environment: it would carry requests to servers on a cluster's own network. The trace records
        # each connection (_opened), for Ctrl-C to cut.
        self._http = httpx.Client(headers=headers, trust_env=False,
                                  limits=httpx.Limits(max_connections=None, max_keepalive_connections=None),
                                  event_hooks={'request': [lambda r: r.extensions.update(trace=self._opened)]})

    def __getstate__(self):
        return {name: value for name, value in self.__dict__.items() if not name.startswith('_')}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._copied()

    @property
    def batch_size(self) -> int:
        """Prompts handed over per call by the generation cache: enough to keep every slot busy."""
        return 4 * self.concurrency

    def _opened(self, event: str, info: dict) -> None:
        if event in ('connection.connect_tcp.complete', 'connection.start_tls.complete'):
            with self._lock:
                self._streams.add(info['return_value'])

    def _acquire(self, avoid: Optional[str]) -> str:
        with self._lock:
            turn, n = next(self._turn), len(self.base_urls)
            rotated = [self.base_urls[(turn + i) % n] for i in range(n)]
            # Endpoints out of the pool are used only when every endpoint is.
            rotated = [u for u in rotated if self._out_until[u] <= time.monotonic()] or rotated
            url = min([u for u in rotated if u != avoid] or rotated, key=lambda u: self._in_flight[u])
            self._in_flight[url] += 1
            return url

    def _release(self, url: str, failure: Optional[_Retryable]) -> None:
        """Ends a request to ``url``. An endpoint of a pool that fails ``breaker_failures`` times in a
        row without answering (timeouts, refused connections) leaves the pool for ``breaker_cooldown``
        seconds; back, it leaves again at its next such failure, until it answers once."""
        with self._lock:
            self._in_flight[url] -= 1
            if failure is None or failure.how is None:
                self._strikes[url] = 0
                return
            self._strikes[url] += 1
            if self._strikes[url] < self.breaker_failures or len(self.base_urls) == 1:
                return
            self._out_until[url] = time.monotonic() + self.breaker_cooldown
            strikes = self._strikes[url]
        logger.warning('%s: no answer %d times in a row (the last: %s); out of the pool for %g s, its requests go '
                       'to the other %d endpoint(s)', url, strikes, failure.how, self.breaker_cooldown,
                       len(self.base_urls) - 1)

    def _post(self, url: str, body: Dict[str, object], deadline: float, limit: str) -> Answer:
        """The answer of one request; ``limit`` names what sets ``deadline`` (for the error message)."""
        where = url + self.request_path
        timed_out = _Retryable(f'{where}: no complete answer within {limit}', how='timed out')
        try:
            # httpx bounds each wait (to connect, each read) by the time left; the deadline bounds the
            # whole answer, so that a server trickling bytes is cut at it too.
            with self._http.stream('POST', where, content=json.dumps(body).encode(),
                                   timeout=max(0.001, deadline - time.monotonic())) as response:
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if time.monotonic() > deadline:
                        raise timed_out
        except httpx.TimeoutException as e:
            raise timed_out from e
        except httpx.RequestError as e:
            raise _Retryable(f'{where}: {type(e).__name__}: {e}', how='could not be reached') from e
        status, reply = response.status_code, data.decode('utf-8', errors='replace')
        if status >= 400:
            with self._lock:
                self._server_errors.append(server_said(where, status, reply))
        if status in RETRY_STATUSES:
            raise _Retryable(server_said(where, status, reply), status=status,
                             retry_after=_retry_after(response.headers.get('Retry-After')))
        return self._answer(where, status, reply, body)

    def _request(self, body: Dict[str, object], stop: Sequence[str], cancel: threading.Event) -> Answer:
        """One prompt's answer: retried up to ``max_retries`` times, within ``retry_deadline``."""
        give_up = time.monotonic() + self.retry_deadline if self.retry_deadline is not None else float('inf')
        failed: Optional[str] = None
        last: Optional[_Retryable] = None
        for attempt in range(self.max_retries + 1):
            if last is not None:
                backoff = min(60.0, self.backoff * 2 ** (attempt - 1))
                delay = max(last.retry_after, backoff)
                if time.monotonic() + delay >= give_up:
                    raise BackendError(f'{last} (the next retry, in {delay:g} s, would pass the retry deadline of '
                                       f'{self.retry_deadline:g} s; {attempt - 1} retries made)')
                if last.retry_after > backoff:
                    self._say_wait(failed, last.status, delay)  # type: ignore[arg-type]  # set with last
                if cancel.wait(delay):
                    raise BackendError('cancelled')
            url = self._acquire(avoid=failed)
            failure = None
            try:
                now = time.monotonic()
                limit = (f'the {self.timeout:g} s timeout' if now + self.timeout <= give_up
                         else f'the retry deadline of {self.retry_deadline:g} s')
                answer = self._post(url, body, min(now + self.timeout, give_up), limit)
            except _Retryable as e:
                failure, failed, last = e, url, e
                continue
            finally:
                self._release(url, failure)
            with self._lock:
                self.requests += 1
                self.truncated += bool(answer.truncated)
            return replace(answer, text=cut_at_stop(answer.text, stop))  # type: ignore[call-arg]  # untyped base
        raise BackendError(f'{last} (after {self.max_retries} retries)')

    def _say_wait(self, url: str, status: int, delay: float) -> None:
        """Says on the console that ``url`` asked to wait ``delay`` seconds, once per wait: a wait that
        ends within a second of the last one said for the endpoint (requests refused together) is not."""
        until = time.monotonic() + delay
        with self._lock:
            if until < self._said_until[url] + 1.0:
                return
            self._said_until[url] = until
        why = ' (rate limited)' if status == 429 else ''
        inform(f'{url}: HTTP {status}{why}; waiting {round(delay, 1):g} s as Retry-After asks')

    def _answer_all(self, bodies: List[Dict[str, object]], stop: Sequence[str],
                    on_answers: Optional[Callable[[Dict[int, Answer]], None]]) -> List[Answer]:
        """The answers to ``bodies``, each handed to ``on_answers`` (index -> answer) as it arrives, in
        this thread; on a failure or Ctrl-C, the error carries the answers completed (``completed``)."""
        with self._lock:
            self._server_errors.clear()
        jobs, cancel = collections.deque(range(len(bodies))), threading.Event()
        results: queue.SimpleQueue = queue.SimpleQueue()

        def work():
            with contextlib.suppress(IndexError):  # no job left
                while not cancel.is_set():
                    i = jobs.popleft()  # thread-safe, as deque's appends and pops are
                    try:
                        results.put((i, self._request(bodies[i], stop, cancel), None))
                    except Exception as e:
                        results.put((i, None, e))
            results.put(None)

        workers = min(self.concurrency, max(1, len(bodies)))
        for n in range(workers):  # daemon threads: a hung request can never hold the interpreter at exit
            threading.Thread(target=work, daemon=True, name=f'{self!r} request {n}').start()
        answers: Dict[int, Answer] = {}
        failure: Optional[Exception] = None
        try:
            while workers:
                arrived: Dict[int, Answer] = {}
                for item in _taken(results, SIGNAL_POLL):  # all that arrived together, handed on at once
                    if item is None:
                        workers -= 1
                    elif item[2] is None:
                        answers[item[0]] = arrived[item[0]] = item[1]
                    elif failure is None:
                        failure = item[2]
                        cancel.set()  # no new requests; those sent finish and their answers are kept
                if arrived and on_answers is not None:
                    on_answers(arrived)
        except KeyboardInterrupt as interrupt:
            cancel.set()
            with self._lock:
                streams = list(self._streams)
            for stream in streams:  # shut, not closed: a thread reading a socket returns at once only then
                with contextlib.suppress(OSError, AttributeError):  # closed already
                    stream.get_extra_info('socket').shutdown(socket.SHUT_RDWR)
            # Answers put in the queue but not yet taken from it were computed too: they are kept.
            answers.update(item[:2] for item in _taken(results, 0) if item is not None and item[2] is None)
            interrupt.completed = dict(answers)  # type: ignore[attr-defined]  # read by the generation cache
            raise
        except Exception:
            cancel.set()  # on_answers failed (the cache file): no new requests
            raise
        if failure is not None:
            message = (str(failure) if isinstance(failure, BackendError)
                       else f'{self!r}: {type(failure).__name__}: {failure}')
            raise BackendError(message + self._first_server_error(message), completed=answers,
                               prompt=getattr(failure, 'prompt', None)) from failure
        return [answers[i] for i in range(len(bodies))]

    def _first_server_error(self, message: str) -> str:
        """The first error a server answered during the call, when the failure reported is another."""
        with self._lock:
            errors = list(self._server_errors)
        return '' if not errors or errors[0] in message else f'; the first error a server gave: {errors[0]}'


def server_said(where: str, status: int, reply: str) -> str:
    """A server's error in one line: the endpoint, the status and the ``error.message`` (or ``error``,
    ``message``) of a JSON body as vLLM, llama.cpp's server and hosted APIs send it, else the body."""
    try:
        said = json.loads(reply)
        said = said.get('error', said) if isinstance(said, dict) else said
        said = said.get('message', said) if isinstance(said, dict) else said
    except ValueError:
        said = reply
    return f"{where}: HTTP {status}: {' '.join(str(said if isinstance(said, str) else reply).split())[:500]}"


def _retry_after(value: Optional[str]) -> float:
    """Seconds a ``Retry-After`` header asks to wait (seconds or an HTTP date); 0 without one."""
    try:
        return max(0.0, float(value or 0))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0


def _taken(items: queue.SimpleQueue, wait: float) -> list:
    """What arrives in a queue within ``wait`` seconds, with all that is there by then, taken from it."""
    found = []
    with contextlib.suppress(queue.Empty):
        found.append(items.get(timeout=wait))
        while True:
            found.append(items.get_nowait())
    return found
