"""A generation cache: every distinct (backend, settings, prompt, seed) is generated once.

It is also the one place where answers enter the project: what a backend returns is checked here
(one text per prompt, a string, not an error marker) before anything is stored or returned.
"""
import json
import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import pyterrier as pt
from pyterrier_rag.backend import Backend

from ._util import encodable, stable_hash
from .backends._base import ERROR_MARKERS, Answer, generate_seeded, work_batches
from .errors import BackendError, CacheError
from .protocols import DecodingBackend, KeyedBackend, deterministic, supports_seeds

#: The format a cache file declares in its ``meta`` table.
CACHE_FORMAT = 'pyterrier_utility.generations/1'
#: The tables of a cache file and their columns; ``answer_info`` was added later, without a new
#: format: a file without it gains it on opening, and one whose ``answer_info`` predates
#: ``token_logprobs`` (a JSON list) gains that column.
TABLES = {'settings': 'id TEXT PRIMARY KEY, definition TEXT NOT NULL',
          'answers': 'key TEXT PRIMARY KEY, answer TEXT NOT NULL',
          'meta': 'key TEXT PRIMARY KEY, value TEXT NOT NULL',
          'answer_info': 'key TEXT PRIMARY KEY, logprob REAL, tokens INTEGER, truncated INTEGER, '
                         'token_logprobs TEXT'}


def backend_key(backend: Backend) -> object:
    """What, besides prompt and seed, determines a backend's answers.

    A :class:`~pyterrier_utility.protocols.KeyedBackend`'s ``generation_key`` (every backend of this
    package); for pyterrier-rag's backends, their generation arguments (``generation_args`` or
    ``_generation_args``), model and limits.
    """
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
    its key with the decoding the call actually uses; for others, their key and the call's limits."""
    if isinstance(backend, DecodingBackend):
        changes = {'max_new_tokens': max_new_tokens, 'stop': stop_sequences}
        decoding = backend.decoding.replace(**{k: v for k, v in changes.items() if v is not None})
        return dict(backend.generation_key, decoding=decoding.as_dict())
    return {'backend': backend_key(backend), 'max_new_tokens': max_new_tokens, 'stop': list(stop_sequences or [])}


