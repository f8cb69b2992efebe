"""What predicts the utility of a context and the quality of an answer (Tian, Ganguly & Macdonald,
ECIR 2026): query-performance predictors, readability, IR measures, UDCG and the reader's
confidence, each a transformer adding one query-level column to a ranking, and their meta-evaluation
(:mod:`.evaluation`).

Example::

    import pyterrier_utility as pu
    stats = pu.prediction.TermStatistics.from_texts(dataset.texts.values())
    signals = bm25 >> pu.prediction.NQC(k=100) >> pu.prediction.MaxIDF(stats)

Modules are imported when first used.
"""
from .._lazy import lazy_module

#: Public name -> the module defining it.
_NAMES = {
    'APairRatio': 'dense', 'AnswerConfidence': 'answers', 'AuthorsNQC': 'scores', 'Catalogue': 'catalogue',
    'ContextMeasure': 'measures', 'ContextPerplexity': 'perplexity', 'MaxIDF': 'terms', 'MaxScore': 'scores',
    'MeanIDF': 'terms', 'NQC': 'scores', 'NoResponse': 'abstention', 'PredictionParameters': 'parameters',
    'QueryPredictor': '_base', 'READABILITY': 'readability', 'Readability': 'readability', 'SCQ': 'terms',
    'SMV': 'scores', 'Spatial': 'dense', 'TermStatistics': 'terms', 'UDCG': 'udcg', 'WIG': 'scores',
}
_MODULES = ('abstention', 'answers', 'catalogue', 'dense', 'evaluation', 'measures', 'parameters', 'perplexity',
            'readability', 'scores', 'terms', 'udcg')
__all__ = sorted([*_NAMES, *_MODULES])
__getattr__, __dir__ = lazy_module(globals(), _NAMES, _MODULES)
