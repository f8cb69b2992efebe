"""Index time: document embeddings, and the split of the corpus into sparse (S) and other (R) documents."""
from pathlib import Path
from typing import Mapping, Optional, Sequence

import numpy as np

from ..._checks import check
from ..._files import built_once, cache_dir, stable_hash


class CorpusEmbeddings:
    """Unit-normalised sentence embeddings of every document (all-MiniLM-L6-v2 by default), computed
    once and kept in the cache folder (a float32 array and the docnos, keyed by model and texts).

    Args:
        texts: docno -> text of the whole corpus (it must fit in memory as embeddings).
        model: a sentence-transformers model name or folder (default: the offline MiniLM).
        batch_size: texts encoded together.

    Example::

        embeddings = CorpusEmbeddings(dataset.texts)
        embeddings.encode(['what is lift?']) @ embeddings.matrix.T
    """

    def __init__(self, texts: Mapping[str, str], model: Optional[str] = None, batch_size: int = 32):
        from ...rerankers import minilm_path
        self.model_name = str(model or minilm_path())
        self.batch_size = batch_size
        self.docnos = [str(d) for d in texts]
        values = ['' if texts[d] is None else str(texts[d]) for d in texts]
        key = stable_hash(Path(self.model_name).name, self.docnos, stable_hash(values))
        path = built_once(cache_dir() / 'embeddings' / f'{key[:24]}.npy', lambda staging: self._save(values, staging),
                          f'the embeddings of {len(values)} documents')
        self.matrix = np.load(path)

    def _save(self, texts: Sequence[str], path: Path) -> None:
        with open(path, 'wb') as f:  # a file object: np.save would add .npy to the staging name
            np.save(f, self.encode(texts))

    def _model(self):
        if not hasattr(self, '_st'):
            from sentence_transformers import SentenceTransformer
            self._st = SentenceTransformer(self.model_name, device='cpu')
        return self._st

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-normalised float32 embeddings of ``texts``."""
        return np.asarray(self._model().encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                               show_progress_bar=False), dtype=np.float32)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != '_st'}


class SparsePartition:
    """Splits a corpus into S, the documents whose information no other document carries ("sparse"),
    and R, the rest, as COS-Mix's ``identifySparseInformation`` does.

    "Carries the same information" is decided here by embeddings: a document is sparse when its
    nearest other document has a cosine similarity below ``threshold``; near-duplicates and
    paraphrases (similarity at or above it) put both documents in R.

    Args:
        embeddings: the corpus's :class:`CorpusEmbeddings`.
        threshold: the cosine similarity at or above which two documents carry the same information.
            The default, 0.65, makes S a small subset as COS-Mix intends: on the embedded Cranfield
            (MiniLM) the nearest-neighbour similarity has median 0.75, and 13% of the abstracts are
            sparse at 0.65, 27% at 0.7, 76% at 0.8.

    Example::

        partition = SparsePartition(CorpusEmbeddings(dataset.texts), threshold=0.65)
        len(partition.sparse), len(partition.rest)
    """

    def __init__(self, embeddings: CorpusEmbeddings, threshold: float = 0.65):
        check(-1 <= threshold <= 1, 'SparsePartition',
              f'threshold must be a cosine similarity in [-1, 1], got {threshold}')
        self.embeddings = embeddings
        self.threshold = threshold
        matrix = embeddings.matrix
        nearest = np.full(len(matrix), -np.inf, dtype=np.float32)
        for start in range(0, len(matrix), 1024):
            sims = matrix[start:start + 1024] @ matrix.T
            rows = np.arange(start, min(start + 1024, len(matrix)))
            sims[rows - start, rows] = -np.inf  # not its own neighbour
            nearest[rows] = sims.max(axis=1) if len(matrix) > 1 else -np.inf
        #: Each document's cosine similarity to its nearest other document.
        self.nearest = dict(zip(embeddings.docnos, nearest.tolist()))
        self.sparse = frozenset(d for d, s in self.nearest.items() if s < threshold)
        self.rest = frozenset(embeddings.docnos) - self.sparse

    def __repr__(self):
        return f'SparsePartition(threshold={self.threshold}, {len(self.sparse)} sparse, {len(self.rest)} other)'
