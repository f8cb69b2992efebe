"""A generation cache: every distinct (backend, settings, prompt, seed) is generated once."""
import sqlite3
import threading
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch
from pyterrier_rag.backend import Backend, BackendOutput

from ._util import stable_hash


def backend_key(backend: Backend) -> object:
    """What, besides prompt and seed, determines a backend's answers."""
    if hasattr(backend, 'generation_key'):
        return backend.generation_key
    # Not repr(): a default repr holds the object's address, which changes every run.
    return {'backend': type(backend).__qualname__, 'model': getattr(backend, 'model_id', None),
            'generation_args': getattr(backend, '_generation_args', None),
            'max_new_tokens': getattr(backend, 'max_new_tokens', None)}


def generate_seeded(backend: Backend, prompts: List[str], seeds: Sequence[int],
                    max_new_tokens: Optional[int], stop_sequences: Optional[List[str]]) -> List[str]:
    """Answers ``prompts`` with one seed each, whatever the backend.

    Backends with ``supports_seeds`` take the seeds directly. For others, torch's global generator
    is seeded once per group of prompts sharing a seed: reproducible for local backends, a best
    effort for remote ones.
    """
    if getattr(backend, 'supports_seeds', False):
        outs = backend.generate(prompts, seeds=list(seeds), max_new_tokens=max_new_tokens,
                                stop_sequences=stop_sequences)
        return [o.text for o in outs]
    from .backends import cut_at_stop
    answers = [None] * len(prompts)
    for seed in sorted(set(seeds)):
        idx = [i for i, s in enumerate(seeds) if s == seed]
        torch.manual_seed(seed)
        outs = backend.generate([prompts[i] for i in idx], max_new_tokens=max_new_tokens,
                                stop_sequences=stop_sequences)
        for i, out in zip(idx, outs):
            answers[i] = cut_at_stop(out.text or '', stop_sequences)
    return answers


class GenerationCache(Backend):
    """Wraps a backend so that each distinct prompt and seed is generated once, optionally on disk.

    Keys hash the wrapped backend's settings (:func:`backend_key`), ``max_new_tokens``, the stop
    sequences, the prompt and the seed (dropped for greedy backends, whose answers ignore it).
    With a ``path``, answers go to SQLite as each batch completes, so a killed run loses at most
    the batch in flight and a re-run generates only what is missing. The file holds plain text.

    Args:
        backend: the backend that generates on a cache miss.
        path: an SQLite file to persist answers across runs; ``None`` keeps them in memory.

    Example::

        backend = GenerationCache(pyterrier_utility.backends.gemma3_270m(), 'answers.sqlite')
        reader = pyterrier_utility.Reader(backend)
    """
    supports_seeds = True

    def __init__(self, backend: Backend, path: Optional[Union[str, Path]] = None):
        super().__init__(getattr(backend, 'model_id', repr(backend)),
                         max_new_tokens=getattr(backend, 'max_new_tokens', 32))
        self.backend = backend
        self.path = path
        self.generated = 0
        self._memory: Dict[str, str] = {}
        self._lock = threading.Lock()
        self._db = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(path), check_same_thread=False)
            self._db.execute('PRAGMA journal_mode=WAL')
            self._db.execute('CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)')
            self._db.commit()

    @property
    def deterministic(self) -> bool:
        return getattr(self.backend, 'deterministic', False)

    @property
    def generation_key(self):
        return backend_key(self.backend)

    def key(self, prompt: str, seed: int, max_new_tokens: Optional[int],
            stop_sequences: Optional[Sequence[str]]) -> str:
        return stable_hash(backend_key(self.backend), max_new_tokens, list(stop_sequences or []),
                           prompt, None if self.deterministic else int(seed))

    def _lookup(self, keys: List[str]) -> Dict[str, str]:
        found = {k: self._memory[k] for k in keys if k in self._memory}
        missing = [k for k in keys if k not in found]
        if self._db is not None and missing:
            for start in range(0, len(missing), 500):
                chunk = missing[start:start + 500]
                rows = self._db.execute(
                    f'SELECT key, answer FROM answers WHERE key IN ({",".join("?" * len(chunk))})', chunk)
                found.update(rows)
            self._memory.update(found)
        return found

    def _store(self, answers: Dict[str, str]) -> None:
        self._memory.update(answers)
        if self._db is not None:
            self._db.executemany('INSERT OR REPLACE INTO answers VALUES (?, ?)', answers.items())
            self._db.commit()

    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1) -> List[BackendOutput]:
        if return_logprobs or num_responses != 1:
            raise ValueError('GenerationCache returns one answer per prompt, without logprobs')
        seeds = list(seeds) if seeds is not None else [0] * len(inps)
        keys = [self.key(p, s, max_new_tokens, stop_sequences) for p, s in zip(inps, seeds)]
        with self._lock:
            found = self._lookup(list(dict.fromkeys(keys)))
            todo = {}
            for k, p, s in zip(keys, inps, seeds):
                if k not in found:
                    todo.setdefault(k, (p, s))
            batch_size = getattr(self.backend, 'batch_size', 8)
            todo_keys = sorted(todo, key=lambda k: len(todo[k][0]))  # similar lengths batch together
            for start in range(0, len(todo_keys), batch_size):
                chunk = todo_keys[start:start + batch_size]
                answers = generate_seeded(self.backend, [todo[k][0] for k in chunk],
                                          [todo[k][1] for k in chunk], max_new_tokens, stop_sequences)
                self.generated += len(chunk)
                new = dict(zip(chunk, answers))
                self._store(new)
                found.update(new)
        return [BackendOutput(text=found[k]) for k in keys]

    def __len__(self) -> int:
        if self._db is not None:
            return self._db.execute('SELECT COUNT(*) FROM answers').fetchone()[0]
        return len(self._memory)

    def __repr__(self):
        return f'GenerationCache({self.backend!r}, path={self.path!r})'
