"""Retrieval over a subset of the corpus: dense (cosine) retrieval, and BM25 fused with it (hybrid)."""
from typing import Collection, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
import pyterrier as pt

from ..._checks import check_int
from ..._cutoff import with_fewer_results
from ..._frames import validate_columns
from ...datasets.texts import texts_of
from .partition import CorpusEmbeddings


def reciprocal_rank_fusion(rankings: Sequence[pd.DataFrame], k: int = 60, num_results: int = 100) -> pd.DataFrame:
    """Fuses rankings (``qid``, ``docno``, ``rank`` from 0) by reciprocal rank fusion (Cormack et al.,
    2009): a document's score is the sum over rankings of 1 / (k + rank), ranks counted from 1. Ties
    break by docno, so the fusion does not depend on the order of its inputs."""
    parts = [r[['qid', 'query', 'docno', 'rank']] for r in rankings if len(r)]
    if not parts:
        return pd.DataFrame(columns=['qid', 'query', 'docno', 'score', 'rank'])
    frame = pd.concat(parts, ignore_index=True)
    frame = frame.assign(score=1.0 / (k + frame['rank'].astype(float) + 1))
    fused = frame.groupby(['qid', 'query', 'docno'], as_index=False, sort=False)['score'].sum()
    fused = fused.sort_values(['qid', 'score', 'docno'], ascending=[True, False, True], kind='stable')
    fused = fused.assign(rank=fused.groupby('qid').cumcount())
    return fused[fused['rank'] < num_results].reset_index(drop=True)


class DenseRetriever(pt.Transformer):
    """Cosine-similarity retrieval over the corpus embeddings, optionally within a subset of docnos:
    the nearest documents by cosine distance (1 - similarity).

    Args:
        embeddings: the corpus's :class:`~pyterrier_utility.methods.cosmix.CorpusEmbeddings`.
        texts: docno -> text.
        subset: the docnos to retrieve from (default: all).
        num_results: documents per query.
    """

    def __init__(self, embeddings: CorpusEmbeddings, texts: Mapping[str, str], subset: Optional[Collection[str]] = None,
                 num_results: int = 100):
        check_int('DenseRetriever', 'num_results', num_results, 1)
        self.embeddings = embeddings
        self.texts = texts
        self.subset = None if subset is None else frozenset(subset)
        self.num_results = num_results
        keep = [i for i, d in enumerate(embeddings.docnos) if self.subset is None or d in self.subset]
        self._rows = np.asarray(keep, dtype=int)

    def fuse_rank_cutoff(self, k: int) -> 'DenseRetriever':
        return with_fewer_results(self, k)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query'])
        queries = inp[['qid', 'query']].drop_duplicates('qid')
        if queries.empty or not len(self._rows):
            return pd.DataFrame(columns=['qid', 'query', 'docno', 'text', 'score', 'rank'])
        sims = self.embeddings.encode(queries['query'].astype(str).tolist()) @ self.embeddings.matrix[self._rows].T
        n = min(self.num_results, sims.shape[1])
        rows = []
        for (qid, query), row in zip(queries.itertuples(index=False), sims):
            top = np.argsort(-row, kind='stable')[:n]
            rows += [(qid, query, self.embeddings.docnos[self._rows[j]], float(row[j]), r) for r, j in enumerate(top)]
        out = pd.DataFrame(rows, columns=['qid', 'query', 'docno', 'score', 'rank'])
        texts = texts_of(self.texts, out['docno'])
        return out.assign(text=out['docno'].map(texts))

    def __repr__(self):
        within = 'all' if self.subset is None else f'{len(self.subset)} documents'
        return f'DenseRetriever({within}, num_results={self.num_results})'


class HybridRetriever(pt.Transformer):
    """COS-Mix's hybrid retriever H: BM25 and dense retrieval, each within ``subset``, fused by
    reciprocal rank fusion. COS-Mix then reorders the top k it gives the reader ("Lost in the
    Middle"); that is :class:`COSMix`'s ``reorder``, after the cutoff, since reordering the whole
    fused ranking would change which documents are in the top k.

    BM25 searches the whole index to ``depth`` and keeps the documents in the subset, so a small
    subset needs a deep ``depth``; dense retrieval within the subset is exact.

    Args:
        bm25: a BM25 retriever over the corpus returning ``depth`` documents with ``text``.
        dense: a :class:`DenseRetriever` over the same subset.
        subset: the docnos to retrieve from (default: all).
        num_results: documents per query after fusion.
        rrf_k: the fusion's constant (60, as Cormack et al.).
    """

    def __init__(self, bm25: pt.Transformer, dense: DenseRetriever, subset: Optional[Collection[str]] = None,
                 num_results: int = 100, rrf_k: int = 60):
        check_int('HybridRetriever', 'num_results', num_results, 1)
        self.bm25 = bm25
        self.dense = dense
        self.subset = None if subset is None else frozenset(subset)
        self.num_results = num_results
        self.rrf_k = rrf_k

    def fuse_rank_cutoff(self, k: int) -> 'HybridRetriever':
        return with_fewer_results(self, k)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query'])
        lexical = self.bm25.transform(inp)
        if self.subset is not None:
            lexical = lexical[lexical['docno'].astype(str).isin(self.subset)]
            lexical = lexical.assign(rank=lexical.groupby('qid').cumcount())
        fused = reciprocal_rank_fusion([lexical, self.dense(inp)], self.rrf_k, self.num_results)
        texts = texts_of(self.dense.texts, fused['docno'])
        return fused.assign(text=fused['docno'].map(texts))

    def __repr__(self):
        within = 'all' if self.subset is None else f'{len(self.subset)} documents'
        return f'HybridRetriever({within}, num_results={self.num_results}, rrf_k={self.rrf_k})'
