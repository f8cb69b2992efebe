"""Whose utility is it? Each document's utility for one reader, and that reader's own utility oracle.

Zhang et al., "LLM-Specific Utility for Retrieval-Augmented Generation" (arXiv 2510.11358, 2025) define
a passage's utility for an LLM as the gain in that LLM's answer quality with the passage alone over its
answer without evidence, and a query's passages of positive gain as that LLM's utilitarian passages.
Here the answer quality is the study's P (:class:`~pyterrier_utility.UtilityEvaluator`'s, mean over the
reader's samples): :class:`DocumentUtility` measures it for every document of a pool
(:func:`utility_pool`), and :class:`UtilityOracle` gives each query the k documents of highest gain for
that reader, beside the human oracle Rel.
"""
import copy
from typing import Mapping, Optional

import numpy as np
import pandas as pd
import pyterrier as pt

from .._checks import check_int
from .._cutoff import CutAsFused, with_fewer_results
from .._frames import normalise_frame, validate_columns
from .._messages import warn_qids
from ..datasets.texts import texts_of
from ..errors import SettingError
from ..protocols import AnswerScorer
from ..reader import Reader
from ..vocabulary import POOL_CAP

#: The columns :class:`DocumentUtility` adds: P with the document alone, P_0, their difference and
#: the difference relative to P_0.
UTILITY_COLUMNS = ('p0', 'p_doc', 'gain', 'relative_gain')


def utility_pool(topics: pd.DataFrame, contexts: pd.DataFrame, qrels: pd.DataFrame, texts: Mapping[str, str], *,
                 max_docs: int = POOL_CAP) -> pd.DataFrame:
    """The documents whose utility for a reader is measured: for each query of ``topics``, the
    documents of ``contexts`` (the studied systems' contexts, at the largest k), by rank (every
    system's first document, then every second, ...), then the query's judged documents, highest label
    first, each document once, at most ``max_docs`` of them (the queries cut are named in a warning).

    Output: ``qid``, ``query``, ``docno``, ``text`` and ``label`` (the judgement; NaN where unjudged),
    one row per document, in the order above: the input of :class:`DocumentUtility`.

    Example::

        pool = utility_pool(topics, pd.concat([(bm25 % 5)(topics), (monot5 % 5)(topics)]), qrels, texts)
    """
    validate_columns('utility_pool topics', topics, ['qid', 'query'])
    validate_columns('utility_pool contexts', contexts, ['qid', 'docno', 'rank'])
    validate_columns('utility_pool qrels', qrels, ['qid', 'docno', 'label'])
    check_int('utility_pool', 'max_docs', max_docs, 1)
    topics = normalise_frame('utility_pool topics', topics[['qid', 'query']].drop_duplicates('qid'))
    contexts = normalise_frame('utility_pool contexts', contexts)
    qrels = normalise_frame('utility_pool qrels', qrels)
    shown = contexts.sort_values('rank', kind='stable').groupby('qid', sort=False)['docno'].apply(list).to_dict()
    judged = qrels.sort_values('label', ascending=False, kind='stable')
    labels = {(q, d): int(label) for q, d, label in zip(judged['qid'], judged['docno'], judged['label'])}
    judged_docnos = judged.groupby('qid', sort=False)['docno'].apply(list).to_dict()
    rows, cut = [], []
    for qid, query in zip(topics['qid'], topics['query']):
        docnos = list(dict.fromkeys(shown.get(qid, []) + judged_docnos.get(qid, [])))
        if len(docnos) > max_docs:
            cut.append(qid)
        rows += [(qid, query, d, labels.get((qid, d), np.nan)) for d in docnos[:max_docs]]
    warn_qids(f'utility_pool keeps {max_docs} documents per query (max_docs): the rest are left out', cut)
    pool = pd.DataFrame(rows, columns=['qid', 'query', 'docno', 'label'])
    found = texts_of(texts, list(pool['docno'].unique()))
    pool.insert(3, 'text', pool['docno'].map(found))
    return pool


