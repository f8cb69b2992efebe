"""A reader backend for any server that speaks the OpenAI protocol, over a pool of endpoints.

vLLM (``vllm serve``), SGLang, TGI, llama.cpp's server, ``transformers serve`` and hosted APIs all
answer ``/v1/completions`` and ``/v1/chat/completions``. One request carries one prompt and one
seed, so sample ``j`` of a prompt is reproducible wherever the server honours ``seed``.
"""
import email.utils
import http.client
import itertools
import json
import logging
import math
import os
import queue
import socket
import threading
import time
import urllib.parse
import uuid
from dataclasses import replace
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

from .._checks import check, check_int, check_number
from .._messages import either, inform
from .._text import encodable
from ..engines import ENGINES_BY_NAME
from ..errors import BackendError
from ..settings import Decoding
from ..vocabulary import ENDPOINTS
from ._base import Answer, DecodingBackendBase, cut_at_stop, query_of, sampling_fields, split_decoding

#: What vLLM's server answers (HTTP 500) when its engine has died; on vLLM's CPU build the known cause
#: is a seeded request whose prompt is prefilled in chunks (its log: "CPU Generator does not use offset").
VLLM_ENGINE_DEAD = 'EngineCore encountered an issue'
#: HTTP statuses worth retrying: rate limits and server-side failures.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
#: Words of a client error (HTTP 400) that refuses a prompt longer than the server's context, as vLLM ("This model's
#: maximum context length is ...", "... longer than the maximum model length"), SGLang, llama.cpp's server ("the
#: request exceeds the available context size") and hosted APIs ("context_length_exceeded") word it.
CONTEXT_EXCEEDED = ('context length', 'context size', 'context_length_exceeded', 'maximum model length')

#: Seconds between the waits of the thread that collects answers. Ctrl-C reaches that thread only
#: while it runs: the kernel may deliver SIGINT to a request thread, and a wait with no end is then
#: never woken (seen under load: the interrupt took effect when the hung requests ended, 60 s later).
SIGNAL_POLL = 0.1

logger = logging.getLogger(__name__)


class _Retryable(Exception):
    """A failed attempt worth retrying; ``how`` says how an endpoint failed without answering
    (which counts towards taking it out of the pool), ``status`` the HTTP status of one that
    answered, ``retry_after`` what the server asked."""

    def __init__(self, message: str, how: Optional[str] = None, status: Optional[int] = None,
                 retry_after: float = 0.0):
        super().__init__(message)
        self.how = how
        self.unanswered = how is not None
        self.status = status
        self.retry_after = retry_after


