"""COS-Mix as one retriever-like transformer: the contexts its final answer used, and which branch gave them."""
import copy
from typing import List, Optional

import pandas as pd
import pyterrier as pt

from ..._checks import check_int
from ..._frames import normalise_frame, validate_columns
from ...contexts.order import LostInTheMiddle
from ...reader import Reader
from ...rerankers import reranker as cached_reranker
from .partition import CorpusEmbeddings, SparsePartition
from .retrieval import DenseRetriever, HybridRetriever
from .validator import Validator


class COSMix(pt.Transformer):
    """COS-Mix at context size ``k``: the hybrid retriever over R gives its top k documents, reordered
    as in "Lost in the Middle" (COS-Mix's reference [13]: :class:`~pyterrier_utility.LostInTheMiddle`,
    the best at both ends); the reader answers from them and the validator judges the answer; where it
    is not satisfactory, the fallback (the hybrid retriever over the sparse documents S, re-ranked)
    gives the k documents instead, in the re-ranker's order as COS-Mix does.

    Output: a result frame of the contexts the final answer used (``qid``, ``query``, ``docno``,
    ``text``, ``score``, ``rank``) in the order the reader saw them (``rank`` from 0, ``score``
    decreasing along it), with ``branch`` (``'R'`` or ``'S'``) and ``validated`` (the verdict on the R
    answer) on each row. ``record`` keeps one row per query and k of every call.

    Because the fallback depends on the answer from the top k, COS-Mix at k is not the top k of
    COS-Mix at a larger k: ``COSMix(...) % k`` is COS-Mix at k (fused), and a study runs it once per k.

    Args:
        reader: the reader whose answer is validated (the study's reader: its answers are cached).
        validator: a :class:`Validator`.
        first: the hybrid retriever over R.
        fallback: the retrieval over S with its re-ranker (e.g. ``hybrid_s >> reranker``).
        k: the context size.
        reorder: the ordering of the R branch's k documents (default: lost in the middle; ``None``:
            the fused order).

    Example::

        cosmix = cosmix_system(dataset, reader)
        (cosmix % 3)(topics)
    """
    cutoff_changes_contexts = True
    #: The sparse/other split, where :func:`cosmix_system` made it (to inspect).
    partition: SparsePartition

    def __init__(self, reader: Reader, validator: Validator, first: pt.Transformer, fallback: pt.Transformer,
                 k: int = 5, reorder: Optional[pt.Transformer] = LostInTheMiddle()):
        check_int('COSMix', 'k', k, 1)
        self.reader = reader
        self.validator = validator
        self.first = first
        self.fallback = fallback
        self.k = k
        self.reorder = reorder
        self.record: List[pd.DataFrame] = []

    def fuse_rank_cutoff(self, k: int) -> 'COSMix':
        fused = copy.copy(self)
        fused.k = k
        return fused

    def _top(self, retriever: pt.Transformer, topics: pd.DataFrame) -> pd.DataFrame:
        ranking = retriever.transform(topics)
        ranking = ranking.sort_values(['qid', 'rank'], kind='stable') if 'rank' in ranking.columns else ranking
        ranking = ranking.assign(rank=ranking.groupby('qid').cumcount())
        return ranking[ranking['rank'] < self.k]

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query'])
        topics = normalise_frame(repr(self), inp[['qid', 'query']].drop_duplicates()).reset_index(drop=True)
        first = self._top(self.first, topics)
        first = self.reorder.transform(first) if self.reorder is not None and len(first) else first
        prompts = self.reader.prompter.prompts(first) if len(first) else {}
        prompts = {qid: prompts.get(qid, self.reader.prompter.build_prompt(str(q)))
                   for qid, q in zip(topics['qid'], topics['query'])}
        answers = dict(zip(prompts, (a[0].text for a in self.reader.answer(list(prompts.values())))))
        ok = dict(zip(topics['qid'], self.validator.validate(topics['query'].astype(str).tolist(),
                                                               [answers[q] for q in topics['qid']])))
        retry = topics[~topics['qid'].map(ok)]
        second = self._top(self.fallback, retry) if len(retry) else first.iloc[0:0]
        out = pd.concat([first[first['qid'].map(ok)].assign(branch='R'), second.assign(branch='S')], ignore_index=True)
        out = out.assign(validated=out['qid'].map(ok))
        self.record.append(pd.DataFrame({'qid': topics['qid'], 'k': self.k, 'validated': topics['qid'].map(ok),
                                         'branch': ['R' if ok[q] else 'S' for q in topics['qid']]}))
        columns = ['qid', 'query', 'docno', 'text', 'score', 'rank', 'branch', 'validated']
        return out[columns].sort_values(['qid', 'rank'], kind='stable').reset_index(drop=True)

    def branches(self) -> pd.DataFrame:
        """Every call's branch per query and k: ``qid``, ``k``, ``validated``, ``branch``."""
        return (pd.concat(self.record, ignore_index=True).drop_duplicates(['qid', 'k'], keep='last')
                if self.record else pd.DataFrame(columns=['qid', 'k', 'validated', 'branch']))

    def __repr__(self):
        return f'COSMix(k={self.k}, {self.first!r} >> {self.reorder!r}, fallback {self.fallback!r})'


def cosmix_system(dataset, reader: Reader, *, validator: Optional[Validator] = None, threshold: float = 0.65,
                  depth: int = 100, reranker: str = 'dense', k: int = 5) -> COSMix:
    """COS-Mix over a dataset: MiniLM embeddings of the corpus, the sparse/other split at
    ``threshold``, hybrid BM25 + dense retrievers over R and over S, the fallback re-ranked by
    ``reranker`` (``'dense'``: the offline MiniLM; ``'monot5'``: MonoT5), and the validator (default:
    the reader's own backend, as COS-Mix validates with the LLM that answered).

    Example::

        systems = dict(default_systems(d, qrels), COSMix=cosmix_system(d, reader))
    """
    embeddings = CorpusEmbeddings(dataset.texts)
    partition = SparsePartition(embeddings, threshold)
    bm25 = dataset.bm25(num_results=max(depth, 1000))

    def hybrid(subset):
        return HybridRetriever(bm25, DenseRetriever(embeddings, dataset.texts, subset, num_results=depth), subset,
                               num_results=depth)
    rerank = cached_reranker(reranker, dataset.corpus_name)
    cosmix = COSMix(reader, validator or Validator(reader.cache), hybrid(partition.rest),
                    hybrid(partition.sparse) >> rerank, k=k)
    cosmix.partition = partition
    return cosmix
