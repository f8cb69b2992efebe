"""llama.cpp's own server (``llama-server``) as a reader engine: the study's decoding under the
server's field names, and every answer computed from its whole prompt."""
import json
import urllib.request
from typing import Dict, Optional, Sequence, Union

from .._checks import check
from ..engines import LLAMACPP
from ..settings import Decoding
from ._openai import OpenAICompatibleBackend

#: The decoding fields llama.cpp's server takes, by our name: its request field and the sampler of its
#: chain that reads it. A field :class:`~pyterrier_utility.settings.Decoding` does not have, or leaves
#: unset, is sent neither as a value nor as a sampler, so none of the server's own defaults (top-k 40,
#: top-p 0.95, min-p 0.05, ...) applies.
FIELD_MAP = {
    'temperature': ('temperature', 'temperature'),
    'top_k': ('top_k', 'top_k'),
    'top_p': ('top_p', 'top_p'),
    'min_p': ('min_p', 'min_p'),
    'repetition_penalty': ('repeat_penalty', 'penalties'),
    'repeat_last_n': ('repeat_last_n', 'penalties'),
}
#: The default order of the sampler chain: Hugging Face's (penalty, temperature, then the truncations
#: on the tempered distribution), as ``huggingface:`` and the offline readers sample.
SAMPLER_ORDER = ('penalties', 'temperature', 'top_k', 'top_p', 'min_p')
#: llama.cpp's own order, temperature last (top-p and min-p act at temperature 1): the authors' engine's.
LLAMACPP_ORDER = ('penalties', 'top_k', 'top_p', 'min_p', 'temperature')
#: The penalty window sent for "every token of prompt and answer" (our penalty's meaning when no
#: ``repeat_last_n`` is set): more tokens than the contexts of the models run here (Gemma 3: 32k).
#: The server refuses -1 in a request and allocates the window, so it is not ``2**31``.
EVERY_TOKEN = 2 ** 18
#: Fields the backend sets on every request, which ``extra_body`` may not change.
OWN_FIELDS = ('cache_prompt', 'samplers', 'n_probs')


def llamacpp_fields(decoding: Decoding, order: Sequence[str] = SAMPLER_ORDER) -> Dict[str, object]:
    """The sampling fields of a request to llama.cpp's server for ``decoding``: each set field under
    the server's name (:data:`FIELD_MAP`) and ``samplers``, the chain of exactly those samplers in
    ``order``; the length and stop sequences are sent on their own.

    Example::

        llamacpp_fields(Decoding(temperature=0.3, top_k=50, repetition_penalty=1.1))
        # {'temperature': 0.3, 'top_k': 50, 'repeat_penalty': 1.1, 'repeat_last_n': 262144,
        #  'samplers': ['penalties', 'temperature', 'top_k']}
    """
    fields, samplers = {}, {'temperature'}
    for name, (field, sampler) in FIELD_MAP.items():
        value = getattr(decoding, name, None)
        if value is not None:
            fields[field] = value
            samplers.add(sampler)
    if fields.get('repeat_penalty', 1.0) == 1.0:
        samplers.discard('penalties')
        fields.pop('repeat_penalty', None)
        fields.pop('repeat_last_n', None)
    elif 'repeat_last_n' not in fields:
        fields['repeat_last_n'] = EVERY_TOKEN
    fields['samplers'] = [s for s in order if s in samplers]
    return fields


