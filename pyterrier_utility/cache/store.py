"""Where the generation cache keeps answers: in memory and, with a path, in an SQLite file, each
answer with what the engine said of it, and the definition of every setting it holds. A file is
checked to be a generation cache keyed as :data:`~pyterrier_utility.cache.keys.KEY_DEFINITION` says
when opened, and an older one gains what was added since (:func:`migrated`)."""
import json
import sqlite3
import threading
from pathlib import Path
from typing import Dict, List, Optional, Union

from ..backends import Answer
from ..errors import CacheError
from .keys import KEY_DEFINITION

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


def checked(db: sqlite3.Connection, path: Path) -> None:
    """Refuses a file that is not a generation cache, or one keyed otherwise (none of its answers would be
    found); the file is left as it is."""
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
        recorded = db.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()
        if recorded is not None and recorded[0] != KEY_DEFINITION:
            db.close()
            raise CacheError(f'generation cache {path}: its answers are keyed as {recorded[0]}, '
                             f'this version keys them as {KEY_DEFINITION}, so none of them would be found. '
                             'The file is left as it is: give another path, or open it with the version '
                             'that wrote it')


def migrated(db: sqlite3.Connection) -> None:
    """Gives a file what was added since it was written, its answers kept: the tables it lacks (a new
    file: all), ``answer_info``'s ``token_logprobs`` column, and the key definition it was keyed by
    (same format) where it records none (a read-only file is read as it is)."""
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
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
    if db.execute("SELECT value FROM meta WHERE key = 'key'").fetchone() is None:
        try:
            db.execute("INSERT INTO meta VALUES ('key', ?)", (KEY_DEFINITION,))
            db.commit()
        except sqlite3.OperationalError:
            db.rollback()


class AnswerStore:
    """Answers by key, and the settings they were generated with by id: in memory, and in an SQLite file
    when given a ``path`` (opened when first needed, reopened after :meth:`close`). A file that cannot be
    used (corrupt, read-only, another program's) raises :class:`~pyterrier_utility.errors.CacheError`
    naming it, and is never replaced.

    Args:
        path: the SQLite file; ``None`` keeps the answers in memory.

    Example::

        store = AnswerStore('answers.sqlite')
        store.put({'k': Answer(text='lift')})
        store.lookup(['k', 'other'])    # {'k': Answer(text='lift', ...)}
    """

    def __init__(self, path: Optional[Union[str, Path]] = None):
        self.path = None if path is None else Path(path)
        self.memory: Dict[str, Answer] = {}
        self.definitions: Dict[str, str] = {}
        #: How many answers were generated (not read) into the store.
        self.generated = 0
        #: Held by whoever looks up, generates and stores: one writer at a time.
        self.lock = threading.Lock()
        self._db: Optional[sqlite3.Connection] = None
        if self.path is not None:
            self.connect()

    def __getstate__(self):
        return dict(self.__dict__, lock=None, _db=None)

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.lock = threading.Lock()

    def fail(self, error: Exception, doing: str) -> CacheError:
        return CacheError(f'generation cache {self.path}: {doing} failed ({type(error).__name__}: {error}). '
                          'The file may hold answers that took long to generate, so it is left as it is: '
                          'if it is damaged or not a generation cache, move it aside (or give another path) '
                          'and run again; if it is read-only, make it writable')

    def connect(self) -> sqlite3.Connection:
        """The open file (opened, checked and migrated when first needed)."""
        if self._db is not None:
            return self._db
        assert self.path is not None  # only a store with a file connects
        if self.path.is_dir():
            raise CacheError(f'generation cache {self.path}: is a folder, not a file')
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(str(self.path), check_same_thread=False)
            # Answers are committed as they arrive, one by one from a server: a commit that waits for
            # the disk (FULL: 4-6 ms here) would cap a run at a few hundred answers a second. NORMAL
            # (0.2 ms) keeps every commit through a killed process; only a power loss may undo the last.
            db.execute('PRAGMA synchronous=NORMAL')
            checked(db, self.path)
            migrated(db)
        except sqlite3.Error as e:
            raise self.fail(e, 'opening') from None
        self._db = db
        return db

    def close(self) -> None:
        """Closes the file (reopened when next needed)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def define(self, settings_id: str, definition: str) -> None:
        """Records the definition of the settings ``settings_id`` names."""
        if settings_id in self.definitions:
            return
        self.definitions[settings_id] = definition
        if self.path is not None:
            db = self.connect()
            try:
                db.execute('INSERT OR IGNORE INTO settings VALUES (?, ?)', (settings_id, definition))
                db.commit()
            except sqlite3.Error as e:
                db.rollback()
                raise self.fail(e, 'writing') from None

    def settings(self) -> List[dict]:
        """The definitions of the settings the store holds answers for (or was asked with)."""
        stored = dict(self.definitions)
        if self.path is not None:
            try:
                stored.update(self.connect().execute('SELECT id, definition FROM settings'))
            except sqlite3.Error as e:
                raise self.fail(e, 'reading') from None
        return [json.loads(d) for d in stored.values()]

    def lookup(self, keys: List[str]) -> Dict[str, Answer]:
        """The answers held under ``keys`` (those it holds)."""
        found = {k: self.memory[k] for k in keys if k in self.memory}
        missing = [k for k in keys if k not in found]
        if self.path is not None and missing:
            db = self.connect()
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
                raise self.fail(e, 'reading') from None
            self.memory.update(found)
        return found

    def put(self, answers: Dict[str, Answer]) -> None:
        """Stores ``answers`` (key -> answer), each with what the engine said of it, in one transaction."""
        if self.path is not None and answers:
            db = self.connect()
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
                    raise self.fail(e, 'writing') from None
                raise
        self.memory.update(answers)

    def __len__(self) -> int:
        if self.path is not None:
            try:
                return self.connect().execute('SELECT COUNT(*) FROM answers').fetchone()[0]
            except sqlite3.Error as e:
                raise self.fail(e, 'counting') from None
        return len(self.memory)
