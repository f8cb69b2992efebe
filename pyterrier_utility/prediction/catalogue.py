"""The catalogue of signals a study is predicted by: which predictors, with which settings, over which
frame, and what each is (recorded in the study's ``settings.json`` as its signals).

Example::

    import pyterrier_utility as pu
    stats = pu.prediction.TermStatistics.from_texts(dataset.texts.values())
    signals = pu.prediction.Catalogue.of(stats, pu.prediction.PredictionParameters(), k=5)
    for predictor, text in signals.query:
        print(predictor.column, text)
    ranked = (bm25 % 100)(topics)
    scores = [predictor(ranked) for predictor, _ in signals.ranking]
"""
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

from .abstention import NoResponse
from .answers import AnswerConfidence
from .dense import APairRatio, Spatial
from .parameters import PredictionParameters
from .perplexity import PERPLEXITY_AGGREGATIONS, ContextPerplexity
from .readability import READABILITY, Readability
from .scores import NQC, SMV, WIG, AuthorsNQC, MaxScore
from .terms import SCQ, MaxIDF, MeanIDF, TermStatistics
from .udcg import UDCG

#: A predictor and what it is, where it comes from.
Entry = Tuple[Any, str]

#: The measures of the context the study computes beside the predictors, and what each is.
MEASURES = {
    'nDCG@k': "the study's nDCG@k of the context (per_query.csv)",
    UDCG.column: ("UDCG (Trappolini et al., EACL 2026): sigmoid of the mean over the context's documents of w "
                  '(1 - p(NO-RESPONSE | query, document alone)), w = 1 relevant as the label set says, -1/3 '
                  'otherwise; the reader by a forward pass'),
    **{f'{m}@k': f'ir_measures {m}@k of the context, relevant as the label set says' for m in ('P', 'AP', 'RR')},
}


@dataclass(frozen=True)
class Catalogue:
    """The predictors of a study's signals, by the frame each reads.

    Attributes:
        query: over the query's terms, before retrieval (a frame of ``qid``, ``query``).
        ranking: over a retrieval system's ranking, whatever the context's k and order.
        context: over each context as the reader saw it (``rank`` and ``score`` from its positions).
        answers: the k-shot and the 0-shot answers' confidence, over ``answers.csv``.
        no_response: with ``udcg``, the reader's NO-RESPONSE probability of each (query, document) of a
            context, which :class:`~.udcg.UDCG` reads; else ``None``.
    """
    query: Tuple[Entry, ...]
    ranking: Tuple[Entry, ...]
    context: Tuple[Entry, ...]
    answers: Tuple[Entry, ...]
    no_response: Optional[NoResponse] = None

    @classmethod
    def of(cls, statistics: TermStatistics, settings: PredictionParameters, k: int, backend: Any = None,
           verbose: bool = True) -> 'Catalogue':
        """The catalogue for ``settings``.

        Args:
            statistics: the collection's term statistics (the query-term predictors and the authors' NQC).
            settings: the prediction's parameters (depths, ``apair_k``, ``wig_k``, ``perplexity``, ``udcg``).
            k: the largest context size (Spatial's).
            backend: the reader's in-process model, for ``perplexity`` and ``udcg``.
            verbose: progress bars of A-Pair-Ratio, the perplexity and NO-RESPONSE.

        Example::

            signals = Catalogue.of(stats, PredictionParameters(udcg=True), k=5, backend=reader_model)
        """
        a_pair = APairRatio(settings.apair_k, verbose=verbose)
        context: Tuple[Entry, ...] = (
            (Spatial(k=k).sharing(a_pair), "-log volume of the box of query and context embeddings, MiniLM (the "
             "authors' code)"),
            *((Readability(f), f'textstat {READABILITY[f]} of the context joined') for f in READABILITY))
        if settings.perplexity:
            scorers = [ContextPerplexity(backend, agg, verbose=verbose) for agg in PERPLEXITY_AGGREGATIONS]
            context += tuple((p.sharing(scorers[0]), f"the reader's perplexity of the context's documents ({p.agg}) "
                              'by a forward pass') for p in scorers)
        return cls(
            query=((MaxIDF(statistics), 'max log(N/df) of the query terms (He & Ounis 2004)'),
                   (MeanIDF(statistics), 'mean log(N/df) of the query terms (He & Ounis 2004)'),
                   (SCQ(statistics, 'max'), 'MaxSCQ (Zhao, Scholer & Tsegay, ECIR 2008)')),
            ranking=((NQC(settings.depth), 'std of the top scores / |mean score of the ranking| (Shtok et al., TOIS '
                      '2012)'),
                     (AuthorsNQC(statistics, settings.depth), "variance of the top scores x max BM25 IDF (the authors' "
                      'code)'),
                     (WIG(settings.wig_k), 'WIG (Zhou & Croft, SIGIR 2007), mean score of the ranking as score(D)'),
                     (SMV(settings.depth), 'SMV (Tao & Wu, CIKM 2014), mean score of the ranking as score(D)'),
                     (MaxScore(), 'the top score'),
                     (a_pair, "A-Pair-Ratio, MiniLM embeddings (the authors' code)")),
            context=context,
            answers=((AnswerConfidence(), 'mean over samples of the k-shot answers\' mean token log-probability'),
                     (AnswerConfidence('confidence_0shot'), 'the same of the 0-shot answers')),
            no_response=NoResponse(backend, verbose=verbose) if settings.udcg else None)

    @property
    def definitions(self) -> Dict[str, str]:
        """Signal -> what it is and where it comes from, the predictor's settings after (its repr), in the
        order of the signals' columns: the predictors, then :data:`MEASURES` (UDCG with ``udcg`` only)."""
        entries = (*self.query, *self.ranking, *self.context, *self.answers)
        found = {p.column: f'{text}; {p!r}' for p, text in entries}
        found.update((name, text) for name, text in MEASURES.items()
                     if name != UDCG.column or self.no_response is not None)
        return found
