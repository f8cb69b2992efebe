"""Does the relevance a retriever achieves reach the answer a RAG reader generates?

PyTerrier transformers and measures for context utility (Tian, Ganguly & Macdonald, ECIR 2025),
eRAG and LLM-retEval.
"""
from . import backends, cosmix, datasets, errors, experiment, models, prompts, protocols, reader, settings
from .bertscore import BertScore
from .cache import GenerationCache
from .correlation import rank_correlation
from .erag import ERAGLabeller
from .fbert import FBertScorer
from .measures import ERAG_P, FBERT, FBERT0, ERAG_Hit, RetEval, Utility, erag_measure
from .oracle import OracleSampler
from .order import LostInTheMiddle, Ordering, Permutation, ReverseOrder, Window, permutations
from .prompts import PROMPT_FORMATS, PromptFormat
from .reader import Reader
from .reteval import LLMRetEval
from .runs import RunFile
from .settings import Decoding, LabelSet
from .utility import UtilityEvaluator

from ._version import __version__  # noqa: E402

__all__ = ['BertScore', 'Decoding', 'ERAGLabeller', 'ERAG_Hit', 'ERAG_P', 'FBERT', 'FBERT0', 'FBertScorer',
           'GenerationCache', 'LLMRetEval', 'LabelSet', 'LostInTheMiddle', 'OracleSampler', 'Ordering', 'Permutation',
           'PROMPT_FORMATS', 'PromptFormat', 'Reader', 'RetEval', 'ReverseOrder', 'RunFile', 'Utility', 'UtilityEvaluator', 'Window',
           'backends', 'cosmix', 'datasets', 'erag_measure', 'errors', 'experiment', 'models', 'permutations',
           'prompts', 'protocols', 'rank_correlation', 'reader', 'settings']
