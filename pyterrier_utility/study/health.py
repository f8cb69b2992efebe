"""Answer health: whether a study's readings rest on answers that exist (:func:`answer_health`), and
whether its positive control holds (:func:`positive_control`).

An empty answer scores 0 under FBERT and the gold answers' qualities, so its U is -1 whatever its
context held (a judge grades it as it grades any answer): a cell whose answers are often empty, cut
at ``max_new_tokens`` or copied from one document reads the decoding, not the relevance of its
contexts. ``health.csv`` says, per (reader,) system and k (0-shot included), how many answers each
cell has and which share of them is:

- **empty**: no visible character once the stop sequences are removed, only white space and
  control or format characters such as NUL, ESC or a zero-width space (the engine ended the answer
  at once, wrote a stop sequence first, or wrote what no reader can see);
- **cut**: stopped at ``max_new_tokens`` rather than by the end of text or a stop sequence (the
  engine's ``truncated``; NaN where the engine does not say);
- **copied**: at least :data:`COPIED_SHARE` of the answer's words lie in runs of
  :data:`COPY_RUN` or more consecutive words that one of its context documents holds verbatim
  (:func:`copied_share`; lower case, punctuation ignored): the reader recited a document rather than
  answered. An answer shorter than :data:`COPY_RUN` words is never copied; 0-shot answers have no
  document to copy.

and ``mean_tokens``, the mean number of tokens the engine generated per answer (a stop sequence's
and the end of text's included; NaN where the engine does not say). Answers do not depend on the
label set, so neither does their health.

Example::

    health = answer_health(results.answers, results.contexts)
    print(health[health['empty'] > 0.05])
"""
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from .._messages import count
from .._text import visible
from ..schema import CELL, HEALTH_COLUMNS
from ..vocabulary import MIN_N, ORACLES, ZERO_SHOT

#: The fewest consecutive words shared with a document that count as copied.
COPY_RUN = 8
#: The share of an answer's words in such runs that makes it copied.
COPIED_SHARE = 0.5
#: Table 1 marks a cell whose share of empty or cut answers exceeds these.
UNHEALTHY: Dict[str, float] = {'empty': 0.05, 'cut': 0.10}
#: The mark of such a cell.
HEALTH_MARK = '\u00a7'

_WORD = re.compile(r'\w+')


def words(text: str) -> List[str]:
    """The words of ``text``, lower case, punctuation dropped."""
    return _WORD.findall(str(text).lower())


def copied_share(answer: str, texts: Sequence[str], run: int = COPY_RUN) -> float:
    """The largest share, over ``texts``, of the answer's words lying in a run of at least ``run``
    consecutive words that the text holds verbatim (lower case, punctuation ignored); 0 for an answer
    of fewer than ``run`` words.

    Example::

        copied_share('the wing stalls at high angles of attack because the flow separates',
                     ['at high angles of attack because the flow separates from the wing'])   # 9 of 12 words
    """
    said = words(answer)
    if len(said) < run:
        return 0.0
    best = 0
    for text in texts:
        theirs = words(text)
        grams = {tuple(theirs[i:i + run]) for i in range(len(theirs) - run + 1)}
        covered = np.zeros(len(said), bool)
        for i in range(len(said) - run + 1):
            if tuple(said[i:i + run]) in grams:
                covered[i:i + run] = True
        best = max(best, int(covered.sum()))
    return best / len(said)


def _keys(frame: pd.DataFrame) -> List[str]:
    return [c for c in ('dataset', 'reader') if c in frame.columns]


def is_empty(answers: pd.Series) -> pd.Series:
    """Whether each answer is empty: missing, or without a :func:`visible` character."""
    return answers.isna() | ~answers.fillna('').astype(str).map(visible).astype(bool)


