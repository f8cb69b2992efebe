"""The ``predict`` command's meta-evaluation over a study's cells: which signals apply to which system,
the combination each system gets, every signal's correlation with each target over the queries of a
(label set, system, k) cell and over the cells of a label set, and the summary printed.

Example::

    from pyterrier_utility.study import meta_evaluation
    combined = meta_evaluation.combinations(['BM25'], ['spatial'], PredictionParameters(), {})
    prediction = meta_evaluation.meta_evaluate(signals, ['spatial'], PredictionParameters(), {}, combined)
"""
from typing import Dict, List, Sequence, Tuple

import pandas as pd

from .._messages import count, warn
from ..errors import SettingError
from ..prediction.evaluation import correlate, out_of_fold, system_tau
from ..prediction.parameters import PredictionParameters
from ..schema import PREDICTION_COLUMNS, SIGNALS_COLUMNS
from ..scoring.correlation import MIN_PAIRS
from ..vocabulary import COMBINED, PREDICTION_COMBINATION, PREDICTION_LEVELS, PREDICTION_TARGETS

#: A row of ``signals.csv``: a label set and a study's cell.
LABELLED_CELL = list(SIGNALS_COLUMNS[:4])


def _by_reason(left_out: Dict[str, Dict[str, str]], signal: str = '') -> Dict[Tuple[str, Tuple[str, ...]], List[str]]:
    """(reason, signals) -> the systems they are left out of, for ``signal`` alone when given."""
    grouped: Dict[Tuple[str, Tuple[str, ...]], List[str]] = {}
    for system, reasons in left_out.items():
        signals: Dict[str, List[str]] = {}
        for name, reason in reasons.items():
            if name == signal or not signal:
                signals.setdefault(reason, []).append(name)
        for reason, names in signals.items():
            grouped.setdefault((reason, tuple(names)), []).append(system)
    return grouped


def combinations(systems: Sequence[str], names: Sequence[str], settings: PredictionParameters,
                 left_out: Dict[str, Dict[str, str]]) -> Dict[str, List[str]]:
    """The signals of each system's out-of-fold combination: those of ``settings.combine`` (by default
    :data:`~pyterrier_utility.vocabulary.PREDICTION_COMBINATION`) among ``names`` that apply to it.

    Raises :class:`SettingError` where ``settings.combine`` was given and names a signal that applies to
    no system, with the reason.

    Example::

        combinations(['BM25', 'Rel'], ['max_score', 'spatial'], PredictionParameters(combine=('max_score',)),
                     {'Rel': {'max_score': 'an oracle'}})  # {'BM25': ['max_score'], 'Rel': []}
    """
    asked = PREDICTION_COMBINATION if settings.combine is None else settings.combine
    applies = {system: [n for n in names if n not in left_out.get(system, {})] for system in systems}
    nowhere = [n for n in asked if not any(n in found for found in applies.values())]
    if settings.combine is not None and nowhere:
        why = []
        for name in nowhere:
            if name in names:
                why.append(f'{name}, which applies to no system of the study (' + '; '.join(
                    f'{", ".join(systems)}: {reason}' for (reason, _), systems in _by_reason(left_out, name).items())
                           + ')')
            else:
                why.append(f'{name}, which predict does not compute here (the perplexity signals need --perplexity, '
                           f'udcg needs --udcg; computed: {", ".join(names)})')
        raise SettingError('combine (--combine) names ' + '; '.join(why))
    return {system: [n for n in asked if n in applies[system]] for system in systems}


def grouped(left_out: Dict[str, Dict[str, str]], combined: Dict[str, List[str]]) -> Dict[str, List[dict]]:
    """The signals left out of each system and why, and each system's combination, as ``settings.json``
    records them: ``left_out``, groups of ``systems``, ``signals`` and their ``reason``; ``combined``,
    groups of ``systems`` and the ``signals`` of their combination (lists, so the study's order stays).

    Example::

        grouped({'Rel': {'max_score': 'an oracle'}}, {'BM25': ['max_score'], 'Rel': []})
    """
    mixes: Dict[Tuple[str, ...], List[str]] = {}
    for system, mix in combined.items():
        mixes.setdefault(tuple(mix), []).append(system)
    return {'left_out': [dict(systems=systems, signals=list(names), reason=reason)
                         for (reason, names), systems in _by_reason(left_out).items()],
            'combined': [dict(systems=systems, signals=list(mix)) for mix, systems in mixes.items()]}


def notes(record: Dict[str, List[dict]]) -> List[str]:
    """The lines saying which signals are left out of which systems and why, and what each system's
    combination is over, from :func:`grouped`'s ``record`` (or ``settings.json``'s, whose other keys
    are not read).

    Example::

        notes(grouped({'Rel': {'max_score': 'an oracle'}}, {'BM25': ['max_score'], 'Rel': []}))
    """
    lines = [f'{", ".join(g["signals"])} left out of {", ".join(g["systems"])}: {g["reason"]}'
             for g in record.get('left_out', [])]
    if record.get('combined'):
        lines.append(f'{COMBINED}: ' + '; '.join(
            f'{", ".join(g["systems"])} over {", ".join(g["signals"])}' if g['signals'] else
            f'none for {", ".join(g["systems"])} (none of its signals applies)' for g in record['combined']))
    return lines


