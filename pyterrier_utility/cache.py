"""A generation cache: every distinct (backend, settings, prompt, seed) is generated once.

It is also the one place where answers enter the project: what a backend returns is checked here
(one text per prompt, a string, not an error marker) before anything is stored or returned.
"""
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch
from pyterrier_rag.backend import Backend, BackendOutput

from ._util import stable_hash
from .errors import BackendError, CacheError

#: Texts that third-party backends return in place of an answer when a request failed
#: (pyterrier-rag's OpenAI backend: ``ERROR::other``, ``ERROR::reduce_length``, ...).
ERROR_MARKERS = ('ERROR::',)
#: The format a cache file declares in its ``meta`` table.
CACHE_FORMAT = 'pyterrier_utility.generations/1'


def backend_key(backend: Backend) -> object:
    """What, besides prompt and seed, determines a backend's answers.

    A backend's own ``generation_key`` when it has one (every backend of this package); for
    pyterrier-rag's backends, their generation arguments (``generation_args`` or
    ``_generation_args``), model and limits.
    """
    if hasattr(backend, 'generation_key'):
        return backend.generation_key
    args = getattr(backend, 'generation_args', None)
    if args is None:
        args = getattr(backend, '_generation_args', None)
    # Not repr(): a default repr holds the object's address, which changes every run.
    return {'backend': type(backend).__qualname__, 'model': getattr(backend, 'model_id', None),
            'generation_args': args, 'max_new_tokens': getattr(backend, 'max_new_tokens', None),
            'max_input_length': getattr(backend, 'max_input_length', None)}


def checked_texts(backend: Backend, outputs, count: int) -> List[str]:
    """The answer texts of a backend's outputs for ``count`` prompts, or a :class:`BackendError`
    when they are not one string per prompt, or a text is an error marker."""
    try:
        outputs = list(outputs)
    except TypeError:
        raise BackendError(f'{backend!r} returned {type(outputs).__name__} for {count} prompts, '
                           'not a list of outputs; nothing was stored') from None
    if len(outputs) != count:
        raise BackendError(f'{backend!r} returned {len(outputs)} outputs for {count} prompts; '
                           'answers cannot be matched to prompts, nothing was stored')
    texts = []
    for i, out in enumerate(outputs):
        text = getattr(out, 'text', out)
        if not isinstance(text, str):
            raise BackendError(f'{backend!r} returned {type(text).__name__} as the answer to prompt {i} of '
                               f'{count}, not a string; nothing was stored')
        if text.startswith(ERROR_MARKERS):
            raise BackendError(f'{backend!r} returned the error marker {text!r} for prompt {i} of {count} '
                               '(its request failed); nothing was stored')
        texts.append(text)
    return texts


def work_batches(backend: Backend, prompts: Sequence[str], answers: Sequence[int]) -> List[List[int]]:
    """The indices of ``prompts`` in the order and groups a backend answers them best: ordered by its
    ``prompt_order`` (:class:`~pyterrier_utility.backends.CausalLMBackend`: prompts sharing a prefix
    together), else by length (batches of similar lengths pad little); each group holds about the
    backend's ``batch_size`` answers (``answers[i]`` for prompt ``i``), never splitting a prompt's."""
    size = max(1, int(getattr(backend, 'batch_size', 8) or 8))
    order_key = getattr(backend, 'prompt_order', len)
    order = sorted(range(len(prompts)), key=lambda i: order_key(prompts[i]))
    groups, rows = [], 0
    for i in order:
        if not groups or rows + answers[i] > size:
            groups.append([])
            rows = 0
        groups[-1].append(i)
        rows += answers[i]
    return groups


