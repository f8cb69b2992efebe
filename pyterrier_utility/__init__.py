"""Does the relevance a retriever achieves reach the answer a RAG reader generates?

PyTerrier transformers and measures for context utility (Tian, Ganguly & Macdonald, ECIR 2025),
eRAG and LLM-retEval.
"""
from . import backends, cosmix, datasets, errors, experiment, reader
from .bertscore import BertScore
from .cache import GenerationCache
from .correlation import rank_correlation
from .erag import ERAGLabeller
from .fbert import FBertScorer
from .measures import ERAG_P, FBERT, FBERT0, ERAG_Hit, RetEval, Utility, erag_measure
from .oracle import OracleSampler
from .order import LostInTheMiddle, Ordering, Permutation, ReverseOrder, Window, permutations
from .reader import Reader
from .reteval import LLMRetEval
from .runs import RunFile
from .utility import UtilityEvaluator

__version__ = '0.1.0'

__all__ = ['BertScore', 'ERAGLabeller', 'ERAG_Hit', 'ERAG_P', 'FBERT', 'FBERT0', 'FBertScorer',
           'GenerationCache', 'LLMRetEval', 'LostInTheMiddle', 'OracleSampler', 'Ordering', 'Permutation',
           'Reader', 'RetEval', 'ReverseOrder', 'RunFile', 'Utility', 'UtilityEvaluator', 'Window',
           'backends', 'cosmix', 'datasets', 'erag_measure', 'errors', 'experiment', 'permutations',
           'rank_correlation', 'reader']
