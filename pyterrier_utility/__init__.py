"""Does the relevance a retriever achieves reach the answer a RAG reader generates?

PyTerrier transformers and measures for context utility (Tian, Ganguly & Macdonald, ECIR 2025),
eRAG and LLM-retEval.
"""
from . import backends, cosmix, datasets, errors, experiment, models, protocols, reader, settings
from .bertscore import BertScore
from .cache import GenerationCache
from .erag import ERAGLabeller, rank_correlation
from .fbert import FBertScorer
from .measures import ERAG_P, FBERT, FBERT0, ERAG_Hit, RetEval, Utility, erag_measure
from .oracle import OracleSampler
from .order import ReverseOrder
from .reader import Reader
from .reteval import LLMRetEval
from .runs import RunFile
from .settings import Decoding, LabelSet
from .utility import UtilityEvaluator

from ._version import __version__  # noqa: E402

__all__ = ['BertScore', 'ERAGLabeller', 'ERAG_Hit', 'ERAG_P', 'FBERT', 'FBERT0', 'FBertScorer', 'GenerationCache',
           'LLMRetEval', 'OracleSampler', 'Reader', 'RetEval', 'ReverseOrder', 'RunFile', 'Utility', 'UtilityEvaluator',
           'backends', 'cosmix', 'datasets', 'erag_measure', 'errors', 'experiment', 'models', 'protocols',
           'rank_correlation', 'reader', 'settings', 'Decoding', 'LabelSet']
