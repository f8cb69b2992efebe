"""Context utility: the gain in answer quality that a context brings over no context, relative (the paper's)
or absolute."""
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import pandas as pd
import pyterrier as pt

from .._frames import validate_columns
from .._messages import either, warn_qids
from ..errors import FrameError, SettingError
from ..measures import Utility, quality_measures
from ..protocols import AnswerScorer
from ..reader import Reader
from ..schema import PER_QUERY_MAY_BE_EMPTY
from ..vocabulary import UTILITY_GAINS, ZERO_SHOT

#: How the tables, figures and report name U under each gain.
GAIN_NAMES: Dict[str, str] = dict(zip(UTILITY_GAINS, ('utility', 'absolute utility')))


def check_gain(name: str, gain: str) -> str:
    """``gain`` where it is one of :data:`~pyterrier_utility.vocabulary.UTILITY_GAINS`, else a :class:`SettingError`."""
    if gain not in UTILITY_GAINS:
        raise SettingError(f'{name}: gain must be {either(UTILITY_GAINS)}, got {gain!r}')
    return gain


def gain_name(gain: str) -> str:
    """What the tables, figures and report call U under ``gain``: 'utility' (the paper's) or 'absolute utility'."""
    return GAIN_NAMES[check_gain('gain_name', gain)]


def utility(p_k, p_0, gain: str = 'relative'):
    """U, elementwise: the relative gain (P_k - P_0) / P_0 of Tian et al. (ECIR 2025), NaN where P_0 is 0;
    or, with ``gain='absolute'``, the absolute gain P_k - P_0 of the authors' later work. NaN where
    either value is NaN.

    Example::

        utility([0.6, 0.3], [0.4, 0.0])                   # [0.5, nan]
        utility([0.6, 0.3], [0.4, 0.0], gain='absolute')  # [0.2, 0.3]
    """
    check_gain('utility', gain)
    p_k = np.asarray(p_k, dtype=float)
    p_0 = np.asarray(p_0, dtype=float)
    if gain == 'absolute':
        return p_k - p_0
    with np.errstate(divide='ignore', invalid='ignore'):
        return np.where(p_0 == 0, np.nan, (p_k - p_0) / p_0)


def with_gain(per_query: pd.DataFrame, gain: str) -> pd.DataFrame:
    """``per_query`` with its ``utility`` computed again under ``gain`` from its ``quality`` (P_k) and
    ``quality_0shot`` (P_0): a finished study read either way, nothing generated or scored again (both gains
    of a query are functions of its mean P_k and P_0 over samples).

    Example::

        table1(with_gain(pd.read_csv('results/study/per_query.csv'), 'absolute'))
    """
    validate_columns('with_gain', per_query, list(PER_QUERY_MAY_BE_EMPTY))
    return per_query.assign(utility=utility(per_query['quality'], per_query['quality_0shot'], gain))


