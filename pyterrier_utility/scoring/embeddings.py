"""Token embeddings kept once computed: in memory (least recently used evicted beyond a bound in
bytes) and, given a path, in an SQLite file across runs."""
import sqlite3
from collections import OrderedDict
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy as np
import torch

from .._files import stable_hash

#: A text's token ids and its token embeddings (tokens x dimension, float32).
Embedded = Tuple[torch.Tensor, torch.Tensor]


class EmbeddingStore:
    """The embeddings of texts under one encoder (``model``, ``layer``), each kept once.

    Args:
        model, layer: what the embeddings were computed with; part of every key on disk.
        dim: the embedding dimension (to read arrays back from the file).
        cache_bytes: bound of the in-memory store; the least recently used are evicted first.
        path: an SQLite file keeping embeddings across runs (float32 arrays, keyed by model,
            layer and text); ``None``: memory only.
    """

    def __init__(self, model: str, layer: int, dim: int, cache_bytes: int = 2 << 30,
                 path: Optional[Union[str, Path]] = None):
        self.model = model
        self.layer = layer
        self.dim = dim
        self.cache_bytes = cache_bytes
        self.path = path
        self._memory: 'OrderedDict[str, Embedded]' = OrderedDict()
        self._bytes = 0
        self._db: Optional[sqlite3.Connection] = None

    def __getstate__(self):
        return dict(self.__dict__, _db=None, _memory=OrderedDict(), _bytes=0)

    def __contains__(self, text: str) -> bool:
        return text in self._memory

    def _database(self) -> Optional[sqlite3.Connection]:
        if self.path is not None and self._db is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(str(self.path), check_same_thread=False)
            self._db.execute('CREATE TABLE IF NOT EXISTS embeddings '
                             '(key TEXT PRIMARY KEY, ids BLOB NOT NULL, emb BLOB NOT NULL)')
            self._db.commit()
        return self._db

    def _key(self, text: str) -> str:
        return stable_hash(self.model, self.layer, text)

    def _remember(self, text: str, ids: torch.Tensor, emb: torch.Tensor) -> None:
        self._memory[text] = (ids, emb)
        self._bytes += emb.numel() * 4
        while self._bytes > self.cache_bytes and len(self._memory) > 1:
            _, (_, old) = self._memory.popitem(last=False)
            self._bytes -= old.numel() * 4

    def load(self, texts: Iterable[str]) -> None:
        """Brings the texts found in the file into memory."""
        db = self._database()
        keys = {self._key(t): t for t in texts if t not in self._memory}
        if db is None or not keys:
            return
        key_list = list(keys)
        for start in range(0, len(key_list), 500):
            chunk = key_list[start:start + 500]
            rows = db.execute(
                f'SELECT key, ids, emb FROM embeddings WHERE key IN ({",".join("?" * len(chunk))})', chunk)
            for key, ids, emb in rows:
                self._remember(keys[key], torch.from_numpy(np.frombuffer(ids, dtype=np.int64).copy()),
                               torch.from_numpy(np.frombuffer(emb, dtype=np.float32).copy()).view(-1, self.dim))

    def add(self, embedded: List[Tuple[str, torch.Tensor, torch.Tensor]]) -> None:
        """Keeps ``(text, ids, embeddings)`` in memory and, with a path, in the file."""
        for text, ids, emb in embedded:
            self._remember(text, ids, emb)
        db = self._database() if embedded else None
        if db is not None:
            db.executemany('INSERT OR REPLACE INTO embeddings VALUES (?, ?, ?)',
                           [(self._key(t), ids.numpy().tobytes(), emb.numpy().tobytes()) for t, ids, emb in embedded])
            db.commit()

    def get(self, texts: Iterable[str]) -> Dict[str, Embedded]:
        """The embeddings of texts in memory, each marked as just used."""
        found = {}
        for t in texts:
            found[t] = self._memory[t]
            self._memory.move_to_end(t)
        return found
