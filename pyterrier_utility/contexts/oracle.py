"""Oracle contexts: k relevant (Rel) or non-relevant (NRel) documents per query, sampled as the
paper's text says or sorted by label as the authors' released runs are."""
import copy
from typing import Callable, List, Mapping, Optional, Tuple, cast

import numpy as np
import pandas as pd
import pyterrier as pt

from .._checks import check_int
from .._cutoff import CutAsFused, with_fewer_results
from .._files import stable_hash
from .._frames import normalise_frame, validate_columns
from .._messages import warn_qids
from ..datasets.texts import texts_of
from ..errors import SettingError
from ..protocols import IndexedTexts
from ..settings import LabelSet, LabelsLike
from ..vocabulary import ORACLE_MODES

#: How an oracle picks its documents: ``'sampled'``, the paper's text (Section 3: Rel "samples a set
#: of k relevant documents from the known set of assessed documents ... If the number of relevant
#: documents for a query is less than k then we take all of them"); ``'authors'``, the authors'
#: released runs (github.com/DanielTian97/rag-utility, ``res/oracle_dl_19.csv`` and
#: ``res/reverse_oracle_dl_19.csv``): every judged document of the query sorted by label, highest
#: first for Rel (padded with label 1 and 0 documents when fewer than k are relevant), lowest first
#: for NRel.