class OpenAICompatibleBackend(DecodingBackendBase):
    """Answers prompts through OpenAI-compatible servers: up to ``concurrency`` requests in flight
    over a pool of endpoints, each request sent to the endpoint with the fewest in flight.

    Every setting is sent with every request, never dropped: ``temperature``, ``top_p``,
    ``max_tokens``, ``stop``, a per-request ``seed``, and the non-standard ``top_k``, ``min_p`` and
    ``repetition_penalty`` (vLLM, SGLang, TGI and llama.cpp accept them; set them to ``None`` to leave
    them out for servers that do not, such as hosted APIs) and ``repeat_last_n`` when set. A server
    that rejects a field answers the first request with a client error, and the run stops naming the
    endpoint, the status, the server's message and the non-standard fields sent. Connection errors,
    timeouts, 408, 429 and 5xx are retried with exponential backoff, on another endpoint where there
    is one; after ``max_retries`` the call raises :class:`~pyterrier_utility.errors.BackendError` naming the
    endpoint and the status, carrying the answers completed before it (the generation cache keeps
    them). An error is never returned as an answer, nor is text that cannot be encoded (a lone
    surrogate). An endpoint of a pool that times out or cannot be reached ``breaker_failures`` times
    in a row leaves the pool for ``breaker_cooldown`` seconds (a warning on the module's logger says
    so); its share goes to the others. Ctrl-C stops a call at once, cutting the requests in flight.
    Each answer is handed to the generation cache as it arrives (``on_answers``), so a process killed
    mid-call keeps every answer that came back.

    A ``Retry-After`` that comes with a 429 or 503 is said on the console once per wait (requests
    that hit the limit together wait together, said once). A response is an answer only when it
    holds exactly the one choice asked for (``n: 1``) with a text; anything else stops the call
    naming the endpoint, and nothing of it is stored. A prompt longer than the server's context (an
    HTTP 400 in the words of :data:`CONTEXT_EXCEEDED`) is not retried: the call stops naming the
    endpoint, the server's message, the prompt's length and end (every prompt format puts the
    question last) and how to make it fit. The backend does not shorten prompts itself: it sees
    prompts, not documents, and cannot count tokens without the model's tokenizer; given
    ``tokenizer`` and ``max_input_length`` (the server's context length), the Reader truncates the
    documents evenly before they are sent.

    Each answer is an :class:`~pyterrier_utility.backends.Answer` whose ``truncated`` says the server
    stopped it at ``max_tokens`` (``finish_reason: length``); ``truncated`` on the backend counts
    them over all calls, ``requests`` counts the answered requests. With ``logprobs``, its ``logprob``
    and ``tokens`` are the sum and count of the chosen tokens' log-probabilities the server reports
    (``None`` from a server that ignores the request for them).

    Args:
        model: the model name the servers serve (the ``model`` field of each request).
        base_urls: one URL or several, each ending in ``/v1`` (e.g. one ``vllm serve`` per GPU); they
            must serve the same model with the same weights (the URLs are not part of the cache key).
        api_key: sent as a bearer token; default ``$OPENAI_API_KEY``, none for local servers without it.
        endpoint: ``'completions'`` (the raw prompt: the study's text exactly) or ``'chat'`` (the
            prompt as one user message, formatted by the server's chat template).
        decoding: the :class:`~pyterrier_utility.settings.Decoding`, every field sent (default: the
            authors' 0.3, top-k 50, 300 new tokens, stop at "STOP"); single fields may be given as
            keywords (``temperature=0``). ``top_k`` 0 is sent as -1 (all tokens) and ``None`` is not
            sent; ``top_p``, ``min_p``, ``repetition_penalty`` and ``repeat_last_n`` are sent when
            given. ``repeat_last_n`` is llama.cpp's server's field; vLLM's server ignores it, its
            penalty counting every prompt and output token (``decoding_notes`` says so).
        extra_body: further fields sent with every request (e.g. llama.cpp's ``{'repeat_penalty': 1.1}``);
            part of the cache key.
        concurrency: requests in flight at once, over all endpoints.
        timeout: seconds one request may take, from connecting to the last byte of the answer (a
            deadline, not a limit per read: a server trickling bytes is cut at it).
        max_retries: retries of a failed request before the call fails.
        backoff: the first retry's delay in seconds, doubled at each further retry (at most 60 s); a
            ``Retry-After`` header of a 429 or 503 (seconds or a date) is waited for when longer.
        retry_deadline: seconds from a prompt's first attempt after which it is not tried again (an
            attempt in flight is cut at it); ``None``: only ``max_retries`` bounds the retries.
        tokenizer: the model's Hugging Face tokenizer (or its name or path), so the Reader can fit
            prompts into ``max_input_length`` by truncating documents evenly; optional.
        max_input_length: the most prompt tokens (with a tokenizer).
        reproducible: one request in flight per endpoint, each with a ``cache_salt`` of its own (vLLM's
            field: no prefix computed for another request is reused), so that a server computes every
            answer alone and fresh generation with the same seeds gives the same answers (see
            ``reproducibility``); ``concurrency`` is then the number of endpoints.
        logprobs: ask for the chosen tokens' log-probabilities (completions: ``logprobs: 1``; chat:
            ``logprobs: true``). Off by default: some servers reject the field. Not part of the cache
            key (it does not change the answers): answers cached without it keep no log-probability.

    Example::

        backend = OpenAICompatibleBackend('meta-llama/Meta-Llama-3-8B-Instruct',
                                          ['http://gpu1:8000/v1', 'http://gpu2:8000/v1'], concurrency=64)
        reader = pyterrier_utility.Reader(backend, n_samples=5)
    """
    DECODING_FIELDS = ENGINES_BY_NAME['openai'].honours
    DECODING_OWN_WAY = dict(ENGINES_BY_NAME['openai'].own_way)
    answers_each = True
    # The URLs are not here: every endpoint of a pool serves the same model with the same weights.
    ENGINE_FIELDS: Tuple[str, ...] = ('endpoint', 'extra_body')
    #: Failures in a row (timeouts, connections refused) that take an endpoint out of the pool.
    breaker_failures = 3
    #: Seconds an endpoint stays out of the pool.
    breaker_cooldown = 60.0

    def __init__(self, model: str, base_urls: Union[str, Sequence[str]] = ('http://127.0.0.1:8000/v1',), *,
                 api_key: Optional[str] = None, endpoint: str = 'completions', decoding: Optional[Decoding] = None,
                 extra_body: Optional[Dict[str, object]] = None, concurrency: int = 8, timeout: float = 600.0,
                 max_retries: int = 5, backoff: float = 1.0, retry_deadline: Optional[float] = None, tokenizer=None,
                 max_input_length: Optional[int] = None, logprobs: bool = False, reproducible: bool = False,
                 verbose: bool = False, **decoding_fields):
        owner = f'OpenAICompatibleBackend({model!r})'
        decoding = split_decoding(owner, decoding, Decoding(), decoding_fields)
        check(not decoding_fields, owner, f'unknown arguments {sorted(decoding_fields)}')
        check(isinstance(model, str) and bool(model), owner, f'model must be a non-empty string, got {model!r}')
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls or [])
        check(bool(urls) and all(isinstance(u, str) and u.startswith(('http://', 'https://'))
                                 and urllib.parse.urlsplit(u).hostname for u in urls),
              owner, f'base_urls must be one or more http(s) URLs, got {base_urls!r}')
        check(endpoint in ENDPOINTS, owner, f'endpoint must be {either(ENDPOINTS)}, got {endpoint!r}')
        check_int(owner, 'concurrency', concurrency, 1)
        check_int(owner, 'max_retries', max_retries, 0)
        check_number(owner, 'timeout', timeout, 0, exclusive=True)
        check_number(owner, 'backoff', backoff, 0)
        if retry_deadline is not None:
            check_number(owner, 'retry_deadline', retry_deadline, 0, exclusive=True)
        if max_input_length is not None:
            check_int(owner, 'max_input_length', max_input_length, 1)
        extra_body = dict(extra_body or {})
        reserved = sorted(set(extra_body) & {'model', 'prompt', 'messages', 'seed', 'n', 'stream'})
        check(not reserved, owner, f'extra_body may not set {reserved}: the backend sets them per request')
        if isinstance(tokenizer, (str, os.PathLike)):
            from transformers import AutoTokenizer
            tokenizer = AutoTokenizer.from_pretrained(str(tokenizer))
        if max_input_length is None and tokenizer is not None:
            max_input_length = getattr(tokenizer, 'model_max_length', None)
            max_input_length = max_input_length if max_input_length and max_input_length < 10 ** 7 else None
        super().__init__(model, max_input_length=max_input_length or 10 ** 9, max_new_tokens=decoding.max_new_tokens,
                         verbose=verbose)
        self._set_decoding(decoding)
        self.base_urls = [u.rstrip('/') for u in urls]
        self.api_key = api_key if api_key is not None else os.environ.get('OPENAI_API_KEY')
        self.endpoint = endpoint
        self.extra_body = extra_body
        self.reproducible = bool(reproducible)
        self.concurrency = len(self.base_urls) if self.reproducible else concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.retry_deadline = None if retry_deadline is None else float(retry_deadline)
        self.logprobs = bool(logprobs)
        if tokenizer is not None:
            self.tokenizer = tokenizer
        self.requests = 0
        self.truncated = 0
        self._setup()

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        if self.reproducible:
            return ('fresh generation reproducible where the server computes a lone request the same way each time: '
                    'one request in flight per endpoint, no cached prefix reused (vLLM\'s cache_salt)')
        return ('answers reproducible from the generation cache only: a server batches concurrent requests and '
                'reuses cached prefixes, which changes rounding and so, at temperature > 0, some samples; '
                'reproducible=True (--reproducible) sends one request at a time per endpoint')

    def _setup(self) -> None:
        self._lock = threading.Lock()
        self._server_errors: List[str] = []
        self._in_flight = {u: 0 for u in self.base_urls}
        self._strikes = {u: 0 for u in self.base_urls}
        self._out_until = {u: 0.0 for u in self.base_urls}
        self._said_until = {u: 0.0 for u in self.base_urls}
        self._turn = itertools.count()
        self._open: Set[http.client.HTTPConnection] = set()
        self._headers = {'Content-Type': 'application/json'}
        if self.api_key:
            self._headers['Authorization'] = f'Bearer {self.api_key}'

    def _copied(self) -> None:
        self._setup()

    def __getstate__(self):
        state = dict(self.__dict__)
        for name in ('_lock', '_in_flight', '_strikes', '_out_until', '_said_until', '_turn', '_open', '_headers',
                     '_server_errors'):
            state.pop(name, None)
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._setup()

    @property
    def batch_size(self) -> int:
        """Prompts handed over per call by the generation cache: enough to keep every slot busy."""
        return 4 * self.concurrency

    def sampling_fields(self) -> Dict[str, object]:
        """The decoding fields every request carries (besides prompt, seed, stop and max_tokens)."""
        fields = sampling_fields(self.decoding)
        fields.update(self.extra_body)
        return fields

    def _nonstandard(self) -> List[str]:
        standard = {'temperature', 'top_p', 'max_tokens', 'stop', 'seed', 'n', 'model', 'prompt', 'messages'}
        return [f for f in self.sampling_fields() if f not in standard]

    def _body(self, prompt: str, seed: int, max_new_tokens: int, stop: Sequence[str]) -> Dict[str, object]:
        body = {'model': self.model_id, 'max_tokens': max_new_tokens, 'seed': int(seed), 'n': 1}
        body.update(self.sampling_fields())
        if stop:
            body['stop'] = list(stop)
        if self.logprobs:
            body['logprobs'] = True if self.endpoint == 'chat' else 1
        if self.reproducible:
            body['cache_salt'] = uuid.uuid4().hex
        if self.endpoint == 'chat':
            body['messages'] = [{'role': 'user', 'content': prompt}]
        else:
            body['prompt'] = prompt
        return body

    def _acquire(self, avoid: Optional[str]) -> str:
        with self._lock:
            turn = next(self._turn)
            n = len(self.base_urls)
            rotated = [self.base_urls[(turn + i) % n] for i in range(n)]
            now = time.monotonic()
            # Endpoints out of the pool are used only when every endpoint is.
            rotated = [u for u in rotated if self._out_until[u] <= now] or rotated
            choices = [u for u in rotated if u != avoid] or rotated
            url = min(choices, key=lambda u: self._in_flight[u])
            self._in_flight[url] += 1
            return url

    def _release(self, url: str, failure: Optional['_Retryable']) -> None:
        """Ends a request to ``url``. An endpoint of a pool that fails ``breaker_failures`` times in a
        row without answering (timeouts, refused connections) leaves the pool for ``breaker_cooldown``
        seconds; back, it leaves again at its next such failure, until it answers once."""
        with self._lock:
            self._in_flight[url] -= 1
            if failure is None or not failure.unanswered:
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

    def _exchange(self, url: str, payload: bytes, deadline: float):
        """Status, headers and body of one POST, all of it received before ``deadline`` (a watchdog
        shuts the socket at the deadline, so neither a hung nor a trickling server can hold it)."""
        parts = urllib.parse.urlsplit(url)
        kind = http.client.HTTPSConnection if parts.scheme == 'https' else http.client.HTTPConnection
        left = deadline - time.monotonic()
        if left <= 0:
            raise socket.timeout
        conn = kind(parts.hostname, parts.port, timeout=left)  # type: ignore[arg-type]  # a host: checked when made
        watchdog = threading.Timer(left, _cut, (conn,))
        watchdog.daemon = True
        with self._lock:
            self._open.add(conn)
        watchdog.start()
        try:
            conn.request('POST', parts.path, body=payload, headers=self._headers)
            response = conn.getresponse()
            return response.status, response.headers, response.read()
        finally:
            watchdog.cancel()
            with self._lock:
                self._open.discard(conn)
            conn.close()

    def _post(self, url: str, body: Dict[str, object], deadline: float, limit: str) -> Answer:
        """The answer of one request: its text, whether the server cut it at ``max_tokens``, and its
        log-probability when asked for and reported; ``limit`` names what sets ``deadline`` (for the
        error message)."""
        where = url + ('/chat/completions' if self.endpoint == 'chat' else '/completions')
        try:
            status, headers, data = self._exchange(where, json.dumps(body).encode(), deadline)
        except (OSError, http.client.HTTPException) as e:
            if time.monotonic() >= deadline - 0.01 or isinstance(e, socket.timeout):
                raise _Retryable(f'{where}: no complete answer within {limit}', how='timed out') from e
            raise _Retryable(f'{where}: {type(e).__name__}: {e}', how='could not be reached') from e
        reply = data.decode('utf-8', errors='replace')
        said = f'{where}: HTTP {status}: {_server_message(reply)}'
        if status >= 400:
            with self._lock:
                self._server_errors.append(said)
        if status in RETRY_STATUSES:
            raise _Retryable(said, status=status, retry_after=_retry_after(headers))
        if status >= 400 and any(words in reply.lower() for words in CONTEXT_EXCEEDED):
            prompt: str = (body['messages'][0]['content'] if self.endpoint == 'chat'  # type: ignore[index]
                           else body['prompt'])  # type: ignore[assignment]
            raise BackendError(f"{said}; the prompt of the query {query_of(prompt)} ({len(prompt)} characters) and "
                               f"max_tokens {body['max_tokens']} do not fit the server's context: ask for fewer new "
                               "tokens (--max-new-tokens), start the server with a longer context (vLLM's "
                               "--max-model-len, llama.cpp's --ctx-size), give shorter or fewer documents (-k), or "
                               "give the backend the model's tokenizer and the server's context length (tokenizer=, "
                               "max_input_length=) so that the Reader truncates the documents to fit", prompt=prompt)
        if status >= 400:
            sent = self._nonstandard()
            named = [f for f in sent if f in reply]
            hint = (f'; the server rejected {named}: set them to None (or drop them from extra_body) for this server'
                    if named else (f'; non-standard fields sent: {sent}' if sent else ''))
            if self.logprobs:
                hint += '; logprobs was asked for: a server that rejects it needs logprobs=False'
            raise BackendError(f'{said}{hint}')
        try:
            choices = json.loads(data)['choices']
            choice = choices[0]
            text = choice['message']['content'] if self.endpoint == 'chat' else choice['text']
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise BackendError(f'{where}: the response holds no answer text ({type(e).__name__}: '
                               f'{reply[:300]!r})') from None
        if len(choices) != body['n']:
            raise BackendError(f"{where}: the response holds {len(choices)} choices where {body['n']} was asked for "
                               f"(n: {body['n']}); nothing of it was stored")
        if not isinstance(text, str):
            raise BackendError(f'{where}: the answer text is {type(text).__name__}, not a string: {reply[:300]!r}')
        if not encodable(text):
            raise BackendError(f'{where}: the answer cannot be encoded as UTF-8 (a lone surrogate): {text[:100]!r}; '
                               'nothing of it was stored')
        values = _reported_logprobs(choice) if self.logprobs else None
        return Answer(text=text, truncated=choice.get('finish_reason') == 'length',
                      logprob=None if values is None else float(sum(values)),
                      tokens=None if values is None else len(values), token_logprobs=values)

    def _request(self, body: Dict[str, object], stop: Sequence[str], cancel: threading.Event) -> Answer:
        """One prompt's answer: retried up to ``max_retries`` times, within ``retry_deadline``."""
        start = time.monotonic()
        give_up = start + self.retry_deadline if self.retry_deadline is not None else float('inf')
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
        """Says on the console that ``url`` asked to wait ``delay`` seconds (``Retry-After``), once per
        wait: requests refused together wait together, and a wait that ends within a second of the
        last one said for the endpoint is not said again."""
        until = time.monotonic() + delay
        with self._lock:
            if until < self._said_until[url] + 1.0:
                return
            self._said_until[url] = until
        why = ' (rate limited)' if status == 429 else ''
        inform(f'{url}: HTTP {status}{why}; waiting {round(delay, 1):g} s as Retry-After asks')

    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1,
                 on_answers: Optional[Callable[[Dict[int, Answer]], None]] = None) -> List[Answer]:
        """Answers ``inps``, one seed each; ``on_answers`` (index -> answer) is given the answers as
        they arrive, in this thread (the generation cache stores each at once). On a failure,
        requests already sent finish and the error carries their answers (``completed``); on Ctrl-C,
        requests in flight are cut at once and the ``KeyboardInterrupt`` carries the answers
        completed (the generation cache stores them)."""
        backend, seeds = self._call(inps, seeds, return_logprobs, num_responses, max_new_tokens, stop_sequences)
        if backend is not self:  # settings given with the call: a copy with them answers
            return backend.generate(inps, seeds=seeds, on_answers=on_answers)
        max_new_tokens, stop = self.decoding.max_new_tokens, list(self.decoding.stop)
        bodies = [self._body(p, s, max_new_tokens, stop) for p, s in zip(inps, seeds)]
        with self._lock:
            self._server_errors.clear()
        jobs: queue.SimpleQueue[int] = queue.SimpleQueue()
        results: queue.Queue = queue.Queue()
        cancel = threading.Event()
        for i in range(len(bodies)):
            jobs.put(i)

        def work():
            # Daemon threads: a hung request can never hold the interpreter at exit.
            while not cancel.is_set():
                try:
                    i = jobs.get_nowait()
                except queue.Empty:
                    break
                try:
                    results.put((i, self._request(bodies[i], stop, cancel), None))
                except Exception as e:
                    results.put((i, None, e))
            results.put(None)

        workers = min(self.concurrency, max(1, len(bodies)))
        for n in range(workers):
            threading.Thread(target=work, daemon=True, name=f'{self!r} request {n}').start()
        answers: Dict[int, Answer] = {}
        failure = None
        try:
            while workers:
                try:
                    item = results.get(timeout=SIGNAL_POLL)
                except queue.Empty:
                    continue
                arrived: Dict[int, Answer] = {}
                while True:  # all that arrived together, handed on at once
                    if item is None:
                        workers -= 1
                    elif item[2] is None:
                        answers[item[0]] = arrived[item[0]] = item[1]
                    elif failure is None:
                        failure = item[2]
                        cancel.set()  # no new requests; those sent finish and their answers are kept
                    try:
                        item = results.get_nowait()
                    except queue.Empty:
                        break
                if arrived and on_answers is not None:
                    on_answers(arrived)
        except KeyboardInterrupt as interrupt:
            cancel.set()
            with self._lock:
                for conn in list(self._open):
                    _cut(conn)
            # Answers put in the queue but not yet taken from it were computed too: they are kept.
            while True:
                try:
                    item = results.get_nowait()
                except queue.Empty:
                    break
                if item is not None and item[2] is None:
                    answers[item[0]] = item[1]
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
        return [answers[i] for i in range(len(inps))]

    def _first_server_error(self, message: str) -> str:
        """The first error a server answered during the call, when the failure reported is another (a
        server that died after failing answers with refused connections), and how to avoid a failure
        this project recognises."""
        with self._lock:
            errors = list(self._server_errors)
        if not errors:
            return ''
        first = '' if errors[0] in message else f'; the first error a server gave: {errors[0]}'
        if any(VLLM_ENGINE_DEAD in e for e in errors):
            first += ('; the server\'s vLLM engine died. On vLLM\'s CPU build it dies at the first seeded request '
                      'whose prompt it prefills in chunks (every request here is seeded; its log says "CPU Generator '
                      'does not use offset"): start it with --no-enable-chunked-prefill --max-num-batched-tokens N '
                      '(N >= --max-model-len)')
        return first

    def __repr__(self):
        urls = self.base_urls[0] if len(self.base_urls) == 1 else f'{len(self.base_urls)} endpoints'
        return (f'OpenAICompatibleBackend({self.model_id!r}, {urls}, endpoint={self.endpoint!r}, '
                f'temperature={self.decoding.temperature}, top_k={self.decoding.top_k})')


