"""Attribution over a study's contexts: per label set, each method's shares of every context, the
coalitions they read (each answered once for all the methods), and, on held-out coalitions, each
method's quality.

Example::

    contexts = study_contexts(topics, qrels, systems, ks=[3], label_sets=[LabelSet.parse('2')])
    found = sweep(contexts, reader, lambda labels: FBertScorer(qrels, texts, labels=labels), qrels,
                  [LabelSet.parse('2')], methods=['kernelshap', 'loo'], budget=16, evaluate=4)
    found.attribution.groupby('method')['phi_utility'].describe()
"""
from typing import Any, Callable, List, NamedTuple, Optional, Sequence, Union

import pandas as pd

from ..._checks import check_int
from ..._messages import warn_qids
from ...errors import SettingError
from ...schema import ATTRIBUTION_COLUMNS, CELL, COALITION_COLUMNS
from ...settings import LabelSet
from ...vocabulary import MAX_REFERENCE_K
from .games import SAMPLED, check_method
from .quality import held_out, quality_table
from .transformer import ContextAttribution


class Sweep(NamedTuple):
    """What :func:`sweep` finds.

    Attributes:
        coalitions: the value of every coalition evaluated, the methods that read it and whether it
            is held out (:data:`~pyterrier_utility.schema.COALITION_COLUMNS`).
        attribution: each context document's share, per label set and method
            (:data:`~pyterrier_utility.schema.ATTRIBUTION_COLUMNS`).
        quality: with ``evaluate``, each method's quality per context
            (:data:`~pyterrier_utility.schema.QUALITY_COLUMNS`), else ``None``.
    """
    coalitions: pd.DataFrame
    attribution: pd.DataFrame
    quality: Optional[pd.DataFrame]


def methods_of(methods: Union[str, Sequence[str]], budget: Optional[int], evaluate: Optional[int] = None) -> List[str]:
    """The methods asked for (one or several, each once), checked; ``budget`` goes to those of them
    that sample, and a budget no method takes is refused; ``evaluate``, where given, is checked too.

    Example::

        methods_of(['kernelshap', 'loo', 'kernelshap'], 16)  # ['kernelshap', 'loo']
    """
    methods = list(dict.fromkeys([methods] if isinstance(methods, str) else methods))
    if not methods:
        raise SettingError('attribute: give at least one method')
    for method in methods:
        check_method(method, budget if method in SAMPLED else None)
    if budget is not None and not set(methods) & set(SAMPLED):
        check_method(methods[0], budget)  # refused, naming the methods a budget is for
    if evaluate is not None:
        check_int('attribute', 'evaluate', evaluate, 1)
    return methods


def merged_coalitions(values: pd.DataFrame) -> pd.DataFrame:
    """Each coalition of each context once (in the order first evaluated), with the methods that read
    it (space-separated) and whether it was held out."""
    key = [*CELL, 'coalition']
    merged = values.groupby(key, sort=False).agg(value=('value', 'first'),
                                                 methods=('methods', lambda m: ' '.join(x for x in m if x)),
                                                 held_out=('held_out', 'any'))
    return merged.reset_index()


def warn_short(contexts: pd.DataFrame) -> None:
    """Warns, per system and k, naming the qids, of the contexts with fewer documents than k (an
    oracle with fewer judged documents, a short ranking): they are attributed over the documents
    they have, their ``attribution.csv`` rows fewer than k."""
    sizes = contexts[contexts['docno'].notna()].groupby(list(CELL), sort=False).size().reset_index(name='n')
    short = sizes[sizes['n'] < sizes['k'].astype(int)]
    for (system, k), rows in short.groupby(['system', 'k'], sort=False):
        warn_qids(f'{system} at k={k}: fewer than {k} documents, attributed over the documents each context has '
                  '(its Shapley values split U among them)', rows['qid'])


def sweep(contexts: pd.DataFrame, reader: Any, scorer_for: Callable[[LabelSet], Any], qrels: pd.DataFrame,
          label_sets: Sequence[LabelSet], methods: Union[str, Sequence[str]] = 'shapley', seed: int = 0,
          budget: Optional[int] = None, evaluate: Optional[int] = None) -> Sweep:
    """The attribution of every context of ``contexts`` per label set, by each of ``methods``; the
    coalitions one method reads are answered once for all.

    Args:
        contexts: the contexts, one row per document (``system``, ``k``, ``qid``, ``query``, ``docno``,
            ``text``, ``position``), as :func:`~pyterrier_utility.study.sweep.study_contexts` gives them.
        reader: the :class:`~pyterrier_utility.Reader` answering each coalition.
        scorer_for: label set -> the answer-quality scorer of that label set.
        qrels: the judgements (``relevant`` in the attribution, as each label set says).
        label_sets: the label sets, in order.
        methods: one or several of :data:`~pyterrier_utility.vocabulary.ATTRIBUTION_METHODS`.
        seed: the sampling methods' draws (and the held-out coalitions').
        budget: coalitions per context for the sampling methods.
        evaluate: N held-out coalitions per context
            (:func:`~pyterrier_utility.methods.attribution.quality.held_out`) generated too, and the
            exact Shapley values of the contexts of k <= :data:`~pyterrier_utility.vocabulary.MAX_REFERENCE_K`
            as the reference: each method is judged on them (:attr:`Sweep.quality`).

    Example::

        found = sweep(contexts, reader, lambda labels: scorer, qrels, [LabelSet.parse('2')], 'loo')
    """
    methods = methods_of(methods, budget, evaluate)
    warn_short(contexts)
    coalitions, rows, judged = [], [], []
    for labels in label_sets:
        scorer = scorer_for(labels)
        runs = [(m, contexts) for m in methods]
        if evaluate is not None and 'shapley' not in methods:  # the reference, where it is affordable
            runs.append(('shapley', contexts[contexts['k'].astype(int) <= MAX_REFERENCE_K]))
        found_by, values_by = [], []
        for method, asked in runs:
            attribution = ContextAttribution(reader, scorer, method=method, seed=seed,
                                             budget=budget if method in SAMPLED else None)
            found, values = attribution.evaluate(asked, by=CELL)
            found_by.append(found)
            values_by.append(values.assign(methods=method, held_out=False))
        if evaluate is not None:
            held = attribution.values_of(contexts, lambda k: held_out(k, evaluate, seed), by=CELL)
            values_by.append(held.assign(methods='', held_out=True))
        found = pd.concat(found_by, ignore_index=True)
        relevant = {(q, d) for q, docnos in labels.relevant_docnos(qrels).items() for d in docnos}
        found = found.assign(labels=str(labels), relevant=[pair in relevant for pair in zip(found['qid'],
                                                                                          found['docno'])])
        rows.append(found[list(ATTRIBUTION_COLUMNS)])
        values = merged_coalitions(pd.concat(values_by, ignore_index=True)).assign(labels=str(labels))
        coalitions.append(values[list(COALITION_COLUMNS)])
        if evaluate is not None:
            judged.append(quality_table(rows[-1], coalitions[-1]))
    return Sweep(pd.concat(coalitions, ignore_index=True), pd.concat(rows, ignore_index=True),
                 pd.concat(judged, ignore_index=True) if judged else None)