class UtilityEvaluator(pt.Transformer):
    """Adds ``quality`` (P_k), ``quality_0shot`` (P_0) and ``utility`` (U) to a reader's output.

    P_k is the mean P (the scorer's quality: FBERT, EM, ...) of the query's k-shot answers over
    samples; P_0 the mean P of the same reader's 0-shot answers for the same samples (seeds). 0-shot
    answers come from the reader's memo, so every pipeline of an experiment sharing the reader reuses
    them. U = (P_k - P_0) / P_0 (``gain='relative'``, the paper's); P_0 = 0 gives NaN and a warning
    naming the queries. With ``gain='absolute'``, U = P_k - P_0 (:func:`utility`).

    Output: one row per context document (``sample`` dropped), with the three columns repeated on
    each row of a query; ``qanswer`` holds the first sample's answer (a string, as pyterrier-rag's
    measures expect) and, when the reader draws several samples, ``qanswers`` the tuple of all of
    them in sample order (what :class:`~pyterrier_utility.LLMRetEval` judges). So nDCG@k still
    applies, and :attr:`measures` (P named for the scorer's quality, and
    :data:`~pyterrier_utility.Utility`) read it. The columns are named for what they hold, the answer quality,
    whatever the quality is (as pyterrier's ``score`` is whatever the model); the measures name it.

    Args:
        reader: the reader that produced the k-shot answers.
        scorer: the answer-quality scorer: an :class:`~pyterrier_utility.FBertScorer` (the paper's
            FBERT against relevant documents) or a :class:`~pyterrier_utility.GoldAnswerScorer`
            (EM, token F1 or BERTScore against gold answers); any
            :class:`~pyterrier_utility.protocols.AnswerScorer`. Its P fills ``quality``.
        gain: ``'relative'`` or ``'absolute'`` (:data:`~pyterrier_utility.vocabulary.UTILITY_GAINS`): what
            ``utility`` holds, and so what the :data:`~pyterrier_utility.Utility` measure reads.

    Example::

        evaluator = UtilityEvaluator(reader, scorer)
        pipeline = dataset.bm25() % 5 >> reader >> evaluator
        pt.Experiment([pipeline], topics, qrels, [nDCG@5, *evaluator.measures])   # FBERT, FBERT0, Utility

    To save and reuse runs, ``pt.Experiment(..., save_dir=d, save_mode='reuse', save_format=pickle)``
    (the ``pickle`` module): the default TREC files keep only qid, docno, rank and score, so the
    measures would find no ``quality`` or ``utility`` column (a ``KeyError``) when reading them back.
    """

    def __init__(self, reader: Reader, scorer: AnswerScorer, gain: str = 'relative'):
        if not isinstance(reader, Reader):
            raise SettingError(f'UtilityEvaluator: the reader must be a pyterrier_utility.Reader, got {reader!r}: P_0 '
                               'comes from its 0-shot answers for the same samples, which pyterrier-rag\'s Reader does '
                               'not give. Give its backend to pyterrier_utility.Reader(backend) (any pyterrier-rag '
                               'Backend works), or score its answers alone with FBertScorer (needs qid, qanswer)')
        if not isinstance(scorer, AnswerScorer):
            raise SettingError(f'UtilityEvaluator: scorer must score answers (an FBertScorer or GoldAnswerScorer: '
                               f'measure, references, score_with_reference), got {scorer!r}')
        self.reader = reader
        self.scorer = scorer
        self.gain = check_gain('UtilityEvaluator', gain)

    @staticmethod
    def _keys(frame: pd.DataFrame, by: List[str]) -> pd.DataFrame:
        frame = frame if 'sample' in frame.columns else frame.assign(sample=0)
        keys = frame.drop_duplicates(by + ['sample'])[by + ['sample', 'qanswer']]
        group = keys.groupby(by, sort=False).ngroup()
        return keys.assign(_group=group.values).sort_values(['_group', 'sample'], kind='stable').drop(
            columns='_group').reset_index(drop=True)

    def _scored(self, keys: List[pd.DataFrame]) -> List[pd.DataFrame]:
        """P of the answers of several key frames in one call (each distinct answer of a query
        scored once, every text encoded in one pass)."""
        joined = pd.concat([k[['qid', 'qanswer']] for k in keys], ignore_index=True)
        quality, best = self.scorer.score_with_reference(joined['qid'], joined['qanswer'])
        out, start = [], 0
        for k in keys:
            out.append(k.assign(quality=quality[start:start + len(k)], best_docno=best[start:start + len(k)]))
            start += len(k)
        return out

    def evaluate(self, frame: pd.DataFrame, by: Sequence[str] = ('qid',)) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """The evaluation of a reader's output whose rows are grouped by ``by`` (``('qid',)`` in a
        pipeline; ``('system', 'k', 'qid')`` in a study, where one frame holds every context):
        per group ``quality`` (P_k, the mean over samples), ``quality_0shot`` (P_0 of its query, from
        the reader's 0-shot answers) and ``utility``; and the per-answer scores of the 0-shot and
        k-shot answers (0-shot rows with ``system`` '0-shot' and ``k`` 0 when those are in ``by``, and
        any other column of ``by`` but ``qid`` empty)."""
        by = list(by)
        self._check_own(frame if 'sample' in frame.columns else frame.assign(sample=0), by)
        zero_frame = self.reader.zero_shot(frame[['qid', 'query']])
        zero, k_shot = self._scored([self._keys(zero_frame, ['qid']), self._keys(frame, by)])
        p_0 = zero.groupby('qid', sort=False)['quality'].mean()
        groups = k_shot.groupby(by, sort=False)['quality'].mean().rename('quality').reset_index()
        groups['quality_0shot'] = groups['qid'].map(p_0).astype(float)
        groups['utility'] = utility(groups['quality'], groups['quality_0shot'], self.gain)
        if self.gain == 'relative':
            warn_qids(f'utility is NaN because the 0-shot {self.scorer.measure} is 0 ({self.scorer.references})',
                      p_0.index[p_0 == 0])
        zero = zero.assign(**{c: v for c, v in (('system', ZERO_SHOT), ('k', 0)) if c in by})
        return groups, pd.concat([zero.reindex(columns=k_shot.columns), k_shot], ignore_index=True)

    def _check_own(self, frame: pd.DataFrame, by: Sequence[str]) -> None:
        """P_0 comes from this evaluator's reader, so P_k must too: the same samples, one answer each."""
        samples = sorted(set(frame['sample'].tolist()))
        if samples != list(range(self.reader.n_samples)):
            raise FrameError(f'{self!r}: the input has samples {samples[:10]}, its reader draws '
                             f'{self.reader.n_samples} (samples 0..{self.reader.n_samples - 1}); evaluate each '
                             "reader's output with an evaluator of that reader")
        answers = frame.drop_duplicates(list(by) + ['sample', 'qanswer'])
        mixed = answers['qid'][answers.duplicated(list(by) + ['sample'])]
        if len(mixed):
            raise FrameError(f'{self!r}: several answers for one query and sample (qid {sorted(set(mixed))[:10]}): '
                             "the input mixes several readers' outputs; evaluate each on its own")

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if 'query' not in inp.columns and 'qanswer' in inp.columns:
            raise FrameError(f'{self!r}: the input has answers but no query column (pyterrier-rag\'s Reader drops '
                             'it): its reader must be this evaluator\'s pyterrier_utility.Reader, which keeps query')
        validate_columns(self, inp, ['qid', 'query', 'qanswer'])
        frame = inp if 'sample' in inp.columns else inp.assign(sample=0)
        if frame.empty:
            return inp.drop(columns=['sample'], errors='ignore').assign(
                quality=pd.Series(dtype=float), quality_0shot=pd.Series(dtype=float),
                utility=pd.Series(dtype=float))
        groups = self.evaluate(frame)[0].set_index('qid')
        first = frame[frame['sample'] == frame['sample'].min()].drop(columns=['sample'])
        if frame['sample'].nunique() > 1:
            ordered = frame.sort_values('sample', kind='stable').drop_duplicates(['qid', 'sample'])
            first = first.assign(qanswers=first['qid'].map(ordered.groupby('qid', sort=False)['qanswer'].agg(tuple)))
        return first.assign(quality=first['qid'].map(groups['quality']),
                            quality_0shot=first['qid'].map(groups['quality_0shot']),
                            utility=first['qid'].map(groups['utility'])).reset_index(drop=True)

    @property
    def measures(self) -> Tuple[Any, Any, Any]:
        """The ``pt.Experiment`` measures of its columns: P_k and P_0 named for its scorer's quality (the
        scorer's ``quality``: :func:`~pyterrier_utility.measures.quality_measures`), and Utility.

        Example::

            evaluator = UtilityEvaluator(reader, GoldAnswerScorer(answers, 'em'))
            pt.Experiment([bm25 % 5 >> reader >> evaluator], topics, qrels, [nDCG@5, *evaluator.measures])
            # columns nDCG@5, EM, EM_0shot, Utility
        """
        quality = getattr(self.scorer, 'quality', None)
        if quality is None:
            raise SettingError(f'{self!r}: its scorer names no quality, whose measures would be named for it: give '
                               'the scorer a quality (a name registered with pyterrier_utility.qualities.register)')
        return (*quality_measures(quality), Utility)

    def __repr__(self):
        gain = '' if self.gain == 'relative' else f', gain={self.gain!r}'
        return f'UtilityEvaluator({self.reader!r}, {self.scorer!r}{gain})'
