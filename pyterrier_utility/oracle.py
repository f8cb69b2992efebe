"""Oracle contexts: k sampled relevant (Rel) or non-relevant (NRel) documents per query."""
from typing import List, Mapping, Optional

import numpy as np
import pandas as pd
import pyterrier as pt

from ._util import check_int, normalise_frame, stable_hash, validate_columns, warn_qids, with_fewer_results
from .datasets import texts_of
from .settings import LabelSet, LabelsLike


class OracleSampler(pt.Transformer):
    """Retrieves a random sample of judged relevant (or non-relevant) documents for each query.

    ``relevant=True`` samples up to ``num_results`` documents whose label is in ``labels`` (all of
    them, in random order, when there are fewer). ``relevant=False`` samples judged documents with
    label at most ``nonrelevant_max_label``; with ``fill_unjudged=True`` it completes the sample
    from documents the query has no judgement for (on collections judged as exhaustive, such as
    Cranfield, unjudged documents are non-relevant). The order is random; each query's sample
    depends only on ``seed`` and its qid, and is a prefix of any larger sample, so
    ``OracleSampler(...) % k`` is a uniform sample of k. Output: a result frame with ``text``,
    usable wherever a retriever is. Queries for which nothing can be sampled are absent, and named
    in a warning.

    Args:
        qrels: ``qid``, ``docno``, ``label``.
        texts: docno -> text (its keys are the corpus used by ``fill_unjudged``).
        relevant: sample relevant (Rel) or non-relevant (NRel) documents.
        labels: relevant labels: a minimum (int) or a set.
        nonrelevant_max_label: the highest label counted as non-relevant.
        fill_unjudged: complete non-relevant samples from unjudged documents.
        num_results: the most documents per query.
        seed: the sampling seed.

    Example::

        rel = OracleSampler(qrels, dataset.texts, relevant=True, labels=2) % 5
        nrel = OracleSampler(qrels, dataset.texts, relevant=False, fill_unjudged=True) % 5
    """

    def __init__(self, qrels: pd.DataFrame, texts: Mapping[str, str], *, relevant: bool = True,
                 labels: LabelsLike = 2, nonrelevant_max_label: int = 0, fill_unjudged: bool = False,
                 num_results: int = 1000, seed: int = 0):
        validate_columns('OracleSampler qrels', qrels, ['qid', 'docno', 'label'])
        check_int('OracleSampler', 'num_results', num_results, 1)
        check_int('OracleSampler', 'seed', seed, 0)
        labels = LabelSet.parse(labels)
        self.qrels = qrels
        self.texts = texts
        self.relevant = relevant
        self.labels = labels
        self.nonrelevant_max_label = nonrelevant_max_label
        self.fill_unjudged = fill_unjudged
        self.num_results = num_results
        self.seed = seed
        qrels = normalise_frame('OracleSampler qrels', qrels)
        if relevant:
            self.pools = labels.relevant_docnos(qrels)
        else:
            nonrel = qrels[qrels['label'] <= nonrelevant_max_label]
            self.pools = {q: list(g['docno']) for q, g in nonrel.groupby('qid', sort=False)}
        self.judged = {q: set(g['docno']) for q, g in qrels.groupby('qid', sort=False)}
        self._corpus: Optional[List[str]] = None

    def _rng(self, qid: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, int(stable_hash(qid)[:8], 16)])

    def sample(self, qid: str) -> List[str]:
        """The docnos sampled for one query, in context order."""
        rng = self._rng(qid)
        pool = list(self.pools.get(qid, []))
        picked = [pool[i] for i in rng.permutation(len(pool))][:self.num_results]
        if not self.relevant and self.fill_unjudged and len(picked) < self.num_results:
            if self._corpus is None:
                self._corpus = sorted(self.texts)
            judged = self.judged.get(qid, set())
            need = self.num_results - len(picked)
            for i in rng.permutation(len(self._corpus)):
                if need == 0:
                    break
                if self._corpus[i] not in judged:
                    picked.append(self._corpus[i])
                    need -= 1
        return picked

    def fuse_rank_cutoff(self, k: int) -> 'OracleSampler':
        """``sampler % k`` samples k documents: samples are prefixes of larger ones, so this is exact."""
        return with_fewer_results(self, k)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query'])
        inp = normalise_frame(repr(self), inp[['qid', 'query']].drop_duplicates())
        rows = []
        empty = []
        samples = {qid: self.sample(qid) for qid in inp['qid']}
        texts = texts_of(self.texts, [d for docnos in samples.values() for d in docnos])
        for qid, query in zip(inp['qid'], inp['query']):
            docnos = samples[qid]
            if not docnos:
                empty.append(qid)
            for rank, docno in enumerate(docnos):
                rows.append((qid, query, docno, texts.get(docno, ''), float(len(docnos) - rank), rank))
        kind = 'relevant' if self.relevant else 'non-relevant'
        warn_qids(f'OracleSampler found no {kind} document to sample', empty)
        return pd.DataFrame(rows, columns=['qid', 'query', 'docno', 'text', 'score', 'rank'])

    def __repr__(self):
        kind = (f'Rel, {self.labels}' if self.relevant else
                f'NRel, label<={self.nonrelevant_max_label}' + (', unjudged filled' if self.fill_unjudged else ''))
        return f'OracleSampler({kind}, num_results={self.num_results}, seed={self.seed})'