class OracleSampler(CutAsFused, pt.Transformer):
    """Retrieves judged relevant (or non-relevant) documents for each query: a random sample
    (``mode='sampled'``), or every judged document sorted by label (``mode='authors'``).

    ``mode='sampled'``, ``relevant=True`` samples up to ``num_results`` documents whose label is in ``labels`` (all of
    them, in random order, when there are fewer). ``relevant=False`` samples judged documents with
    label at most ``nonrelevant_max_label``; with ``fill_unjudged=True`` it completes the sample
    from documents the query has no judgement for (on collections judged as exhaustive, such as
    Cranfield, unjudged documents are non-relevant). The order is random; each query's sample
    depends only on ``seed`` and its qid, and is a prefix of any larger sample, so
    ``OracleSampler(...) % k`` is a uniform sample of k, the queries with fewer than k documents getting all
    they have. ``% k`` is the fused cut (:meth:`fuse_rank_cutoff`), compiled or not, in ``pt.Experiment`` too:
    only k documents are drawn, and the queries with fewer are named in a warning. Output: a result frame with ``text``,
    usable wherever a retriever is. Queries for which nothing can be sampled are absent, and named
    in a warning.

    ``mode='authors'`` gives every judged document of the query, sorted by label from the highest
    (Rel) or from the lowest (NRel), as the authors' released oracle runs are (:data:`ORACLE_MODES`):
    Rel at k is then the k best-labelled documents whatever ``labels`` says, padded with partially
    and non-relevant ones when fewer than k are relevant. Within a label, documents keep the order
    of ``qrels`` (the authors' files follow no order we could recover: neither their qrels file's,
    nor the docnos', nor a sort of their qrels, and it differs between their Rel and NRel files).

    Unjudged documents (``fill_unjudged``) are drawn by random position in the corpus, never by
    enumerating it: ``texts`` must be a ``dict`` or name its i-th document
    (:class:`~pyterrier_utility.protocols.IndexedTexts`, as the texts of ir_datasets collections
    do). A ``dict``'s documents are drawn in sorted docno order.

    Args:
        qrels: ``qid``, ``docno``, ``label``.
        texts: docno -> text (its keys are the corpus used by ``fill_unjudged``).
        relevant: sample relevant (Rel) or non-relevant (NRel) documents.
        labels: relevant labels: a minimum (int) or a set.
        nonrelevant_max_label: the highest label counted as non-relevant.
        fill_unjudged: complete non-relevant samples from unjudged documents.
        num_results: the most documents per query.
        seed: the sampling seed.
        mode: ``'sampled'`` or ``'authors'`` (:data:`ORACLE_MODES`).

    Example::

        rel = (OracleSampler(qrels, dataset.texts, relevant=True, labels=2) % 5).compile()
        nrel = OracleSampler(qrels, dataset.texts, relevant=False, fill_unjudged=True) % 5
        authors_rel = OracleSampler(qrels, dataset.texts, mode='authors') % 5
    """

    def __init__(self, qrels: pd.DataFrame, texts: Mapping[str, str], *, relevant: bool = True,
                 labels: LabelsLike = 2, nonrelevant_max_label: int = 0, fill_unjudged: bool = False,
                 num_results: int = 1000, seed: int = 0, mode: str = 'sampled'):
        validate_columns('OracleSampler qrels', qrels, ['qid', 'docno', 'label'])
        check_int('OracleSampler', 'num_results', num_results, 1)
        check_int('OracleSampler', 'seed', seed, 0)
        if mode not in ORACLE_MODES:
            raise SettingError(f'OracleSampler: mode must be one of {list(ORACLE_MODES)}, got {mode!r}')
        if fill_unjudged and mode == 'authors':
            raise SettingError("OracleSampler: mode='authors' gives judged documents only; fill_unjudged needs "
                               "mode='sampled'")
        if fill_unjudged and not isinstance(texts, (dict, IndexedTexts)):
            raise SettingError(f'OracleSampler: fill_unjudged draws documents by position: texts must be a dict '
                               f'or have docno_at(i) and len() (as LazyTexts), got {type(texts).__name__}')
        labels = LabelSet.parse(labels)
        self.qrels = qrels
        self.texts = texts
        self.relevant = relevant
        self.labels = labels
        self.nonrelevant_max_label = nonrelevant_max_label
        self.fill_unjudged = fill_unjudged
        self.num_results = num_results
        self.seed = seed
        self.mode = mode
        qrels = normalise_frame('OracleSampler qrels', qrels)
        if mode == 'authors':
            ordered = qrels.sort_values('label', ascending=not relevant, kind='stable')
            self.pools = {q: list(g['docno']) for q, g in ordered.groupby('qid', sort=False)}
        elif relevant:
            self.pools = labels.relevant_docnos(qrels)
        else:
            nonrel = qrels[qrels['label'] <= nonrelevant_max_label]
            self.pools = {q: list(g['docno']) for q, g in nonrel.groupby('qid', sort=False)}
        self.judged = {q: set(g['docno']) for q, g in qrels.groupby('qid', sort=False)}
        #: The k of ``sampler % k`` (``None``: no cutoff asked).
        self.asked: Optional[int] = None
        self._corpus: Optional[Tuple[int, Callable[[int], str]]] = None

    def _rng(self, qid: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, int(stable_hash(qid)[:8], 16)])

    def corpus(self) -> Tuple[int, Callable[[int], str]]:
        """The size of the corpus and the docno at a position, without enumerating an indexed corpus."""
        if self._corpus is None:
            if isinstance(self.texts, dict):
                docnos = sorted(self.texts)
                self._corpus = (len(docnos), docnos.__getitem__)
            else:
                self._corpus = (len(self.texts), cast(IndexedTexts, self.texts).docno_at)  # checked when made
        return self._corpus

    def sample(self, qid: str) -> List[str]:
        """The docnos sampled for one query, in context order."""
        pool = list(self.pools.get(qid, []))
        if self.mode == 'authors':
            return pool[:self.num_results]
        rng = self._rng(qid)
        picked = [pool[i] for i in rng.permutation(len(pool))][:self.num_results]
        if not self.relevant and self.fill_unjudged and len(picked) < self.num_results:
            size, docno_at = self.corpus()
            judged = self.judged.get(qid, set())
            need = self.num_results - len(picked)
            for i in rng.permutation(size):
                if need == 0:
                    break
                docno = docno_at(int(i))
                if docno not in judged:
                    picked.append(docno)
                    need -= 1
        return picked

    def fuse_rank_cutoff(self, k: int) -> 'OracleSampler':
        """``sampler % k`` samples k documents: samples are prefixes of larger ones, so this is exact. The
        queries with fewer than k documents to give are named in a warning, once per run."""
        fused = copy.copy(with_fewer_results(self, k))
        fused.asked = k
        return fused

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
        if self.asked is not None:
            # The paper's Rel takes every relevant document when there are fewer than k: said, not hidden.
            warn_qids(f'{self!r} gives fewer than k={self.asked} {kind} documents (all it has) to some queries',
                      [q for q, docnos in samples.items() if 0 < len(docnos) < self.asked])
        return pd.DataFrame(rows, columns=['qid', 'query', 'docno', 'text', 'score', 'rank'])

    def __repr__(self):
        if self.mode == 'authors':
            kind = 'Rel, sorted by label, highest first' if self.relevant else 'NRel, sorted by label, lowest first'
        else:
            kind = (f'Rel, {self.labels}' if self.relevant else
                    f'NRel, label<={self.nonrelevant_max_label}' + (', unjudged filled' if self.fill_unjudged else ''))
        return f'OracleSampler({kind}, mode={self.mode!r}, num_results={self.num_results}, seed={self.seed})'
