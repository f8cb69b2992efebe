"""A reader backend for any server that speaks the OpenAI protocol, over a pool of endpoints.

vLLM (``vllm serve``), SGLang, TGI, llama.cpp's server, ``transformers serve`` and hosted APIs all
answer ``/v1/completions`` and ``/v1/chat/completions``. One request carries one prompt and one
seed, so sample ``j`` of a prompt is reproducible wherever the server honours ``seed``.
"""
import itertools
import os
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from typing import Dict, List, Optional, Sequence, Union

from pyterrier_rag.backend import Backend, BackendOutput

from .._util import check, check_int
from ..errors import BackendError
from ..settings import Decoding
from ._base import DecodingBackendBase, cut_at_stop, sampling_fields, split_decoding

#: HTTP statuses worth retrying: rate limits and server-side failures.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


class _Retryable(Exception):
    pass


class OpenAICompatibleBackend(DecodingBackendBase):
    """Answers prompts through OpenAI-compatible servers: up to ``concurrency`` requests in flight
    over a pool of endpoints, each request sent to the endpoint with the fewest in flight.

    Every setting is sent with every request, never dropped: ``temperature``, ``top_p``,
    ``max_tokens``, ``stop``, a per-request ``seed``, and the non-standard ``top_k`` and
    ``repetition_penalty`` (vLLM, SGLang, TGI and llama.cpp accept them; set them to ``None`` to leave
    them out for servers that do not, such as hosted APIs). A server that rejects a field answers
    the first request with a client error, and the run stops naming the endpoint, the status, the
    server's message and the non-standard fields sent. Connection errors, timeouts, 408, 429 and 5xx
    are retried with exponential backoff, on another endpoint where there is one; after
    ``max_retries`` the call raises :class:`~pyterrier_utility.errors.BackendError` naming the
    endpoint and the status, carrying the answers completed before it (the generation cache keeps
    them). An error is never returned as an answer.

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
            sent; ``top_p`` and ``repetition_penalty`` are sent when given.
        extra_body: further fields sent with every request (e.g. ``{'min_p': 0.05}``, or llama.cpp's
            ``{'repeat_penalty': 1.1}``); part of the cache key.
        concurrency: requests in flight at once, over all endpoints.
        timeout: seconds one request may take.
        max_retries: retries of a failed request before the call fails.
        backoff: the first retry's delay in seconds, doubled at each further retry (at most 60 s).
        tokenizer: the model's Hugging Face tokenizer (or its name or path), so the Reader can fit
            prompts into ``max_input_length`` by truncating documents evenly; optional.
        max_input_length: the most prompt tokens (with a tokenizer).

    Example::

        backend = OpenAICompatibleBackend('meta-llama/Meta-Llama-3-8B-Instruct',
                                          ['http://gpu1:8000/v1', 'http://gpu2:8000/v1'], concurrency=64)
        reader = pyterrier_utility.Reader(backend, n_samples=5)
    """
    # The URLs are not here: every endpoint of a pool serves the same model with the same weights.
    ENGINE_FIELDS = ('endpoint', 'extra_body')

    def __init__(self, model: str, base_urls: Union[str, Sequence[str]] = ('http://127.0.0.1:8000/v1',), *,
                 api_key: Optional[str] = None, endpoint: str = 'completions', decoding: Optional[Decoding] = None,
                 extra_body: Optional[Dict[str, object]] = None, concurrency: int = 8, timeout: float = 600.0,
                 max_retries: int = 5, backoff: float = 1.0, tokenizer=None, max_input_length: Optional[int] = None,
                 verbose: bool = False, **decoding_fields):
        owner = f'OpenAICompatibleBackend({model!r})'
        decoding = split_decoding(owner, decoding, Decoding(), decoding_fields)
        check(not decoding_fields, owner, f'unknown arguments {sorted(decoding_fields)}')
        check(isinstance(model, str) and bool(model), owner, f'model must be a non-empty string, got {model!r}')
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls or [])
        check(bool(urls) and all(isinstance(u, str) and u.startswith(('http://', 'https://')) for u in urls),
              owner, f'base_urls must be one or more http(s) URLs, got {base_urls!r}')
        check(endpoint in ('completions', 'chat'), owner, f"endpoint must be 'completions' or 'chat', got {endpoint!r}")
        check_int(owner, 'concurrency', concurrency, 1)
        check_int(owner, 'max_retries', max_retries, 0)
        check(timeout > 0 and backoff >= 0, owner, f'timeout must be > 0 and backoff >= 0, got {timeout}, {backoff}')
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
        self.concurrency = concurrency
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        if tokenizer is not None:
            self.tokenizer = tokenizer
        self.requests = 0
        self._setup()

    def _setup(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = {u: 0 for u in self.base_urls}
        self._turn = itertools.count()
        self._client = None

    def _copied(self) -> None:
        self._setup()

    def __getstate__(self):
        state = dict(self.__dict__)
        for name in ('_lock', '_in_flight', '_turn', '_client'):
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
        if self.endpoint == 'chat':
            body['messages'] = [{'role': 'user', 'content': prompt}]
        else:
            body['prompt'] = prompt
        return body

    def _http(self):
        if self._client is None:
            import httpx
            headers = {'Authorization': f'Bearer {self.api_key}'} if self.api_key else {}
            self._client = httpx.Client(timeout=self.timeout, headers=headers,
                                        limits=httpx.Limits(max_connections=self.concurrency + len(self.base_urls),
                                                            max_keepalive_connections=self.concurrency))
        return self._client

    def _acquire(self, avoid: Optional[str]) -> str:
        with self._lock:
            turn = next(self._turn)
            n = len(self.base_urls)
            rotated = [self.base_urls[(turn + i) % n] for i in range(n)]
            choices = [u for u in rotated if u != avoid] or rotated
            url = min(choices, key=lambda u: self._in_flight[u])
            self._in_flight[url] += 1
            return url

    def _release(self, url: str) -> None:
        with self._lock:
            self._in_flight[url] -= 1

    def _post(self, url: str, body: Dict[str, object]) -> str:
        import httpx
        path = '/chat/completions' if self.endpoint == 'chat' else '/completions'
        try:
            response = self._http().post(url + path, json=body)
        except (httpx.TransportError, httpx.TimeoutException) as e:
            raise _Retryable(f'{url}{path}: {type(e).__name__}: {e}') from e
        if response.status_code in RETRY_STATUSES:
            raise _Retryable(f'{url}{path}: HTTP {response.status_code}: {response.text[:300]}')
        if response.status_code >= 400:
            sent = self._nonstandard()
            named = [f for f in sent if f in response.text]
            hint = (f'; the server rejected {named}: set them to None (or drop them from extra_body) for this server'
                    if named else (f'; non-standard fields sent: {sent}' if sent else ''))
            raise BackendError(f'{url}{path}: HTTP {response.status_code}: {response.text[:500]}{hint}')
        try:
            choice = response.json()['choices'][0]
            text = choice['message']['content'] if self.endpoint == 'chat' else choice['text']
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise BackendError(f'{url}{path}: the response holds no answer text ({type(e).__name__}: '
                               f'{response.text[:300]!r})') from None
        if not isinstance(text, str):
            raise BackendError(f'{url}{path}: the answer text is {type(text).__name__}, not a string: '
                               f'{response.text[:300]!r}')
        return text

    def _request(self, body: Dict[str, object], stop: Sequence[str]) -> str:
        failed = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(min(60.0, self.backoff * 2 ** (attempt - 1)))
            url = self._acquire(avoid=failed)
            try:
                text = self._post(url, body)
            except _Retryable as e:
                failed, last = url, str(e)
                continue
            finally:
                self._release(url)
            with self._lock:
                self.requests += 1
            return cut_at_stop(text, stop)
        raise BackendError(f'{last} (after {self.max_retries} retries)')

    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1) -> List[BackendOutput]:
        seeds, max_new_tokens, stop = self._call(inps, seeds, return_logprobs, num_responses, max_new_tokens,
                                                 stop_sequences)
        bodies = [self._body(p, s, max_new_tokens, stop) for p, s in zip(inps, seeds)]
        texts: Dict[int, str] = {}
        pool = ThreadPoolExecutor(max_workers=min(self.concurrency, max(1, len(bodies))))
        try:
            futures = {pool.submit(self._request, body, stop): i for i, body in enumerate(bodies)}
            done, pending = wait(futures, return_when=FIRST_EXCEPTION)
            failure = next((f.exception() for f in done if f.exception() is not None), None)
            if failure is not None:
                for f in pending:
                    f.cancel()
                done, _ = wait(futures)  # requests already sent finish; their answers are kept
            for f in done:
                if not f.cancelled() and f.exception() is None:
                    texts[futures[f]] = f.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        if failure is not None:
            if isinstance(failure, BackendError):
                raise BackendError(str(failure), completed=texts) from failure
            raise BackendError(f'{self!r}: {type(failure).__name__}: {failure}', completed=texts) from failure
        return [BackendOutput(text=texts[i]) for i in range(len(inps))]

    def __repr__(self):
        urls = self.base_urls[0] if len(self.base_urls) == 1 else f'{len(self.base_urls)} endpoints'
        return (f'OpenAICompatibleBackend({self.model_id!r}, {urls}, endpoint={self.endpoint!r}, '
                f'temperature={self.decoding.temperature}, top_k={self.decoding.top_k})')
