"""Does the relevance a retriever achieves reach the answer a RAG reader generates?

PyTerrier transformers and measures for context utility (Tian, Ganguly & Macdonald, ECIR 2025),
eRAG and LLM-retEval.

Names are imported when first used (PEP 562), so ``pyterrier-utility --help`` does not wait for
PyTerrier and torch; ``import pyterrier_utility as pu; pu.Reader`` works as usual.
"""
from ._lazy import lazy_module
from ._version import __version__ as __version__

#: Public name -> the module defining it.
_NAMES = {
    'BertScore': 'bertscore', 'Decoding': 'settings', 'ERAGLabeller': 'erag', 'ERAG_Hit': 'measures',
    'ERAG_P': 'measures', 'FBERT': 'measures', 'FBERT0': 'measures', 'FBertScorer': 'fbert',
    'GenerationCache': 'cache', 'GoldAnswerScorer': 'gold', 'GridWindow': 'order', 'LLMRetEval': 'reteval',
    'LabelSet': 'settings',
    'LostInTheMiddle': 'order',
    'OracleSampler': 'oracle', 'Ordering': 'order', 'PROMPT_FORMATS': 'prompts', 'Permutation': 'order',
    'PromptFormat': 'prompts', 'Prompter': 'prompter', 'Reader': 'reader',
    'RetEval': 'measures', 'ReverseOrder': 'order', 'RunFile': 'runs', 'Utility': 'measures',
    'UtilityEvaluator': 'utility', 'Window': 'order', 'erag_measure': 'measures', 'permutations': 'order',
    'rank_correlation': 'correlation',
}
_MODULES = ('backends', 'bertscore', 'cache', 'correlation', 'cosmix', 'datasets', 'erag', 'errors', 'experiment',
            'fbert', 'gold', 'interop', 'measures', 'models', 'oracle', 'order', 'prompter', 'prompts', 'protocols',
            'reader', 'reteval', 'runs', 'settings', 'utility', 'vocabulary')

__all__ = sorted([*_NAMES, *_MODULES])
__getattr__, __dir__ = lazy_module(globals(), _NAMES, _MODULES)