def generate_seeded(backend: Backend, prompts: List[str], seeds: Sequence[int],
                    max_new_tokens: Optional[int], stop_sequences: Optional[List[str]]) -> List[str]:
    """Answers ``prompts`` with one seed each, whatever the backend; the texts are checked.

    Backends with ``supports_seeds`` take the seeds directly. For others, torch's generator is
    seeded once per group of prompts sharing a seed, inside a forked random state (the caller's is
    left as it was): reproducible for local backends, a best effort for remote ones.
    """
    if getattr(backend, 'supports_seeds', False):
        outs = backend.generate(prompts, seeds=list(seeds), max_new_tokens=max_new_tokens,
                                stop_sequences=stop_sequences)
        return checked_texts(backend, outs, len(prompts))
    from .backends import cut_at_stop
    answers = [None] * len(prompts)
    for seed in sorted(set(seeds)):
        idx = [i for i, s in enumerate(seeds) if s == seed]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            outs = backend.generate([prompts[i] for i in idx], max_new_tokens=max_new_tokens,
                                    stop_sequences=stop_sequences)
        for i, text in zip(idx, checked_texts(backend, outs, len(idx))):
            answers[i] = cut_at_stop(text, stop_sequences)
    return answers


class GenerationCache(Backend):
    """Wraps a backend so that each distinct prompt and seed is generated once, optionally on disk.

    Keys hash the wrapped backend's settings (:func:`backend_key`), ``max_new_tokens``, the stop
    sequences, the prompt and the seed (dropped for greedy backends, whose answers ignore it).
    With a ``path``, answers go to SQLite as each batch completes, so a killed run loses at most
    the batch in flight and a re-run generates only what is missing. The file holds plain text.

    Only answers are stored: a backend output that is not one string per prompt, or an error
    marker, raises :class:`~pyterrier_utility.errors.BackendError` and nothing of it is kept;
    when a backend fails part-way (a server going away), the answers it completed before the
    failure are stored first. A file that cannot be used (corrupt, read-only, another program's)
    raises :class:`~pyterrier_utility.errors.CacheError` naming it, and is never replaced.

    Args:
        backend: the backend that generates on a cache miss.
        path: an SQLite file to persist answers across runs; ``None`` keeps them in memory.

    Example::

        with GenerationCache(pyterrier_utility.backends.gemma3_270m(), 'answers.sqlite') as backend:
            reader = pyterrier_utility.Reader(backend)
    """
    supports_seeds = True

    def __init__(self, backend: Backend, path: Optional[Union[str, Path]] = None):
        super().__init__(getattr(backend, 'model_id', repr(backend)),
                         max_new_tokens=getattr(backend, 'max_new_tokens', 32))
        self.backend = backend
        self.path = None if path is None else Path(path)
        self.generated = 0
        self._memory: Dict[str, str] = {}
        self._lock = threading.Lock()
        self._db = None
        if self.path is not None:
            self._connect()

    def __getstate__(self):
        state = dict(self.__dict__)
        state['_lock'] = None
        state['_db'] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _fail(self, error: Exception, doing: str) -> CacheError:
        return CacheError(f'generation cache {self.path}: {doing} failed ({type(error).__name__}: {error}). '
                          'The file may hold answers that took long to generate, so it is left as it is: '
                          'if it is damaged or not a generation cache, move it aside (or give another path) '
                          'and run again; if it is read-only, make it writable')

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        if self.path.is_dir():
            raise CacheError(f'generation cache {self.path}: is a folder, not a file')
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), check_same_thread=False)
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables - {'answers', 'meta'}:
                raise sqlite3.DatabaseError(f'it has tables {sorted(tables)}, not a generation cache\'s')
            if 'answers' in tables:
                columns = [row[1] for row in db.execute('PRAGMA table_info(answers)')]
                if columns != ['key', 'answer']:
                    raise sqlite3.DatabaseError(f'its answers table has columns {columns}')
            if 'meta' in tables:
                fmt = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if fmt is not None and fmt[0] != CACHE_FORMAT:
                    raise sqlite3.DatabaseError(f'it declares format {fmt[0]!r}, not {CACHE_FORMAT!r}')
            if tables != {'answers', 'meta'}:
                db.execute('PRAGMA journal_mode=WAL')
                db.execute('CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, answer TEXT NOT NULL)')
                db.execute('CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)')
                db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (CACHE_FORMAT,))
                db.commit()
        except sqlite3.Error as e:
            raise self._fail(e, 'opening') from None
        self._db = db
        return db

    def close(self) -> None:
        """Closes the file (reopened when next needed)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

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
        if self.path is not None and missing:
            db = self._connect()
            try:
                for start in range(0, len(missing), 500):
                    chunk = missing[start:start + 500]
                    rows = db.execute(
                        f'SELECT key, answer FROM answers WHERE key IN ({",".join("?" * len(chunk))})', chunk)
                    found.update(rows)
            except sqlite3.Error as e:
                raise self._fail(e, 'reading') from None
            self._memory.update(found)
        return found

    def _store(self, answers: Dict[str, str]) -> None:
        if self.path is not None and answers:
            db = self._connect()
            try:
                db.executemany('INSERT OR REPLACE INTO answers VALUES (?, ?)', answers.items())
                db.commit()
            except sqlite3.Error as e:
                db.rollback()
                raise self._fail(e, 'writing') from None
        self._memory.update(answers)

    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1) -> List[BackendOutput]:
        if return_logprobs or num_responses != 1:
            raise ValueError('GenerationCache returns one answer per prompt, without logprobs')
        seeds = list(seeds) if seeds is not None else [0] * len(inps)
        if len(seeds) != len(inps):
            raise ValueError(f'GenerationCache: {len(seeds)} seeds for {len(inps)} prompts')
        keys = [self.key(p, s, max_new_tokens, stop_sequences) for p, s in zip(inps, seeds)]
        with self._lock:
            found = self._lookup(list(dict.fromkeys(keys)))
            todo: Dict[str, Dict[str, int]] = {}  # prompt -> key -> seed, for keys not found
            for k, p, s in zip(keys, inps, seeds):
                if k not in found:
                    todo.setdefault(p, {}).setdefault(k, s)
            pending = list(todo)
            for group in work_batches(self.backend, pending, [len(todo[p]) for p in pending]):
                chunk = [(k, pending[i], s) for i in group for k, s in todo[pending[i]].items()]
                try:
                    answers = generate_seeded(self.backend, [p for _, p, _ in chunk], [s for _, _, s in chunk],
                                              max_new_tokens, stop_sequences)
                except BackendError as e:
                    kept = {chunk[i][0]: t for i, t in e.completed.items()
                            if 0 <= i < len(chunk) and isinstance(t, str) and not t.startswith(ERROR_MARKERS)}
                    self._store(kept)
                    self.generated += len(kept)
                    raise BackendError(f'{e} [{len(kept)} answers of the failed batch and all earlier batches '
                                       'are in the cache; a re-run generates only what is missing]') from e
                self.generated += len(chunk)
                new = {k: a for (k, _, _), a in zip(chunk, answers)}
                self._store(new)
                found.update(new)
        return [BackendOutput(text=found[k]) for k in keys]

    def __len__(self) -> int:
        if self.path is not None:
            try:
                return self._connect().execute('SELECT COUNT(*) FROM answers').fetchone()[0]
            except sqlite3.Error as e:
                raise self._fail(e, 'counting') from None
        return len(self._memory)

    def __repr__(self):
        return f'GenerationCache({self.backend!r}, path={None if self.path is None else str(self.path)!r})'


def warn_unseeded(backend: Backend, n_samples: int) -> None:
    """Warns when several samples are asked of a sampling backend that takes no seeds."""
    if n_samples > 1 and not getattr(backend, 'supports_seeds', False) and not getattr(backend, 'deterministic', False):
        warnings.warn(f'{backend!r} takes no seeds: its {n_samples} samples per prompt are seeded through torch '
                      'only, which does not reach remote servers or vLLM; use pyterrier_utility.backends.'
                      'OpenAICompatibleBackend or VLLMBackend for reproducible samples', stacklevel=3)
