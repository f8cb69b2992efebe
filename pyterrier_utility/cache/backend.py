"""The generation cache as a backend wrapping another: every distinct (backend, settings, prompt, seed) is
generated once. It only looks up (:mod:`~pyterrier_utility.cache.keys` computes the keys,
:mod:`~pyterrier_utility.cache.store` holds the answers), hands what is missing to
:mod:`pyterrier_utility.generation`, which batches the prompts and checks answers, and stores what comes back.
"""
import copy
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from pyterrier_rag.backend import Backend

from .._files import stable_hash
from ..backends import Answer
from ..errors import SettingError
from ..generation import generate_batches
from ..protocols import DecodingBackend, deterministic
from .keys import answer_key, backend_key, settings_definition
from .store import AnswerStore


class GenerationCache(Backend):
    """Wraps a backend so that each distinct prompt and seed is generated once, optionally on disk.

    An answer's key hashes the settings it was generated with
    (:func:`~pyterrier_utility.cache.keys.settings_key`: for the backends of this package, the model,
    the whole :class:`~pyterrier_utility.settings.Decoding` the backend holds, and the engine fields),
    the prompt and the seed (dropped for greedy decoding, whose answers ignore it). Answers of a backend
    with other settings are therefore other entries: a second run with another ``max_new_tokens`` or
    ``stop`` generates afresh and leaves the first run's answers in place. As pyterrier-caching records
    its key definition, the file records how its keys are computed
    (:data:`~pyterrier_utility.cache.keys.KEY_DEFINITION`, checked when it is reopened) and the
    definition of every setting it holds (:meth:`settings`). With a ``path``, answers go to SQLite as
    each batch completes (each answer as it arrives, from a server:
    :func:`~pyterrier_utility.protocols.answers_each`), so a killed run loses at most the batch in
    flight (from a server, none of the answers that came back) and a re-run generates only what is
    missing. The file holds plain text.

    Only answers are stored (:mod:`~pyterrier_utility.generation` checks what the backend returns):
    a backend output that is not one string per prompt, an error marker, or text that cannot be
    encoded (a lone surrogate), raises
    :class:`~pyterrier_utility.errors.BackendError` and nothing of it is kept; when a backend fails
    part-way (a server going away, or Ctrl-C), the answers it completed before are stored first. A
    file that cannot be used (corrupt, read-only, another program's) raises
    :class:`~pyterrier_utility.errors.CacheError` naming it, and is never replaced.

    With each answer, in the same transaction, goes what the backend said about it (table
    ``answer_info``: ``logprob``, ``tokens``, ``truncated``, ``token_logprobs``; see
    :class:`~pyterrier_utility.backends.Answer`).
    A file written before that table existed gains it when opened, its answers kept and their info
    unknown (``None``); answers are never regenerated for it.

    Args:
        backend: the backend that generates on a cache miss.
        path: an SQLite file to persist answers across runs; ``None`` keeps them in memory.

    Example::

        with GenerationCache(pyterrier_utility.backends.gemma3_270m(), 'answers.sqlite') as backend:
            reader = pyterrier_utility.Reader(backend)
    """
    supports_seeds = True

    def __init__(self, backend: Backend, path: Optional[Union[str, Path]] = None):
        # The wrapped backend's limit; pyterrier-rag's default for an object without one.
        super().__init__(getattr(backend, 'model_id', repr(backend)),
                         **{name: getattr(backend, name) for name in ('max_new_tokens',) if hasattr(backend, name)})
        self.backend = backend
        #: The answers, shared with the copies :meth:`with_settings` makes.
        self.store = AnswerStore(path)

    @property
    def path(self) -> Optional[Path]:
        return self.store.path

    @property
    def generated(self) -> int:
        """How many answers were generated (not read) through this cache and its :meth:`with_settings` copies."""
        return self.store.generated

    def with_settings(self, **changes) -> 'GenerationCache':
        """The same cache (its file, answers and count shared) over ``backend.with_settings(**changes)``:
        answers with other decoding settings are other entries of it.

        Example::

            greedy = cache.with_settings(temperature=0)
        """
        if not isinstance(self.backend, DecodingBackend):
            raise SettingError(f'{self!r}: with_settings needs a backend holding a Decoding (the backends of this '
                               'package); pyterrier-rag\'s take max_new_tokens and stop_sequences per call')
        clone = copy.copy(self)  # the store shared
        clone.backend = self.backend.with_settings(**changes)
        clone.max_new_tokens = clone.backend.max_new_tokens
        return clone

    def close(self) -> None:
        """Closes the file (reopened when next needed)."""
        self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def deterministic(self) -> bool:
        return deterministic(self.backend)

    @property
    def generation_key(self):
        return backend_key(self.backend)

    def settings_id(self, max_new_tokens: Optional[int] = None, stop_sequences: Optional[Sequence[str]] = None) -> str:
        """The id of the settings a call generates with; their definition is recorded in the file."""
        definition = settings_definition(self.backend, max_new_tokens, stop_sequences)
        settings_id = stable_hash(definition)
        self.store.define(settings_id, definition)
        return settings_id

    def settings(self) -> List[dict]:
        """The definitions of the settings the cache holds answers for (or was asked with)."""
        return self.store.settings()

    def key(self, prompt: str, seed: int, max_new_tokens: Optional[int] = None,
            stop_sequences: Optional[Sequence[str]] = None) -> str:
        """An answer's key (:func:`~pyterrier_utility.cache.keys.answer_key`): the settings' id, the prompt
        and the seed (none for a deterministic backend)."""
        return answer_key(self.settings_id(max_new_tokens, stop_sequences), prompt,
                          None if self.deterministic else int(seed))

    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1) -> List[Answer]:
        if return_logprobs or num_responses != 1:
            raise ValueError('GenerationCache returns one answer per prompt (its Answer.logprob sums the '
                             'tokens\' log-probabilities where the backend gives them), not per-token logprobs')
        seeds = list(seeds) if seeds is not None else [0] * len(inps)
        if len(seeds) != len(inps):
            raise ValueError(f'GenerationCache: {len(seeds)} seeds for {len(inps)} prompts')
        return self._generate(inps, seeds, max_new_tokens, stop_sequences)

    def answer(self, prompts: Sequence[str], seeds: Sequence[int], *, max_new_tokens: Optional[int] = None,
               stop_sequences: Optional[Sequence[str]] = None, verbose: bool = False) -> List[List[Answer]]:
        """Each prompt's answers, one per seed, as :class:`~pyterrier_utility.backends.Answer` s (each
        text with its ``logprob``, ``tokens`` and ``truncated``, ``None`` where unknown): what is
        cached is read, the rest generated in the backend's batches (with a progress bar counting
        answers when ``verbose``). ``max_new_tokens`` and ``stop_sequences`` are for pyterrier-rag's
        backends, which take them with each call; a backend of this package answers by its decoding."""
        seeds = [int(s) for s in seeds]
        flat = self._generate([p for p in prompts for _ in seeds], seeds * len(prompts), max_new_tokens,
                              stop_sequences, verbose)
        return [flat[i * len(seeds):(i + 1) * len(seeds)] for i in range(len(prompts))]

    def _generate(self, inps: Sequence[str], seeds: Sequence[int], max_new_tokens, stop_sequences,
                  verbose: bool = False) -> List[Answer]:
        """The answer to each (prompt, seed): read where cached, else generated by
        :func:`~pyterrier_utility.generation.generate_batches` and stored as each batch completes."""
        settings_id = self.settings_id(max_new_tokens, stop_sequences)
        keyed = not self.deterministic
        keys = [answer_key(settings_id, p, int(s) if keyed else None) for p, s in zip(inps, seeds)]
        with self.store.lock:
            found = self.store.lookup(list(dict.fromkeys(keys)))
            todo: Dict[str, Dict[str, int]] = {}  # prompt -> key -> seed, for keys not found
            for k, p, s in zip(keys, inps, seeds):
                if k not in found:
                    todo.setdefault(p, {}).setdefault(k, s)
            if todo:
                found.update(generate_batches(self.backend, todo, max_new_tokens, stop_sequences, self._keep, verbose))
        return [found[k] for k in keys]

    def _keep(self, answers: Dict[str, Answer]) -> None:
        """Stores answers just generated."""
        self.store.put(answers)
        self.store.generated += len(answers)

    def __len__(self) -> int:
        return len(self.store)

    def __repr__(self):
        return f'GenerationCache({self.backend!r}, path={None if self.path is None else str(self.path)!r})'