def answer_health(answers: pd.DataFrame, contexts: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """``health.csv``: per (dataset, reader,) system and k, in the order of ``answers``, the number of
    answers and the shares empty, cut and copied, and the mean tokens generated (see the module).

    Args:
        answers: :attr:`StudyResults.answers` (``system``, ``k``, ``qid``, ``sample``, ``qanswer``,
            ``truncated``, ``tokens`` where known).
        contexts: :attr:`StudyResults.contexts` (``position``, ``text``); ``None``: ``copied`` is NaN.
    """
    keys = _keys(answers)
    frame = answers.assign(_empty=is_empty(answers['qanswer']))
    truncated = frame['truncated'] if 'truncated' in frame.columns else pd.Series(np.nan, frame.index)
    frame = frame.assign(_cut=truncated.map(lambda t: np.nan if pd.isna(t) else float(t in (True, 'True', 1))))
    frame = frame.assign(_tokens=pd.to_numeric(frame['tokens'], errors='coerce') if 'tokens' in frame.columns
                         else np.nan)
    if contexts is not None:
        docs = contexts[contexts['text'].notna()].sort_values('position', kind='stable')
        texts = {key: list(g['text'].astype(str)) for key, g in docs.groupby(keys + list(CELL), sort=False)}
        cells = frame[keys + list(CELL)].itertuples(index=False, name=None)
        frame = frame.assign(_copied=[float(copied_share(a, texts.get(c, ())) >= COPIED_SHARE)
                                      for a, c in zip(frame['qanswer'].fillna(''), cells)])
    else:
        frame = frame.assign(_copied=np.nan)
    groups = frame.groupby(keys + ['system', 'k'], sort=False)
    out = groups.agg(answers=('qanswer', 'size'), empty=('_empty', 'mean'), cut=('_cut', 'mean'),
                     copied=('_copied', 'mean'), mean_tokens=('_tokens', 'mean')).reset_index()
    return out[keys + ['system', 'k', *HEALTH_COLUMNS]]


def unhealthy(health: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``health`` whose empty or cut share exceeds :data:`UNHEALTHY`."""
    worse = np.zeros(len(health), bool)
    for column, bar in UNHEALTHY.items():
        worse |= (health[column].astype(float) > bar).to_numpy()
    return health[worse]


def health_legend() -> str:
    """What :data:`HEALTH_MARK` means in Table 1."""
    return (f'{HEALTH_MARK} more than {UNHEALTHY["empty"]:.0%} of the cell\'s answers empty or more than '
            f'{UNHEALTHY["cut"]:.0%} cut at max_new_tokens (health.csv): a reading of decoding, not of relevance')


def mark_table(table: pd.DataFrame, health: pd.DataFrame) -> pd.DataFrame:
    """Table 1 (:func:`.stats.table1`) with :data:`HEALTH_MARK` added to the ``mark`` of each cell
    whose answers are unhealthy (:func:`unhealthy`), and ``mark_0shot`` holding it for a dataset's
    0-shot answers."""
    bad = unhealthy(health)
    keys = [c for c in _keys(bad) if c in table.columns]
    flagged = set(bad[keys + ['system', 'k']].astype(str).itertuples(index=False, name=None))
    zero = {tuple(str(v) for v in key) for key in bad.loc[bad['system'] == ZERO_SHOT, keys]
            .itertuples(index=False, name=None)}
    rows = table[keys + ['system', 'k']].astype(str).itertuples(index=False, name=None)
    marks = [m + (HEALTH_MARK if row in flagged else '') for m, row in zip(table['mark'], rows)]
    firsts = table[keys].astype(str).itertuples(index=False, name=None)
    return table.assign(mark=marks, mark_0shot=[HEALTH_MARK if tuple(f) in zero else '' for f in firsts])


def positive_control(table: pd.DataFrame, alpha: float = 0.05, min_n: int = MIN_N) -> pd.DataFrame:
    """Whether Rel beats NRel, per (dataset,) label set and k: Rel's and NRel's mean U, the paired
    t-test's p-value of NRel against Rel (Table 1's ``p_baseline``) and ``holds``: Rel's mean U above
    NRel's. Empty when Table 1 lacks either oracle.

    Rel gives the reader the very documents its answers are scored against: a reader that reads
    its context gains from them more than from non-relevant ones. Where it does not, the reader
    does not appear to use its context, and no other reading of the table can be trusted.
    """
    keys = [c for c in ('dataset', 'labels') if c in table.columns]
    rows = []
    for key, cell in table.groupby(keys + ['k'], sort=False):
        systems = cell.set_index('system')
        if not set(ORACLES) <= set(systems.index):
            continue
        rel, nrel = systems.loc['Rel', 'utility'], systems.loc['NRel', 'utility']
        p, n = systems.loc['NRel', 'p_baseline'], systems.loc['NRel', 'n']
        rows.append((*key, rel, nrel, p, bool(rel > nrel), bool(rel > nrel and p < alpha and n >= min_n)))
    return pd.DataFrame(rows, columns=keys + ['k', 'rel', 'nrel', 'p', 'holds', 'significant'])


def control_notes(control: pd.DataFrame, health: Optional[pd.DataFrame] = None) -> Tuple[str, ...]:
    """One sentence on the positive control (:func:`positive_control`), and where it fails, one naming
    the health figures of the failing cells that may explain it; ``()`` without the oracles."""
    if control.empty:
        return ()
    failed = control[~control['holds']]
    if failed.empty:
        significant = control['significant'].all()
        return ('Positive control held: Rel beats NRel at every k and label set (mean U'
                + ('; each difference significant' if significant else '; not every difference significant')
                + ').',)
    where = ', '.join(_cell_name(row) for row in failed.itertuples(index=False))
    notes = [f'Positive control FAILED: Rel does not beat NRel at {where}; the reader does not appear to use '
             'its context, so this table says nothing about relevance there.']
    if health is not None:
        # The failing cells' own answers: of their (dataset or reader) block, at their k.
        blocks = ['dataset'] if 'dataset' in failed.columns and 'dataset' in health.columns else []
        failing = set(failed[blocks + ['k']].astype(str).itertuples(index=False, name=None))
        keys = health[blocks + ['k']].astype(str).itertuples(index=False, name=None)
        cells = health[health['system'].isin(ORACLES).to_numpy() & [key in failing for key in keys]]
        if len(cells):
            notes.append('Answer health of those cells: ' + '; '.join(
                f'{r.system} k={r.k:g}' + ''.join(f' ({getattr(r, c)})' for c in blocks)
                + f': {r.empty:.0%} empty, {_share(r.cut)} cut, {_share(r.copied)} copied'
                for r in cells.itertuples(index=False)) + ' (health.csv).')
    return tuple(notes)


def control_detail(control: pd.DataFrame) -> str:
    """The positive control's figures, a line per (dataset,) label set: Rel's and NRel's mean U at
    each k and the paired t-test's p-value; '' without the oracles."""
    keys = [c for c in ('dataset', 'labels') if c in control.columns]
    lines = []
    for key, part in (control.groupby(keys, sort=False) if len(control) else ()):
        title = ', '.join(str(x) for x in (key if isinstance(key, tuple) else (key,)))
        lines.append(f'Rel against NRel ({title}): ' + '; '.join(
            f'k={r.k} {r.rel:.3f} {">" if r.holds else "<="} {r.nrel:.3f} (p {r.p:.3g})'
            for r in part.itertuples(index=False)))
    return '\n'.join(lines)


def _share(value: float) -> str:
    return 'unknown' if pd.isna(value) else f'{value:.0%}'


def _cell_name(row) -> str:
    parts = [str(getattr(row, c)) for c in ('dataset', 'labels') if hasattr(row, c)]
    return f'k={row.k} ({", ".join(parts)})'


def summary(health: pd.DataFrame) -> str:
    """The health of a study in one or two lines: the shares over all its answers, and the cells
    past the marks' bars."""
    n = int(health['answers'].sum())
    weights = health['answers'].astype(float)

    def mean(column):
        known = health[column].notna()
        return (health.loc[known, column] * weights[known]).sum() / weights[known].sum() if known.any() else None

    def overall(column):
        value = mean(column)
        return 'unknown' if value is None else f'{value:.1%}'
    tokens = mean('mean_tokens')
    line = (f'Answer health: {count(n, "answer")}, {overall("empty")} empty, {overall("cut")} cut at max_new_tokens, '
            f'{overall("copied")} copied from a context document; '
            + ('tokens per answer unknown' if tokens is None else f'mean {tokens:.1f} tokens'))
    bad = unhealthy(health)
    if bad.empty:
        return (line + f"; no cell past Table 1's bars (empty > {UNHEALTHY['empty']:.0%}, "
                f"cut > {UNHEALTHY['cut']:.0%}).")
    return (line + f'.\n{len(bad)} of {len(health)} cells marked {HEALTH_MARK} in Table 1: '
            + ', '.join(f'{r.system} k={r.k:g}' for r in bad.itertuples(index=False)) + ' (health.csv).')