class GenerationCache(Backend):
    """Wraps a backend so that each distinct prompt and seed is generated once, optionally on disk.

    An answer's key hashes the settings it was generated with (:func:`settings_key`: for the
    backends of this package, the model, the whole :class:`~pyterrier_utility.settings.Decoding` as
    the call uses it, and the engine fields), the prompt and the seed (dropped for greedy decoding,
    whose answers ignore it). Answers asked with other settings are therefore other entries: a
    second run with another ``max_new_tokens`` or ``stop`` generates afresh and leaves the first
    run's answers in place. The file also records the definition of every setting it holds
    (:meth:`settings`), as pyterrier-caching records its key definition. With a ``path``, answers go
    to SQLite as each batch completes, so a killed run loses at most the batch in flight and a
    re-run generates only what is missing. The file holds plain text.

    Only answers are stored: a backend output that is not one string per prompt, an error marker,
    or text that cannot be encoded (a lone surrogate), raises
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
        self.path = None if path is None else Path(path)
        self.generated = 0
        self._memory: Dict[str, Answer] = {}
        self._settings: Dict[str, str] = {}
        self._lock = threading.Lock()
        self._db: Optional[sqlite3.Connection] = None
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
        assert self.path is not None  # only a cache with a file connects
        if self.path.is_dir():
            raise CacheError(f'generation cache {self.path}: is a folder, not a file')
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), check_same_thread=False)
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if tables - set(TABLES):
                raise sqlite3.DatabaseError(f'it has tables {sorted(tables)}, not a generation cache\'s')
            if 'answers' in tables:
                columns = [row[1] for row in db.execute('PRAGMA table_info(answers)')]
                if columns != ['key', 'answer']:
                    raise sqlite3.DatabaseError(f'its answers table has columns {columns}')
            if 'meta' in tables:
                fmt = db.execute("SELECT value FROM meta WHERE key = 'format'").fetchone()
                if fmt is not None and fmt[0] != CACHE_FORMAT:
                    raise sqlite3.DatabaseError(f'it declares format {fmt[0]!r}, not {CACHE_FORMAT!r}')
            if 'answer_info' in tables and 'token_logprobs' not in [
                    row[1] for row in db.execute('PRAGMA table_info(answer_info)')]:
                db.execute('ALTER TABLE answer_info ADD COLUMN token_logprobs TEXT')
                db.commit()
            if tables != set(TABLES):
                db.execute('PRAGMA journal_mode=WAL')
                for name, schema in TABLES.items():
                    db.execute(f'CREATE TABLE IF NOT EXISTS {name} ({schema})')
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
        return deterministic(self.backend)

    @property
    def generation_key(self):
        return backend_key(self.backend)

    def settings_id(self, max_new_tokens: Optional[int], stop_sequences: Optional[Sequence[str]]) -> str:
        """The id of the settings a call generates with; their definition is recorded in the file."""
        definition = json.dumps(settings_key(self.backend, max_new_tokens, stop_sequences), sort_keys=True,
                                default=str)
        sid = stable_hash(definition)
        if sid not in self._settings:
            self._settings[sid] = definition
            if self.path is not None:
                db = self._connect()
                try:
                    db.execute('INSERT OR IGNORE INTO settings VALUES (?, ?)', (sid, definition))
                    db.commit()
                except sqlite3.Error as e:
                    db.rollback()
                    raise self._fail(e, 'writing') from None
        return sid

    def settings(self) -> List[dict]:
        """The definitions of the settings the cache holds answers for (or was asked with)."""
        stored = dict(self._settings)
        if self.path is not None:
            try:
                stored.update(self._connect().execute('SELECT id, definition FROM settings'))
            except sqlite3.Error as e:
                raise self._fail(e, 'reading') from None
        return [json.loads(d) for d in stored.values()]

    def key(self, prompt: str, seed: int, max_new_tokens: Optional[int],
            stop_sequences: Optional[Sequence[str]]) -> str:
        """An answer's key, the one place it is computed: the settings' id, the prompt and the seed
        (none for a deterministic backend)."""
        return stable_hash(self.settings_id(max_new_tokens, stop_sequences), prompt,
                           None if self.deterministic else int(seed))

    def _lookup(self, keys: List[str]) -> Dict[str, Answer]:
        found = {k: self._memory[k] for k in keys if k in self._memory}
        missing = [k for k in keys if k not in found]
        if self.path is not None and missing:
            db = self._connect()
            try:
                for start in range(0, len(missing), 500):
                    chunk = missing[start:start + 500]
                    rows = db.execute(
                        'SELECT a.key, a.answer, i.logprob, i.tokens, i.truncated, i.token_logprobs FROM answers a '
                        f'LEFT JOIN answer_info i ON i.key = a.key WHERE a.key IN ({",".join("?" * len(chunk))})',
                        chunk)
                    found.update((k, Answer(text=text, logprob=logprob, tokens=tokens,
                                            truncated=None if truncated is None else bool(truncated),
                                            token_logprobs=None if each is None else tuple(json.loads(each))))
                                 for k, text, logprob, tokens, truncated, each in rows)
            except sqlite3.Error as e:
                raise self._fail(e, 'reading') from None
            self._memory.update(found)
        return found

    def _store(self, answers: Dict[str, Answer]) -> None:
        if self.path is not None and answers:
            db = self._connect()
            info = [(k, a.logprob, a.tokens, a.truncated,
                     None if a.token_logprobs is None else json.dumps(list(a.token_logprobs)))
                    for k, a in answers.items() if (a.logprob, a.tokens, a.truncated) != (None, None, None)]
            try:
                db.executemany('INSERT OR REPLACE INTO answers VALUES (?, ?)',
                               [(k, a.text) for k, a in answers.items()])
                db.executemany('INSERT OR REPLACE INTO answer_info VALUES (?, ?, ?, ?, ?)', info)
                db.commit()
            except BaseException as e:
                # Whatever failed (even text sqlite cannot encode), no transaction is left open.
                db.rollback()
                if isinstance(e, sqlite3.Error):
                    raise self._fail(e, 'writing') from None
                raise
        self._memory.update(answers)

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
        answers when ``verbose``)."""
        seeds = [int(s) for s in seeds]
        flat = self._generate([p for p in prompts for _ in seeds], seeds * len(prompts), max_new_tokens,
                              stop_sequences, verbose)
        return [flat[i * len(seeds):(i + 1) * len(seeds)] for i in range(len(prompts))]

    def _generate(self, inps: Sequence[str], seeds: Sequence[int], max_new_tokens, stop_sequences,
                  verbose: bool = False) -> List[Answer]:
        """The answer to each (prompt, seed): read where cached, else generated."""
        keys = [self.key(p, s, max_new_tokens, stop_sequences) for p, s in zip(inps, seeds)]
        found = self._answers(keys, inps, seeds, max_new_tokens, stop_sequences, verbose)
        return [found[k] for k in keys]

    def _answers(self, keys: List[str], inps: Sequence[str], seeds: Sequence[int], max_new_tokens, stop_sequences,
                 verbose: bool = False) -> Dict[str, Answer]:
        """key -> answer for every key: those not cached are generated, grouped by :func:`work_batches`
        (the one place prompts are batched), and stored as each batch completes."""
        with self._lock:
            found = self._lookup(list(dict.fromkeys(keys)))
            todo: Dict[str, Dict[str, int]] = {}  # prompt -> key -> seed, for keys not found
            for k, p, s in zip(keys, inps, seeds):
                if k not in found:
                    todo.setdefault(p, {}).setdefault(k, s)
            pending = list(todo)
            total = sum(len(t) for t in todo.values())
            with pt.tqdm(total=total, desc='answers', unit='answer', disable=not verbose or not total) as progress:
                for group in work_batches(self.backend, pending, [len(todo[p]) for p in pending]):
                    chunk = [(k, pending[i], s) for i in group for k, s in todo[pending[i]].items()]
                    found.update(self._generate_batch(chunk, max_new_tokens, stop_sequences))
                    progress.update(len(chunk))
        return found

    def _generate_batch(self, chunk: List[tuple], max_new_tokens, stop_sequences) -> Dict[str, Answer]:
        """Generates one batch of ``(key, prompt, seed)`` and stores it; on a failure, the answers the
        backend completed are stored before the error goes on."""
        try:
            answers = generate_seeded(self.backend, [p for _, p, _ in chunk], [s for _, _, s in chunk],
                                      max_new_tokens, stop_sequences)
        except (BackendError, KeyboardInterrupt) as e:
            # A Ctrl-C may carry the answers completed too (OpenAICompatibleBackend's does).
            completed = {i: a if isinstance(a, Answer) else Answer(text=a, truncated=None)
                         for i, a in getattr(e, 'completed', {}).items()}
            kept = {chunk[i][0]: a for i, a in completed.items()
                    if 0 <= i < len(chunk) and isinstance(a.text, str) and not a.text.startswith(ERROR_MARKERS)
                    and encodable(a.text)}
            self._store(kept)
            self.generated += len(kept)
            if isinstance(e, KeyboardInterrupt):
                raise
            raise BackendError(f'{e} [{len(kept)} answers of the failed batch and all earlier batches '
                               'are in the cache; a re-run generates only what is missing]') from e
        self.generated += len(chunk)
        new = {k: a for (k, _, _), a in zip(chunk, answers)}
        self._store(new)
        return new

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
    if n_samples > 1 and not supports_seeds(backend) and not deterministic(backend):
        warnings.warn(f'{backend!r} takes no seeds: its {n_samples} samples per prompt are seeded through torch '
                      'only, which does not reach remote servers or vLLM; use pyterrier_utility.backends.'
                      'OpenAICompatibleBackend or VLLMBackend for reproducible samples', stacklevel=3)