def _some(items: Sequence[str], shown: int = 10) -> str:
    return '; '.join(items[:shown]) + (f' ... ({len(items)} in all)' if len(items) > shown else '')


def meta_evaluate(signals: pd.DataFrame, names: Sequence[str], settings: PredictionParameters,
                  left_out: Dict[str, Dict[str, str]], combined: Dict[str, List[str]]) -> pd.DataFrame:
    """The correlation of every signal (and of the out-of-fold combination) with every target per
    (label set, system, k) over its queries, and Kendall's tau over the cells of each label set, each
    over the systems a signal applies to; one warning names the cells with too few queries (or a label
    set with too few cells) for a coefficient.

    Args:
        signals: ``signals.csv``'s rows (:data:`~pyterrier_utility.schema.SIGNALS_COLUMNS` and a column
            per signal).
        names: the signals.
        settings: the folds, seed and resamples.
        left_out: system -> signal -> why it does not apply (no row of the system then).
        combined: system -> the signals of its combination (:func:`combinations`); none: no row.

    Example::

        prediction = meta_evaluate(signals, ['spatial'], PredictionParameters(), {}, {'BM25': ['spatial']})
    """
    rows: List[dict] = []
    few, short = [], []
    least = max(settings.folds, MIN_PAIRS)
    for (labels, system, k), cell in signals.groupby(LABELLED_CELL[:-1], sort=False):
        key = dict(labels=labels, level=PREDICTION_LEVELS[0], system=system, k=k)
        mix = combined.get(system, [])
        if len(cell) < MIN_PAIRS:
            few.append(f'{labels} {system} k={k} ({count(len(cell), "query")})')
        for target in PREDICTION_TARGETS:
            for signal in names:
                if signal not in left_out.get(system, {}):
                    rows.append(dict(key, signal=signal, target=target,
                                     **correlate(cell[signal], cell[target], settings.n_resamples, settings.seed)))
            if not mix:
                continue
            complete = cell[mix + [target]].dropna()
            if len(complete) < least:
                if len(cell) >= MIN_PAIRS:
                    short.append(f'{labels} {system} k={k} {target} ({len(complete)} complete)')
                rows.append(dict(key, signal=COMBINED, target=target, n=len(complete)))
                continue
            predicted = out_of_fold(cell[mix], cell[target], settings.folds, settings.seed)
            rows.append(dict(key, signal=COMBINED, target=target,
                             **correlate(predicted, cell.loc[predicted.index, target], settings.n_resamples,
                                         settings.seed)))
    if few:
        warn(f'no coefficient over the queries of {_some(few)}: a correlation needs {MIN_PAIRS} queries')
    if short:
        warn(f'the combination needs {least} queries with each of its signals; NaN for {_some(short)}')
    uncounted: Dict[Tuple[str, int], List[str]] = {}  # (label set, cells) -> the signals with too few cells
    counted = []  # the signals that apply to some system
    for labels, block in signals.groupby('labels', sort=False):
        for signal in names:
            applies = block[[signal not in left_out.get(s, {}) for s in block['system']]]
            cells = len(applies[['system', 'k']].drop_duplicates())
            if not cells:
                continue
            counted.append(signal)
            if cells < MIN_PAIRS:
                uncounted.setdefault((labels, cells), []).append(signal)
            for target in PREDICTION_TARGETS:
                tau = system_tau(applies, signal, target)
                rows.append(dict(labels=labels, level=PREDICTION_LEVELS[1], system='', signal=signal, target=target,
                                 n=tau['n'], kendall=tau['tau'], kendall_p=tau['p']))
    if uncounted:
        which = {key: 'every signal' if set(found) == set(counted) else ', '.join(found)
                 for key, found in uncounted.items()}
        warn("no Kendall's tau over the (system, k) cells of " + '; '.join(
            f'{labels} for {which[labels, cells]} ({count(cells, "cell")})' for labels, cells in uncounted)
             + f': it needs {MIN_PAIRS} cells')
    return pd.DataFrame(rows).reindex(columns=list(PREDICTION_COLUMNS)).astype({'k': 'Int64', 'n': 'Int64'})


def summary(prediction: pd.DataFrame) -> str:
    """Spearman's rho of each signal with U and with P_k (the authors' two tasks; prediction.csv has the
    absolute gain too), per system and k, for the first label set."""
    rows = prediction[(prediction['level'] == PREDICTION_LEVELS[0])
                      & (prediction['labels'] == prediction['labels'].iloc[0])
                      & prediction['target'].isin([PREDICTION_TARGETS[0], PREDICTION_TARGETS[-1]])]
    title = f"Spearman's rho with each target, {prediction['labels'].iloc[0]}:"
    if rows['spearman'].isna().all():
        return f'{title} none in any cell (a coefficient needs {MIN_PAIRS} queries, over which signal and target vary)'
    table = rows.assign(cell=rows['system'] + ' k=' + rows['k'].astype(str)).pivot_table(
        index='signal', columns=['target', 'cell'], values='spearman', sort=False)
    return f'{title}\n{table.round(3).to_string()}'