@LLAMACPP.register
class LlamaCppServerBackend(OpenAICompatibleBackend):
    """Answers prompts through llama.cpp's server (``llama-server``; ``make llamacpp`` builds it as
    ``llama-cpp-server``), one request per prompt and seed, over one server or a pool.

    The decoding is sent under the server's names (``repetition_penalty`` as ``repeat_penalty``, a
    penalty window as ``repeat_last_n``: see :func:`llamacpp_fields`) with ``samplers`` naming the
    chain, so the server applies exactly the decoding's samplers, in Hugging Face's order, and none
    of its own defaults. Log-probabilities are asked for as the protocol says (``logprobs: 1``, the
    server's ``n_probs``): its probability of each chosen token before any sampler.

    Every request carries ``cache_prompt: false``: the server computes each prompt whole instead of
    reusing the prefix a slot computed for an earlier request, which prefills the rest in other
    pieces and so rounds differently (the server's documentation warns of it). A server computing one
    request at a time then gives the same answers to the same seeds whatever it served before. It
    does not when it computes several requests together (``--parallel`` slots filled by concurrent
    requests): batched together they round differently again, and at a temperature above 0 that
    changes some samples. So fresh answers are reproducible when each server computes one request at
    a time: with ``reproducible=True`` (one request in flight per endpoint), a ``concurrency`` of at
    most one request per endpoint, or servers started with ``--parallel 1``; ``reproducibility``
    says which holds (it asks each server for its slots).

    Args:
        model: the name the answers are cached under (the server serves the one model it was
            started with, whatever a request's ``model`` says).
        base_urls: one URL or several, each ending in ``/v1`` (default: llama.cpp's port, 8080).
        cache_prompt: let the server reuse a slot's cached prefix: a faster prefill for prompts
            sharing a prefix, and fresh answers that depend on what the server served before.
        sampler_order: the order of the samplers, all five names: :data:`SAMPLER_ORDER` (Hugging
            Face's, the default) or :data:`LLAMACPP_ORDER` (llama.cpp's own, the authors' engine's);
            part of the cache key.
        **kwargs: every other keyword (``concurrency``, ``reproducible``, ``decoding`` or single
            decoding fields, ``logprobs``, retries, ...), as :class:`OpenAICompatibleBackend` takes it.

    Example::

        # llama-cpp-server -m gemma-3-270m-q4_k_m.gguf --port 8080 -- --parallel 1
        backend = LlamaCppServerBackend('gemma-3-270m', 'http://127.0.0.1:8080/v1', concurrency=2,
                                        temperature=0.3, top_k=50, repetition_penalty=1.1)
        reader = pyterrier_utility.Reader(backend, n_samples=5)
    """

    # llama.cpp has a sampler for every decoding setting, penalty window included: none applied its own way.
    DECODING_FIELDS = LLAMACPP.honours
    DECODING_OWN_WAY: Dict[str, str] = {}
    ENGINE_FIELDS = OpenAICompatibleBackend.ENGINE_FIELDS + ('sampler_order',)

    def __init__(self, model: str, base_urls: Union[str, Sequence[str]] = ('http://127.0.0.1:8080/v1',), *,
                 cache_prompt: bool = False, sampler_order: Sequence[str] = SAMPLER_ORDER,
                 extra_body: Optional[Dict[str, object]] = None, **kwargs):
        owner = f'LlamaCppServerBackend({model!r})'
        owned = sorted(set(extra_body or {}) & set(OWN_FIELDS))
        check(not owned, owner, f'extra_body may not set {owned}: the backend sets them (cache_prompt and '
                                'sampler_order are arguments)')
        check(sorted(sampler_order) == sorted(SAMPLER_ORDER), owner,
              f'sampler_order must order all of {list(SAMPLER_ORDER)}, got {sampler_order!r}')
        self.cache_prompt = bool(cache_prompt)
        self.sampler_order = list(sampler_order)
        super().__init__(model, base_urls, extra_body=extra_body, **kwargs)

    @property
    def engine_settings(self) -> Dict[str, object]:
        """What every request sets besides the decoding (in a study's ``settings.json``)."""
        return {'cache_prompt': self.cache_prompt, 'samplers': self.sampling_fields()['samplers']}

    def slots(self) -> Dict[str, Optional[int]]:
        """The slots each server has (``total_slots`` of its ``/props``; ``None`` where it does not
        answer within 10 s)."""
        found = {}
        for url in self.base_urls:
            props = url[:-len('/v1')] + '/props' if url.endswith('/v1') else url + '/props'
            try:
                with urllib.request.urlopen(props, timeout=10) as response:
                    found[url] = json.loads(response.read()).get('total_slots')
            except (OSError, ValueError):
                found[url] = None
        return found

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        if self.cache_prompt:
            return ('answers reproducible from the generation cache only: cache_prompt=True lets a server reuse the '
                    'prefix a slot computed for an earlier request, which changes rounding and so, at '
                    'temperature > 0, some samples')
        whole = 'every prompt computed whole (cache_prompt false) and alone'
        if self.reproducible or self.concurrency <= len(self.base_urls):
            return (f'fresh generation reproducible: one request in flight per endpoint, {whole}; the same seeds '
                    'give the same answers whatever the server served before, on the same machine and llama.cpp '
                    'build')
        slots = self.slots()
        if all(n == 1 for n in slots.values()):
            return (f'fresh generation reproducible: every server has one slot, {whole}; the same seeds give the '
                    'same answers whatever the server served before, on the same machine and llama.cpp build')
        return (f'answers reproducible from the generation cache only: up to {self.concurrency} requests in flight '
                f'to servers with {sorted(set(slots.values()), key=str)} slots, which compute concurrent requests '
                'together and round them differently; reproducible=True (--reproducible), or servers started with '
                '--parallel 1, compute every answer alone')

    def sampling_fields(self) -> Dict[str, object]:
        """The fields every request carries besides prompt, seed, stop and ``max_tokens``."""
        fields = llamacpp_fields(self.decoding, self.sampler_order)
        fields.update(self.extra_body)
        fields['cache_prompt'] = self.cache_prompt
        return fields

    def _body(self, prompt: str, seed: int, max_new_tokens: int, stop: Sequence[str]) -> Dict[str, object]:
        body = super()._body(prompt, seed, max_new_tokens, stop)
        body.pop('cache_salt', None)  # vLLM's field; cache_prompt is llama.cpp's
        return body

    def __repr__(self):
        urls = self.base_urls[0] if len(self.base_urls) == 1 else f'{len(self.base_urls)} endpoints'
        return (f'LlamaCppServerBackend({self.model_id!r}, {urls}, temperature={self.decoding.temperature}, '
                f'top_k={self.decoding.top_k})')
