"""Does the relevance a retriever achieves reach the answer a RAG reader generates?

PyTerrier transformers and measures for context utility (Tian, Ganguly & Macdonald, ECIR 2025),
eRAG and LLM-retEval.
"""
from . import backends, datasets, reader
from .bertscore import BertScore
from .cache import GenerationCache
from .fbert import FBertScorer
from .measures import FBERT, FBERT0, Utility
from .oracle import OracleSampler
from .order import ReverseOrder
from .reader import Reader
from .utility import UtilityEvaluator

__version__ = '0.1.0'

__all__ = ['BertScore', 'FBERT', 'FBERT0', 'FBertScorer', 'GenerationCache', 'OracleSampler',
           'Reader', 'ReverseOrder', 'Utility', 'UtilityEvaluator', 'backends', 'datasets']
