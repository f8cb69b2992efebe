"""Does the relevance a retriever achieves reach the answer a RAG reader generates?

PyTerrier transformers and measures for context utility (Tian, Ganguly & Macdonald, ECIR 2025),
eRAG and LLM-retEval.

Names are imported when first used (PEP 562), so ``pyterrier-utility --help`` does not wait for
PyTerrier and torch; ``import pyterrier_utility as pu; pu.Reader`` works as usual. The package's
own warnings print as one plain line (:class:`~pyterrier_utility.errors.UtilityWarning`).
"""
from ._lazy import lazy_module
from ._onednn import bound_primitive_cache
from ._version import __version__ as __version__
from .errors import plain_warnings

#: Public name -> the module defining it.
_NAMES = {
    'BertScore': 'scoring.bertscore', 'ContextAttribution': 'methods.attribution', 'Decoding': 'settings',
    'DocumentUtility': 'methods.llm_utility', 'UtilityOracle': 'methods.llm_utility',
    'utility_pool': 'methods.llm_utility',
    'ERAGLabeller': 'methods.erag', 'ERAG_Hit': 'measures',
    'ERAG_P': 'measures', 'FBERT': 'measures', 'FBERT0': 'measures', 'FBertScorer': 'scoring.fbert',
    'GenerationCache': 'cache', 'GoldAnswerScorer': 'scoring.gold', 'GridWindow': 'contexts.order',
    'JudgeScorer': 'scoring.judge', 'NuggetScorer': 'scoring.nuggets',
    'LLMRetEval': 'methods.reteval', 'LabelSet': 'settings', 'LostInTheMiddle': 'contexts.order',
    'OracleSampler': 'contexts.oracle', 'Ordering': 'contexts.order', 'PROMPT_FORMATS': 'prompt_formats',
    'Permutation': 'contexts.order', 'PromptFormat': 'prompt_formats', 'Prompter': 'prompter', 'Reader': 'reader',
    'RetEval': 'measures', 'ReverseOrder': 'contexts.order', 'RunFile': 'contexts.runs', 'Utility': 'measures',
    'UtilityEvaluator': 'scoring.utility', 'Window': 'contexts.order', 'erag_measure': 'measures',
    'permutations': 'contexts.order', 'rank_correlation': 'scoring.correlation',
    'quality_table': 'methods.attribution', 'utility_qrels': 'methods.attribution',
}
_MODULES = ('backends', 'cache', 'commands', 'contexts', 'datasets', 'engines', 'errors', 'generation',
            'interop', 'measures', 'methods', 'prediction', 'prompt_formats', 'prompter', 'protocols', 'qualities',
            'reader', 'report', 'rerankers', 'schema', 'scoring', 'settings', 'study', 'verdict', 'vocabulary')

__all__ = sorted([*_NAMES, *_MODULES])
__getattr__, __dir__ = lazy_module(globals(), _NAMES, _MODULES)
plain_warnings()
bound_primitive_cache()
