"""How the generation cache keys an answer: the settings it was generated with (:func:`settings_key`, whose
JSON text's hash is the settings id), the prompt and the seed. :data:`KEY_DEFINITION` describes it; a
cache file records it and is checked against it when reopened."""
import json
from typing import Optional, Sequence

from pyterrier_rag.backend import Backend

from .._files import stable_hash
from ..backends import check_call_settings
from ..protocols import DecodingBackend, KeyedBackend

#: How an answer's key is computed (:func:`answer_key`), recorded in a file's ``meta`` table (``key``)
#: and checked when the file is reopened: a file keyed otherwise is refused, since none of its answers
#: would be found. ``sha256`` is of the JSON list of the parts (keys sorted, as
#: :func:`~pyterrier_utility._files.stable_hash`); ``settings`` is the JSON text (keys sorted) of
#: :func:`settings_key`, which the file's ``settings`` table holds under its id.
KEY_DEFINITION = json.dumps({'answer': 'sha256([settings id, prompt, seed or null for a deterministic backend])',
                             'settings id': 'sha256([settings])',
                             'settings': 'settings_key(backend, max_new_tokens, stop_sequences)'}, sort_keys=True)


def backend_key(backend: Backend) -> object:
    """What, besides prompt and seed, determines a backend's answers: a
    :class:`~pyterrier_utility.protocols.KeyedBackend`'s ``generation_key`` (every backend of this package);
    for pyterrier-rag's, their generation arguments (``generation_args`` or ``_generation_args``), model
    and limits."""
    if isinstance(backend, KeyedBackend):
        return backend.generation_key
    args = getattr(backend, 'generation_args', None)
    if args is None:
        args = getattr(backend, '_generation_args', None)
    # Not repr(): a default repr holds the object's address, which changes every run.
    return {'backend': type(backend).__qualname__, 'model': getattr(backend, 'model_id', None),
            'generation_args': args, 'max_new_tokens': getattr(backend, 'max_new_tokens', None),
            'max_input_length': getattr(backend, 'max_input_length', None)}


def settings_key(backend: Backend, max_new_tokens: Optional[int], stop_sequences: Optional[Sequence[str]]) -> dict:
    """Everything but prompt and seed that determines the answers of ``backend.generate(...,
    max_new_tokens, stop_sequences)``: for a backend holding a :class:`~pyterrier_utility.settings.Decoding`,
    its key, which holds the decoding (a call may not give it another length or stops:
    :func:`~pyterrier_utility.backends.check_call_settings`); for pyterrier-rag's, which take them
    with each call, their key and the call's."""
    if isinstance(backend, DecodingBackend):
        check_call_settings(backend, max_new_tokens, stop_sequences)
        return backend.generation_key
    return {'backend': backend_key(backend), 'max_new_tokens': max_new_tokens, 'stop': list(stop_sequences or [])}


def settings_definition(backend: Backend, max_new_tokens: Optional[int],
                        stop_sequences: Optional[Sequence[str]]) -> str:
    """:func:`settings_key` as the JSON text a cache file records, keys sorted; its hash is the settings id."""
    return json.dumps(settings_key(backend, max_new_tokens, stop_sequences), sort_keys=True, default=str)


def answer_key(settings_id: str, prompt: str, seed: Optional[int]) -> str:
    """An answer's key: the settings' id, the prompt and the seed (``None`` for a deterministic backend)."""
    return stable_hash(settings_id, prompt, seed)