class DocumentUtility(pt.Transformer):
    """Adds each document's utility for a reader: P with the document alone against P with none.

    For each row (a query and one document of its pool, :func:`utility_pool`), the reader answers the
    query with that document alone as its context (the k=1 prompt, as eRAG's labeller and
    ``attribute --method single`` build it, so a generation cache shared with them answers each prompt
    once) and without a context (the 0-shot prompt). Each answer is scored by ``scorer`` (the study's
    P: FBERT against the query's relevant documents), and averaged over the reader's samples.

    Output: the input rows (each (qid, docno) once, the first sample's rows where a ``sample`` column
    repeats them) with ``p0`` (P_0), ``p_doc`` (P with the document alone), ``gain`` (p_doc - p0: the
    document is utilitarian for the reader where it is positive) and ``relative_gain`` (gain / p0, NaN
    where p0 is 0). A query whose P is NaN (no relevant document to score against) has NaN throughout,
    named in a warning.

    Example::

        utility = DocumentUtility(reader, scorer)(utility_pool(topics, contexts, qrels, texts))
        oracle = UtilityOracle(utility, 'gemma3-270m') % 5
    """

    def __init__(self, reader: Reader, scorer: AnswerScorer):
        if not isinstance(reader, Reader):
            raise SettingError(f'DocumentUtility: reader must be a pyterrier_utility.Reader, got {reader!r}')
        if not hasattr(scorer, 'score_with_reference'):
            raise SettingError(f'DocumentUtility: scorer must score answers (an FBertScorer), got {scorer!r}')
        self.reader = reader
        self.scorer = scorer

    def _p(self, qids, prompts, answers) -> np.ndarray:
        """P of each (qid, prompt): the mean over the reader's samples of its answers' scores."""
        n = self.reader.n_samples
        flat_q = [q for q in qids for _ in range(n)]
        flat_a = [a.text for p in prompts for a in answers[p]]
        scores = np.asarray(self.scorer.score_with_reference(flat_q, flat_a)[0], float)
        return scores.reshape(len(qids), n).mean(axis=1)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query', 'docno', 'text'])
        inp = normalise_frame(repr(self), inp)
        if 'sample' in inp.columns:
            inp = inp[inp['sample'] == inp['sample'].min()].drop(columns=['sample'])
        inp = inp.drop_duplicates(['qid', 'docno']).reset_index(drop=True)
        if inp.empty:
            return inp.assign(**{c: pd.Series(dtype=float) for c in UTILITY_COLUMNS})
        prompter = self.reader.prompter
        queries = inp.drop_duplicates('qid')
        zero = [prompter.build_prompt(str(q)) for q in queries['query']]
        single = prompter.fitted_prompts([(qid, str(q), ['' if pd.isna(t) else str(t)])
                                          for qid, q, t in zip(inp['qid'], inp['query'], inp['text'])])
        distinct = list(dict.fromkeys(zero + single))
        answers = dict(zip(distinct, self.reader.answer(distinct)))
        p0 = dict(zip(queries['qid'], self._p(list(queries['qid']), zero, answers)))
        out = inp.assign(p0=inp['qid'].map(p0), p_doc=self._p(list(inp['qid']), single, answers))
        out['gain'] = out['p_doc'] - out['p0']
        with np.errstate(divide='ignore', invalid='ignore'):
            out['relative_gain'] = np.where(out['p0'] != 0, out['gain'] / out['p0'], np.nan)
        warn_qids(f'{self!r}: P is NaN (no relevant document to score against), so is every utility',
                  out.loc[out['p0'].isna(), 'qid'])
        warn_qids(f'{self!r}: P_0 is 0, so the relative gain is NaN', out.loc[out['p0'] == 0, 'qid'])
        return out

    def __repr__(self):
        return f'DocumentUtility({self.reader!r})'


class UtilityOracle(CutAsFused, pt.Transformer):
    """A reader's own utility oracle: for each query, the documents of its pool of highest gain for that
    reader (:class:`DocumentUtility`'s output), as Rel gives the human-judged relevant ones.

    Only documents of positive gain are given (the reader's utilitarian documents), by gain, highest
    first; ties by P with the document alone, highest first, then by docno. ``oracle % k`` gives the
    first k; a query with fewer than k utilitarian documents gets those it has, and one with none is
    left out. Both are named in a warning, as Rel does (``% k`` is the fused cut, :meth:`fuse_rank_cutoff`,
    compiled or not).

    Args:
        document_utility: :class:`DocumentUtility`'s output for the reader (``qid``, ``docno``,
            ``text``, ``gain``, ``p_doc``).
        reader: the reader's name, in messages and the system's name (``Util:<reader>``).
        num_results: the most documents per query.

    Example::

        own = (UtilityOracle(DocumentUtility(reader, scorer)(pool), 'gemma3-270m') % 5).compile()
        pt.Experiment([own >> reader, rel >> reader], topics, qrels, [...])
    """

    def __init__(self, document_utility: pd.DataFrame, reader: str = 'reader', *, num_results: int = 1000):
        validate_columns('UtilityOracle document_utility', document_utility, ['qid', 'docno', 'text', 'gain', 'p_doc'])
        check_int('UtilityOracle', 'num_results', num_results, 1)
        frame = normalise_frame('UtilityOracle document_utility', document_utility)
        useful = frame[frame['gain'] > 0].drop_duplicates(['qid', 'docno'])
        useful = useful.sort_values(['qid', 'gain', 'p_doc', 'docno'], ascending=[True, False, False, True],
                                    kind='stable')
        #: qid -> its utilitarian documents, (docno, text, gain), in the oracle's order.
        self.ranked = {q: list(zip(g['docno'], g['text'], g['gain'])) for q, g in useful.groupby('qid', sort=False)}
        self.measured = set(frame['qid'])
        self.reader = str(reader)
        self.num_results = num_results
        #: The k of ``oracle % k`` (``None``: no cutoff asked).
        self.asked: Optional[int] = None

    def fuse_rank_cutoff(self, k: int) -> 'UtilityOracle':
        """``oracle % k``: the first k documents (fewer where the query has fewer utilitarian ones: warned)."""
        fused = copy.copy(with_fewer_results(self, k))
        fused.asked = k
        return fused

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query'])
        inp = normalise_frame(repr(self), inp[['qid', 'query']].drop_duplicates())
        rows = []
        for qid, query in zip(inp['qid'], inp['query']):
            for rank, (docno, text, gain) in enumerate(self.ranked.get(qid, [])[:self.num_results]):
                rows.append((qid, query, docno, text, float(gain), rank))
        given = {q: min(len(self.ranked.get(q, [])), self.num_results) for q in inp['qid']}
        warn_qids(f'{self!r}: no document of the pool has a positive gain for this reader',
                  [q for q, n in given.items() if n == 0 and q in self.measured])
        warn_qids(f'{self!r}: the pool was not measured for some queries', [q for q in given if q not in self.measured])
        if self.asked is not None:
            warn_qids(f'{self!r} gives fewer than k={self.asked} documents (all of positive gain) to some queries',
                      [q for q, n in given.items() if 0 < n < self.asked])
        return pd.DataFrame(rows, columns=['qid', 'query', 'docno', 'text', 'score', 'rank'])

    def __repr__(self):
        return f'UtilityOracle(Util:{self.reader}, num_results={self.num_results})'
