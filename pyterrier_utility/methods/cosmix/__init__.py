"""COS-Mix (cosine similarity and cosine distance fusion for RAG retrieval) as a system of the study.

The parts compose on their own: :class:`CorpusEmbeddings` and :class:`SparsePartition` (index
time), :class:`DenseRetriever` and :class:`HybridRetriever` (BM25 and dense retrieval fused by
reciprocal rank fusion, over a subset of the corpus), :class:`Validator` (the LLM judging its own
answer, greedily) and :class:`COSMix`, the retriever-like transformer a study evaluates, which gives
the reader the fused top k reordered as in "Lost in the Middle".
"""
from .cosmix import COSMix, cosmix_system
from .partition import CorpusEmbeddings, SparsePartition
from .retrieval import DenseRetriever, HybridRetriever, reciprocal_rank_fusion
from .validator import VALIDATION_PROMPT, Validator

__all__ = ['COSMix', 'CorpusEmbeddings', 'DenseRetriever', 'HybridRetriever', 'SparsePartition', 'VALIDATION_PROMPT',
           'Validator', 'cosmix_system', 'reciprocal_rank_fusion']