def _cut(conn: http.client.HTTPConnection) -> None:
    """Shuts a connection's socket from another thread: a read blocked on it returns at once."""
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _reported_logprobs(choice: dict) -> Optional[Tuple[float, ...]]:
    """The chosen tokens' log-probabilities a response's choice reports, in either of the protocol's
    shapes (completions: ``logprobs.token_logprobs``; chat: ``logprobs.content[i].logprob``, which
    llama.cpp's server gives for completions too); ``None`` when it reports none, or not a number for
    every token."""
    try:
        reported = choice['logprobs']
        values = ([t['logprob'] for t in reported['content']] if 'content' in reported
                  else list(reported['token_logprobs']))
    except (KeyError, IndexError, TypeError):
        return None
    if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)
                             for v in values):
        return None
    return tuple(float(v) for v in values)


def _server_message(reply: str) -> str:
    """What a server said in an error response, on one line: the ``error.message`` (or ``error``,
    ``message``) of a JSON body as vLLM, llama.cpp's server and hosted APIs send it, else the body."""
    try:
        said = json.loads(reply)
        said = said.get('error', said) if isinstance(said, dict) else said
        said = said.get('message', said) if isinstance(said, dict) else said
    except ValueError:
        said = reply
    return ' '.join(str(said if isinstance(said, str) else reply).split())[:500]


def _retry_after(headers) -> float:
    """Seconds a ``Retry-After`` header asks to wait (seconds or an HTTP date); 0 without one."""
    value = (headers.get('Retry-After') or '').strip()
    if not value:
        return 0.0
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return 0.0
    return max(0.0, when.timestamp() - time.time())
