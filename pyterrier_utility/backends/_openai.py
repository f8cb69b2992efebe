"""A reader backend for any server that speaks the OpenAI protocol, over a pool of endpoints.

vLLM (``vllm serve``), SGLang, TGI, llama.cpp's server, ``transformers serve`` and hosted APIs all
answer ``/v1/completions`` and ``/v1/chat/completions``. One request carries one prompt and one
seed, so sample ``j`` of a prompt is reproducible wherever the server honours ``seed``.
"""
import json
import math
import os
import uuid
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

from .._checks import check, check_int, check_number
from .._text import encodable
from ..engines import OPENAI, check_engine_options
from ..errors import BackendError
from ..settings import Decoding
from ._base import Answer, query_of, sampling_fields, split_decoding
from ._pool import ServerPoolBackend, server_said

#: What vLLM's server answers (HTTP 500) when its engine has died; on vLLM's CPU build the known cause
#: is a seeded request whose prompt is prefilled in chunks (its log: "CPU Generator does not use offset").
VLLM_ENGINE_DEAD = 'EngineCore encountered an issue'
#: Words of a client error (HTTP 400) that refuses a prompt longer than the server's context, as vLLM ("This model's
#: maximum context length is ...", "... longer than the maximum model length"), SGLang, llama.cpp's server ("the
#: request exceeds the available context size") and hosted APIs ("context_length_exceeded") word it.
CONTEXT_EXCEEDED = ('context length', 'context size', 'context_length_exceeded', 'maximum model length')


@OPENAI.register
class OpenAICompatibleBackend(ServerPoolBackend):
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
    in a row leaves the pool for ``breaker_cooldown`` seconds (a warning on the logger of
    ``backends._pool`` says so); its share goes to the others. Ctrl-C stops a call at once, cutting
    the requests in flight. Each answer is handed to the generation cache as it arrives
    (``on_answers``), so a process killed mid-call keeps every answer that came back.

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
    DECODING_FIELDS = OPENAI.honours
    DECODING_OWN_WAY = dict(OPENAI.own_way)
    answers_each = True
    # The URLs are not here: every endpoint of a pool serves the same model with the same weights.
    ENGINE_FIELDS: Tuple[str, ...] = ('endpoint', 'extra_body')

    def __init__(self, model: str, base_urls: Union[str, Sequence[str]] = ('http://127.0.0.1:8000/v1',), *,
                 api_key: Optional[str] = None, endpoint: str = 'completions', decoding: Optional[Decoding] = None,
                 extra_body: Optional[Dict[str, object]] = None, concurrency: int = 8, timeout: float = 600.0,
                 max_retries: int = 5, backoff: float = 1.0, retry_deadline: Optional[float] = None, tokenizer=None,
                 max_input_length: Optional[int] = None, logprobs: bool = False, reproducible: bool = False,
                 verbose: bool = False, **decoding_fields):
        owner = f'OpenAICompatibleBackend({model!r})'
        decoding = split_decoding(owner, decoding, OPENAI.decoding, decoding_fields)
        check(not decoding_fields, owner, f'unknown arguments {sorted(decoding_fields)}')
        check(isinstance(model, str) and bool(model), owner, f'model must be a non-empty string, got {model!r}')
        urls = [base_urls] if isinstance(base_urls, str) else list(base_urls or [])
        check(bool(urls), owner, f'base_urls must be one or more http(s) URLs, got {base_urls!r}')
        check_engine_options(owner, base_urls=urls, endpoint=endpoint, concurrency=concurrency,
                             max_retries=max_retries, timeout=timeout, retry_deadline=retry_deadline)
        check_number(owner, 'backoff', backoff, 0)
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
        super().__init__(model, max_input_length=max_input_length or 10 ** 9, verbose=verbose)
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
        self._copied()

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        if self.reproducible:
            return ('fresh generation reproducible where the server computes a lone request the same way each time: '
                    'one request in flight per endpoint, no cached prefix reused (vLLM\'s cache_salt)')
        return ('answers reproducible from the generation cache only: a server batches concurrent requests and '
                'reuses cached prefixes, which changes rounding and so, at temperature > 0, some samples; '
                'reproducible=True (--reproducible) sends one request at a time per endpoint')

    @property
    def request_path(self) -> str:
        return '/chat/completions' if self.endpoint == 'chat' else '/completions'

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

    def _answer(self, where: str, status: int, reply: str, body: Dict[str, object]) -> Answer:
        """The answer in a response: its text, whether the server cut it at ``max_tokens``, and its
        log-probability when asked for and reported; a refusal or a malformed response is an error."""
        if status >= 400 and any(words in reply.lower() for words in CONTEXT_EXCEEDED):
            prompt: str = (body['messages'][0]['content'] if self.endpoint == 'chat'  # type: ignore[index]
                           else body['prompt'])  # type: ignore[assignment]
            raise BackendError(f"{server_said(where, status, reply)}; the prompt of the query {query_of(prompt)} "
                               f"({len(prompt)} characters) and max_tokens {body['max_tokens']} do not fit the "
                               "server's context: ask for fewer new tokens (--max-new-tokens), start the server with "
                               "a longer context (vLLM's --max-model-len, llama.cpp's --ctx-size), give shorter or "
                               "fewer documents (-k), or give the backend the model's tokenizer and the server's "
                               "context length (tokenizer=, max_input_length=) so that the Reader truncates the "
                               "documents to fit", prompt=prompt)
        if status >= 400:
            sent = self._nonstandard()
            named = [f for f in sent if f in reply]
            hint = (f'; the server rejected {named}: set them to None (or drop them from extra_body) for this server'
                    if named else (f'; non-standard fields sent: {sent}' if sent else ''))
            if self.logprobs:
                hint += '; logprobs was asked for: a server that rejects it needs logprobs=False'
            raise BackendError(server_said(where, status, reply) + hint)
        try:
            choices = json.loads(reply)['choices']
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

    def _generate(self, inps: List[str], seeds: List[int],
                  on_answers: Optional[Callable[[Dict[int, Answer]], None]] = None, **options) -> List[Answer]:
        """Answers ``inps``, one seed each; ``on_answers`` (index -> answer) is given the answers as
        they arrive, in this thread (the generation cache stores each at once). On a failure,
        requests already sent finish and the error carries their answers (``completed``); on Ctrl-C,
        requests in flight are cut at once and the ``KeyboardInterrupt`` carries the answers
        completed (the generation cache stores them)."""
        stop = list(self.decoding.stop)
        bodies = [self._body(p, s, self.decoding.max_new_tokens, stop) for p, s in zip(inps, seeds)]
        return self._answer_all(bodies, stop, on_answers)

    def _first_server_error(self, message: str) -> str:
        """The first error a server answered during the call, when the failure reported is another, and
        how to avoid a failure this project recognises."""
        with self._lock:
            dead = any(VLLM_ENGINE_DEAD in e for e in self._server_errors)
        return super()._first_server_error(message) + (
            '; the server\'s vLLM engine died. On vLLM\'s CPU build it dies at the first seeded request whose prompt '
            'it prefills in chunks (every request here is seeded; its log says "CPU Generator does not use offset"): '
            'start it with --no-enable-chunked-prefill --max-num-batched-tokens N (N >= --max-model-len)'
            if dead else '')

    def __repr__(self):
        urls = self.base_urls[0] if len(self.base_urls) == 1 else f'{len(self.base_urls)} endpoints'
        return (f'OpenAICompatibleBackend({self.model_id!r}, {urls}, endpoint={self.endpoint!r}, '
                f'temperature={self.decoding.temperature}, top_k={self.decoding.top_k})')


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
