"""Which document carried the utility: each context document's share of v(all) - v(empty), where
v(S) is the answer quality P the reader reaches from the documents of S alone."""
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import pyterrier as pt

from ..._checks import check_int, check_number
from ..._frames import normalise_frame, validate_columns
from ..._messages import warn_qids
from ...protocols import AnswerScorer
from ...reader import Reader
from ...schema import ATTRIBUTION_VALUES, PER_QUERY_MAY_BE_EMPTY
from ...scoring.utility import UtilityEvaluator, utility
from . import games


class ContextAttribution(pt.Transformer):
    """Adds each context document's attribution: how much of the context's gain in answer quality
    it carried.

    Placed after a ranking cut to k (``bm25 % 5 >> ContextAttribution(reader, scorer)``), it plays,
    for each query, the game whose value v(S) is the answer quality P (mean over the reader's
    samples, exactly as :class:`~pyterrier_utility.UtilityEvaluator` computes P_k) of the reader's
    answer when the prompt holds the documents at the positions S only, in their original relative
    order; v(empty) is P_0, from the 0-shot prompt, and v(all) is P_k. The ``method``
    (:mod:`~pyterrier_utility.methods.attribution.games`) splits v(all) - v(empty) among the
    positions: ``'shapley'`` exactly (2^k coalitions, k <= 10); within a ``budget`` of coalition
    evaluations, ``'permutation'`` by sampling orders of the documents, ``'kernelshap'`` by a weighted
    regression on sampled coalitions, ``'tmc'`` by sampled orders truncated once a prefix is within
    ``tolerance`` of v(all), and ``'contextcite'`` by ContextCite's Lasso on sampled ablations; and
    ``'loo'`` (leave one out) and ``'single'`` (each document alone, as eRAG). The prompts of every coalition of every
    query go to the reader in one call, so the generation cache and batching serve them all. The
    whole context (the pipeline's own k-shot prompt) and the empty one (its 0-shot prompt) are
    evaluated for every method, so P_k and P_0 are always known and a study's answers are reused.

    Output: the input rows (a document given twice for a query is kept once, at its first rank, as
    the reader gives it; a query without documents is left out; both warned), in rank order, with
    ``position`` (1-based, Context 1 first), ``phi``, ``phi_utility`` (phi / v(empty), NaN where
    v(empty) is 0), ``method`` and ``stderr`` (permutation's standard error of phi; NaN for the
    other methods), and the query's ``quality`` (v(all) = P_k), ``quality_0shot`` (v(empty) = P_0) and
    ``utility`` (U), so :data:`~pyterrier_utility.FBERT` and :data:`~pyterrier_utility.Utility`
    evaluate it in ``pt.Experiment`` beside nDCG@k. For ``shapley`` and ``permutation`` the
    ``phi_utility`` of a query sum to its U; for ``loo`` and ``single`` only when the documents do
    not interact.

    Args:
        reader: the :class:`~pyterrier_utility.Reader` (its backend, samples and seed).
        scorer: the answer-quality scorer, as for :class:`~pyterrier_utility.UtilityEvaluator`
            (:class:`~pyterrier_utility.FBertScorer`: the paper's FBERT).
        method: one of :data:`~pyterrier_utility.vocabulary.ATTRIBUTION_METHODS`.
        budget: the coalition evaluations per query of the sampling methods (``'permutation'``,
            ``'kernelshap'``, ``'tmc'``, ``'contextcite'``), v(empty) and v(all) among them; required for
            them, refused for the others.
        seed: the seed of the sampling methods' draws (the same draws for every query).
        tolerance: ``'tmc'``'s truncation, a fraction of the context's gain.

    Example::

        attribution = ContextAttribution(reader, FBertScorer(qrels, dataset.texts, model_type='minilm'))
        shares = (dataset.bm25() % 5 >> attribution)(topics)
        shares.groupby('position')['phi_utility'].mean()
    """

    def __init__(self, reader: Reader, scorer: AnswerScorer, method: str = 'shapley', budget: Optional[int] = None,
                 seed: int = 0, tolerance: float = games.TOLERANCE):
        games.check_method(method, budget)
        check_int('ContextAttribution', 'seed', seed, 0)
        self.tolerance = check_number('ContextAttribution', 'tolerance', tolerance, 0)
        self.evaluator = UtilityEvaluator(reader, scorer)  # refuses a reader that is not ours
        self.reader = reader
        self.scorer = scorer
        self.method = method
        self.budget = budget
        self.seed = seed

    def _contexts(self, inp: pd.DataFrame, by: List[str]) -> pd.DataFrame:
        """The documents of each context, in rank order, each once, with their ``position``."""
        validate_columns(self, inp, ['qid', 'query', 'docno', 'text'] + by)
        frame = normalise_frame(repr(self), inp, missing_docno_ok=True)
        nothing = frame[frame['docno'].isna()]
        warn_qids(f'{self!r}: no document retrieved; nothing to attribute', nothing['qid'])
        frame = frame[frame['docno'].notna()]
        keys = ['_context'] + (['rank'] if 'rank' in frame.columns else [])
        frame = frame.assign(_context=frame.groupby(by, sort=False).ngroup()).sort_values(keys, kind='stable')
        twice = frame.duplicated(['_context', 'docno'])
        warn_qids(f'{self!r}: duplicate docno in the ranking, attributed once at its first rank',
                  frame.loc[twice, 'qid'])
        frame = frame[~twice]
        return frame.assign(position=frame.groupby('_context').cumcount() + 1).reset_index(drop=True)

    def _values(self, contexts: pd.DataFrame, by: List[str], wanted: Dict[int, List[games.Coalition]]
                ) -> pd.DataFrame:
        """The value of the coalitions ``wanted`` of each context (its ``_context`` number), the empty
        one from the 0-shot prompt: ``_context``, ``by``, ``coalition`` (:func:`~.games.coalition_name`)
        and ``quality``, the empty one first per context, then as asked. The prompts of every context go
        to the reader in one call, the 0-shot ones with them, so the evaluator finds them all answered."""
        rows, names = [], []
        for context, docs in contexts.groupby('_context', sort=False):
            for coalition in wanted.get(context, []):
                if coalition:
                    rows.extend(docs.index[[p - 1 for p in sorted(coalition)]])
                    names.extend([games.coalition_name(coalition)] * len(coalition))
        frame = contexts.loc[rows].assign(coalition=names)
        key = by + ['coalition']
        firsts = contexts.drop_duplicates('_context')
        zero = firsts[firsts['_context'].isin(wanted)][by + ['query']].assign(coalition='')
        _, answered = self.reader.answer_frames([zero, frame.drop(columns='_context')], by=key)
        groups = self.evaluator.evaluate(answered, by=key)[0]
        context_of = firsts.set_index(by)['_context']
        groups = groups.assign(_context=context_of.reindex(pd.MultiIndex.from_frame(groups[by])
                                                           if len(by) > 1 else groups[by[0]]).values)
        empty = groups.drop_duplicates('_context').assign(coalition='', quality=lambda g: g['quality_0shot'])
        empty = empty[[frozenset() in wanted[c] for c in empty['_context']]]
        values = pd.concat([empty, groups[groups['coalition'] != '']], ignore_index=True)
        return values.sort_values('_context', kind='stable')[['_context'] + key + ['quality']]

    def coalitions_of(self, contexts: pd.DataFrame, by: List[str]) -> Tuple[Dict[int, Dict], pd.DataFrame]:
        """Plays each context's game as far as the method reads it: the coalitions it asks for, in
        rounds (one round for every method but ``tmc``, whose walks ask for their next coalition given
        the values so far), v(empty) and v(all) always. Returns each context's values by coalition and
        the frame of :meth:`_values` of every coalition evaluated."""
        sizes = contexts.groupby('_context', sort=False).size()
        known: Dict[int, Dict[games.Coalition, float]] = {c: {} for c in sizes.index}
        frames: List[pd.DataFrame] = []
        while True:
            wanted: Dict[int, List[games.Coalition]] = {}
            for context, k in sizes.items():
                asked = games.coalitions(k, self.method, self.budget, self.seed, self.tolerance, known[context])
                asked = list(dict.fromkeys([frozenset(), *asked, games.everyone(k)]))
                wanted[context] = [c for c in asked if c not in known[context]]
            wanted = {c: asked for c, asked in wanted.items() if asked}
            if not wanted:
                return known, pd.concat(frames, ignore_index=True).sort_values('_context', kind='stable')
            values = self._values(contexts, by, wanted)
            for context, coalition, value in zip(values['_context'], values['coalition'], values['quality']):
                known[context][games.parse_coalition(coalition)] = float(value)
            frames.append(values)

    def evaluate(self, inp: pd.DataFrame, by: Sequence[str] = ('qid',)) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """The attribution of the contexts of ``inp``, each context the rows of one group of ``by``
        (``('qid',)`` in a pipeline; ``('system', 'k', 'qid')`` when one frame holds every context
        of a study): the documents with ``position``, the attribution and the context's P_k, P_0 and
        U (as :meth:`transform`), and the value of every coalition evaluated (``by``,
        ``coalition`` (:func:`~.games.coalition_name`), ``value``; per context the empty one first,
        then as the method asked for them, the whole context with the first)."""
        by = list(by)
        contexts = self._contexts(inp, by)
        if contexts.empty:
            added = {c: pd.Series(dtype=object if c == 'method' else bool if c == 'efficient' else float)
                     for c in ATTRIBUTION_VALUES + PER_QUERY_MAY_BE_EMPTY}
            return (contexts.drop(columns='_context').assign(**added),
                    pd.DataFrame({c: pd.Series(dtype=float if c == 'value' else object)
                                  for c in by + ['coalition', 'value']}))
        known, values = self.coalitions_of(contexts, by)
        sizes = contexts.groupby('_context', sort=False).size()
        estimates = {c: games.estimate(known[c].__getitem__, k, self.method, self.budget, self.seed, self.tolerance)
                     for c, k in sizes.items()}
        p_0 = contexts['_context'].map({c: v[frozenset()] for c, v in known.items()}).astype(float)
        p_k = contexts['_context'].map({c: known[c][games.everyone(k)] for c, k in sizes.items()}).astype(float)
        index = contexts['position'] - 1
        phi = np.array([estimates[c].phi[i] for c, i in zip(contexts['_context'], index)])
        with np.errstate(divide='ignore', invalid='ignore'):
            share = np.where(p_0 == 0, np.nan, phi / p_0.to_numpy())
        rows = contexts.assign(phi=phi, phi_utility=share, method=self.method,
                               stderr=[estimates[c].stderr[i] for c, i in zip(contexts['_context'], index)],
                               efficient=self.method in games.EFFICIENT,
                               quality=p_k, quality_0shot=p_0, utility=utility(p_k, p_0))
        coalitions = values[by + ['coalition', 'quality']].rename(columns={'quality': 'value'}).reset_index(drop=True)
        return rows.drop(columns='_context'), coalitions

    def coalition_values(self, inp: pd.DataFrame) -> pd.DataFrame:
        """The value of every coalition evaluated for each query of ``inp``: ``qid``, ``coalition``
        (positions ascending, space-separated; '' for the empty one, v(empty) = P_0), ``value``."""
        return self.evaluate(inp)[1]

    def values_of(self, inp: pd.DataFrame, wanted: Callable[[int], Sequence[games.Coalition]],
                  by: Sequence[str] = ('qid',)) -> pd.DataFrame:
        """The value of the coalitions ``wanted(k)`` of each context of ``inp`` (of k documents; the
        contexts as :meth:`evaluate` groups them), whatever the method: ``by``, ``coalition``, ``value``.
        Held-out coalitions (:func:`~.quality.held_out`) are evaluated so."""
        by = list(by)
        contexts = self._contexts(inp, by)
        sizes = contexts.groupby('_context', sort=False).size()
        values = self._values(contexts, by, {c: list(wanted(k)) for c, k in sizes.items()})
        return values[by + ['coalition', 'quality']].rename(columns={'quality': 'value'}).reset_index(drop=True)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        return self.evaluate(inp)[0]

    def __repr__(self):
        budget = '' if self.budget is None else f', budget={self.budget}, seed={self.seed}'
        budget += f', tolerance={self.tolerance:g}' if self.method == 'tmc' else ''
        return f'ContextAttribution({self.reader!r}, {self.scorer!r}, method={self.method!r}{budget})'
