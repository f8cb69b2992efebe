"""The k-sweep: every system's contexts at every k, answered once, scored once per label set, into
:class:`~.results.StudyResults`."""
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import ir_measures
import pandas as pd
import pyterrier as pt

from .. import schema
from .._checks import check, check_int, check_k, check_window
from .._frames import normalise_frame, validate_columns
from .._messages import either, inform, warn, warn_qids
from ..contexts.order import GridWindow, LostInTheMiddle, ReverseOrder, Window
from ..errors import FrameError, SettingError
from ..protocols import AnswerScorer, changes_contexts_with_cutoff
from ..reader import Reader
from ..schema import ANSWER_INFO, CSV_COLUMNS, PER_QUERY_COLUMNS
from ..scoring.bertscore import BertScore
from ..scoring.fbert import FBertScorer
from ..scoring.utility import UtilityEvaluator, check_gain
from ..settings import LabelSet, LabelsLike
from ..vocabulary import DEFAULT_ORDERINGS, NDCG_ORDERS, ORDERING_NAMES, ZERO_SHOT
from .results import StudyResults

#: The suffix of a reversed system's name.
REVERSED = '-r'
#: The orderings a study offers by name: the suffix of a reordered system's name and its transformer.
ORDERINGS = dict(zip(ORDERING_NAMES, (('', None), (REVERSED, ReverseOrder()), ('-lim', LostInTheMiddle()),
                                       ('-lim-r', LostInTheMiddle(reverse=True)),
                                       ('-lim-authors', LostInTheMiddle(authors=True)),
                                       ('-lim-authors-r', LostInTheMiddle(reverse=True, authors=True)))))


def window_name(system: str, start: int) -> str:
    """The name of a system's window of ranks [start, start + k) (``BM25@6``), or of its ``-start``-th
    window from the tail (``BM25@-1``, :class:`~pyterrier_utility.GridWindow`)."""
    return f'{system}@{start}'


class _Phases:
    """One line per phase of a study, with its time (when verbose)."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.start = time.perf_counter()

    def done(self, what: str) -> None:
        if self.verbose:
            now = time.perf_counter()
            inform(f'{what} ({now - self.start:.1f} s)')
            self.start = now


def system_names(systems: Sequence[str], reverse: Sequence[str], orderings: Sequence[str] = DEFAULT_ORDERINGS,
                 windows: Sequence[int] = ()) -> List[str]:
    """The reported systems: each of ``systems``, followed, when in ``reverse``, by its orderings
    (:data:`ORDERINGS`) and its windows."""
    return [label for name in systems for label, _, _ in variants(name, reverse, orderings, windows)]


#: The columns that identify one context of a study: a system's contexts for a query at one k.
CELL = list(schema.CELL)


def in_rank_order(frame: pd.DataFrame) -> pd.DataFrame:
    """A ranking sorted by query, then rank (ranks added from the scores where it has none)."""
    if 'rank' not in frame.columns:
        frame = pt.model.add_ranks(frame.copy())
    return frame.sort_values(['qid', 'rank'], kind='stable')


def window(start: int, k: int, step: int = 1):
    """The transformer of a window of ``k`` documents: ranks [start, start + k) (:class:`Window`), or
    for a negative ``start`` the ``-start``-th window from the tail of a grid of every ``step`` ranks
    (:class:`GridWindow`); ``None`` for the top k."""
    if start < 0:
        return GridWindow(start, k, step)
    return Window(start, k) if start > 1 else None


def _contexts(ranking: pd.DataFrame, k: int, ordering=None, start: int = 1, step: int = 1) -> pd.DataFrame:
    """The contexts at ``k``: the top k or a window (:func:`window`), in ``ordering``."""
    cut = window(start, k, step)
    top = cut(ranking) if cut is not None else ranking[ranking['rank'] < k]
    return ordering(top) if ordering is not None and len(top) else top


def _ndcg(contexts: pd.DataFrame, qrels: pd.DataFrame, k: int) -> Dict[str, float]:
    """nDCG@k of each query's contexts, ranked in context order (Context 1 first)."""
    if contexts.empty:
        return {}
    run = pd.DataFrame({'query_id': contexts['qid'].astype(str), 'doc_id': contexts['docno'].astype(str),
                        'score': -contexts['rank'].astype(float)})
    # Duplicate docnos would count twice in the gain; the first occurrence is the one that counts.
    run = run.drop_duplicates(['query_id', 'doc_id'])
    return {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ k], qrels, run)}


def _checked(topics, qrels, systems, ks, label_sets, reverse, ndcg_order, orderings, windows,
             window_step) -> Tuple[pd.DataFrame, pd.DataFrame, List[int], List[LabelSet]]:
    """The study's inputs checked and normalised at its boundary."""
    validate_columns('run_study topics', topics, ['qid', 'query'])
    validate_columns('run_study qrels', qrels, ['qid', 'docno', 'label'])
    check(ndcg_order in NDCG_ORDERS, 'run_study', f'ndcg_order must be {either(NDCG_ORDERS)}, got {ndcg_order!r}')
    check(len(ks) > 0, 'run_study', 'give at least one k')
    ks = sorted({check_k('run_study', k) for k in ks})
    unknown = [r for r in reverse if r not in systems]
    if unknown:
        raise SettingError(f'run_study: reverse names systems that are not given: {unknown}')
    unknown = [o for o in orderings if o not in ORDERINGS]
    check(not unknown and 'original' in orderings, 'run_study',
          f"orderings must include 'original' and come from {list(ORDERINGS)}, got {list(orderings)}")
    for start in windows:
        check_window('run_study', start)
    check_int('run_study', 'window_step', window_step, 1)
    check(len(label_sets) > 0, 'run_study', 'give at least one label set')
    label_sets = [LabelSet.parse(labels) for labels in label_sets]
    topics = normalise_frame('run_study topics', topics[['qid', 'query']].drop_duplicates())
    topics = topics.drop_duplicates('qid').reset_index(drop=True)
    missing = topics['qid'][topics['query'].isna()]
    if len(missing):
        raise FrameError(f'run_study: no query text for qid {sorted(missing)[:20]}')
    topics = topics.assign(query=topics['query'].astype(str))
    qrels = normalise_frame('run_study qrels', qrels)
    for labels in label_sets:
        check(bool(set(labels.relevant_docnos(qrels)) & set(topics['qid'])), 'run_study',
              f'no topic has a relevant document at {labels} (the qrels have labels '
              f'{sorted(qrels["label"].unique().tolist())}): nothing could be scored')
    return topics, qrels, ks, label_sets


def variants(name: str, reverse: Sequence[str], orderings: Sequence[str], windows: Sequence[int]):
    """(reported name, ordering transformer, window start (see :func:`window`)) of each variant of a
    system."""
    if name not in reverse:
        return [(name, None, 1)]
    return ([(name + ORDERINGS[o][0], ORDERINGS[o][1], 1) for o in orderings]
            + [(window_name(name, s), None, s) for s in windows])


def _all_contexts(topics, systems, ks, reverse, qrels, ndcg_order, verbose, orderings=DEFAULT_ORDERINGS,
                  windows=(), window_step=1):
    """One frame of every context of the study (``system``, ``k``, ``qid``, ``query``, ``docno``,
    ``text``, ``rank``; a row without a docno for a query a system found nothing for) and nDCG@k
    per (system, k)."""
    irm_qrels = qrels.rename(columns={'qid': 'query_id', 'docno': 'doc_id', 'label': 'relevance'})
    qids = list(topics['qid'])
    frames, ndcg = [], {}

    def run(name, system):
        ranking = system(topics)
        validate_columns(f'run_study system {name!r}', ranking, ['qid', 'query', 'docno', 'text'])
        ranking = in_rank_order(normalise_frame(f'run_study system {name!r}', ranking.astype({'qid': str})))
        return ranking[ranking['docno'].notna()]

    for name, system in pt.tqdm(systems.items(), desc='systems', disable=not verbose):
        # A system whose contexts at k are not the top k of a deeper run (COS-Mix) runs once per k.
        per_k = changes_contexts_with_cutoff(system)
        ranking = None if per_k else run(name, system)
        for k in ks:
            if per_k:
                ranking = run(name, system.fuse_rank_cutoff(k))
            for label, ordering, start in variants(name, reverse, orderings, windows):
                contexts = _contexts(ranking, k, ordering, start, window_step)
                ndcg[label, k] = _ndcg(contexts if ndcg_order == 'context'
                                       else _contexts(ranking, k, None, start, window_step),
                                       irm_qrels, k)
                empty = topics[~topics['qid'].isin(set(contexts['qid']))]
                warn_qids(f'{label} retrieved nothing at k={k}; answered with the 0-shot prompt (empty context)',
                          empty['qid'])
                cell = pd.concat([contexts[['qid', 'query', 'docno', 'text', 'rank']], empty], ignore_index=True)
                order = {q: i for i, q in enumerate(qids)}
                cell = cell.sort_values(['qid', 'rank'], key=lambda c: c.map(order) if c.name == 'qid' else c,
                                        kind='stable', na_position='first')
                frames.append(cell.assign(system=label, k=k))
    return pd.concat(frames, ignore_index=True), ndcg


def _ordered(frame: pd.DataFrame, cells: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    """``frame`` in the order of ``cells`` (its ``CELL`` rows), then by ``extra`` columns."""
    order = {key: i for i, key in enumerate(cells[CELL].itertuples(index=False, name=None))}
    position = [order[key] for key in frame[CELL].itertuples(index=False, name=None)]
    return (frame.assign(_order=position).sort_values(['_order', *extra], kind='stable')
            .drop(columns='_order').reset_index(drop=True))


def run_study(topics: pd.DataFrame, qrels: pd.DataFrame, systems: Mapping[str, pt.Transformer],
              reader: Reader, texts: Mapping[str, str], *, ks: Sequence[int] = (1, 3, 5),
              label_sets: Sequence[LabelsLike] = (2,), reverse: Sequence[str] = (),
              orderings: Sequence[str] = DEFAULT_ORDERINGS, windows: Sequence[int] = (), window_step: int = 1,
              bertscore: Union[str, BertScore] = 'minilm',
              scorer_for: Optional[Callable[[LabelSet], AnswerScorer]] = None, gain: str = 'relative',
              baseline: Optional[str] = 'Rel',
              ndcg_order: str = 'context', dataset: Optional[str] = None, reader_name: Optional[str] = None,
              verbose: bool = True) -> StudyResults:
    """Runs the study: contexts from each system at each k, 0-shot and k-shot answers, P, U, nDCG@k.

    The study is the pipeline a notebook user composes, ``system % k >> reader >> evaluator``, run
    for every system and k at once: one frame of every context goes through the same
    :class:`~pyterrier_utility.Reader` (:meth:`~pyterrier_utility.Reader.answer_frame`) and, per
    label set, the same :class:`~pyterrier_utility.UtilityEvaluator`
    (:meth:`~pyterrier_utility.UtilityEvaluator.evaluate`), grouped by (system, k, query) instead of
    query. So P and U here are those of the pipeline, by construction.

    Each system runs once, to depth ``max(ks)``; the contexts at a smaller k are its top k (every
    system here gives nested prefixes: retrievers, re-rankers, :class:`OracleSampler`), except a
    system declaring ``cutoff_changes_contexts`` (COS-Mix), which runs once per k as ``system % k``.
    Systems named in ``reverse`` (the rankings, not the oracles) are also reported in the other
    ``orderings`` (:data:`ORDERINGS`: ``name-r`` reversed by :class:`~pyterrier_utility.ReverseOrder`,
    ``name-lim``, ``name-lim-r``, ``name-lim-authors`` and ``name-lim-authors-r`` by
    :class:`~pyterrier_utility.LostInTheMiddle`) and at the
    ``windows`` (``name@6``: ranks 6 .. 5 + k, by :class:`~pyterrier_utility.Window`). Each distinct prompt and
    seed is answered once (so
    k=1 and its reversal cost nothing extra), through the reader's generation cache (give it a path
    to resume and re-run for free). Each distinct answer is scored once per label set.

    A query a system returns nothing for is answered with the 0-shot prompt (``n_docs`` 0, nDCG 0)
    and warned about. Queries without a relevant document under a label set get NaN P and U and
    are warned about by the scorer; P_0 = 0 gives NaN U (relative gain), warned.

    Args:
        topics: ``qid``, ``query``.
        qrels: ``qid``, ``docno``, ``label`` (graded labels give nDCG its gains).
        systems: name -> transformer producing a ranking with ``text`` for a topics frame.
        reader: the :class:`~pyterrier_utility.Reader` (its backend, samples and seed).
        texts: docno -> text for the relevant documents (FBERT references).
        ks: context sizes.
        label_sets: relevant labels for P, each a :class:`~pyterrier_utility.settings.LabelSet` or
            one of its spellings (``2``, ``{2, 3}``, ``'2,3'``).
        reverse: names of systems (rankings) also reported in the other orderings and windows.
        orderings: names from :data:`ORDERINGS`; ``'original'`` always, ``'reversed'`` by default.
        windows: start ranks >= 2 of deeper windows (the top k is always there), or negative: ``-j`` is the j-th
            window from the tail of each ranking, on a grid of every ``window_step`` ranks from the
            top (:class:`~pyterrier_utility.GridWindow`; named ``name@-j``), as the authors' ``tails``.
        window_step: the grid of the tail windows.
        bertscore: BERTScore model name or a shared :class:`~pyterrier_utility.BertScore`.
        scorer_for: the scorer of P under a label set (default: :class:`~pyterrier_utility.FBertScorer`
            against that label set's documents with ``bertscore``, the paper's FBERT); e.g.
            ``lambda labels: GoldAnswerScorer(answers, 'em')`` for P against gold answers, whatever
            the label set (which then drives only Rel and nDCG). P fills the ``quality`` columns.
        gain: what U is: ``'relative'``, (P_k - P_0) / P_0 (the paper's), or ``'absolute'``, P_k - P_0
            (:func:`~pyterrier_utility.scoring.utility.utility`).
        baseline: the system significance is tested against in :meth:`StudyResults.table`.
        ndcg_order: nDCG@k of a reversed system on the contexts as the reader sees them
            (``'context'``) or in the retrieval order of its unreversed system (``'retrieval'``); the
            paper's wording allows both.
        dataset: a name for the collection, added as a ``dataset`` column (several studies, one table).
        reader_name: a name for the reader, added as a ``reader`` column (several readers, one table).
        verbose: progress bars.

    Example::

        d = pyterrier_utility.datasets.cranfield()
        systems = pyterrier_utility.study.default_systems(d, d.get_qrels())
        reader = Reader(GenerationCache(backends.gemma3_270m(max_new_tokens=40), 'answers.sqlite'))
        results = run_study(d.get_topics().head(5), d.get_qrels(), systems, reader, d.texts,
                            ks=[1, 3, 5], reverse=['BM25', 'Neural'])
        print(results.table())
    """
    topics, qrels, ks, label_sets = _checked(topics, qrels, systems, ks, label_sets, reverse, ndcg_order,
                                             orderings, windows, window_step)
    check_gain('run_study', gain)
    clock = _Phases(verbose)
    contexts, ndcg = _all_contexts(topics, systems, ks, reverse, qrels, ndcg_order, verbose, orderings, windows,
                                   window_step)
    cells = contexts.drop_duplicates(CELL)[CELL].reset_index(drop=True)
    clock.done(f'retrieval: {len(systems)} systems, {len(cells)} contexts')

    before = reader.cache.generated
    # The 0-shot prompts with the others, in one call: the evaluator then finds them cached.
    zero = topics.assign(system=ZERO_SHOT, k=0)
    frames = reader.answer_frames([zero, contexts], by=CELL, token_logprobs=True)
    zero, answered = (frame if 'sample' in frame.columns else frame.assign(sample=0) for frame in frames)
    each = pd.concat([f[CELL + ['sample', 'token_logprobs']] for f in (zero, answered)], ignore_index=True)
    zero, answered = (f.drop(columns='token_logprobs') for f in (zero, answered))
    generated = reader.cache.generated - before
    clock.done(f'generation: {reader.n_samples} samples per prompt, {generated} generated')

    if scorer_for is None:
        bertscore = bertscore if isinstance(bertscore, BertScore) else BertScore(bertscore)
        scorer_for = lambda labels: FBertScorer(qrels, texts, labels=labels, model_type=bertscore)  # noqa: E731
    frames, scores = [], []
    for labels in label_sets:
        evaluator = UtilityEvaluator(reader, scorer_for(labels), gain)
        groups, per_answer = evaluator.evaluate(answered, by=CELL)
        rows = cells.merge(groups, on=CELL, how='left')
        rows.insert(3, 'n_docs', _ordered(contexts[contexts['docno'].notna()], cells).groupby(CELL, sort=False)[
            'docno'].nunique().reindex(pd.MultiIndex.from_frame(cells), fill_value=0).values)
        rows.insert(4, 'ndcg', [ndcg[s, k].get(q, 0.0) for s, k, q in zip(rows['system'], rows['k'], rows['qid'])])
        frames.append(rows[list(PER_QUERY_COLUMNS[1:])]
                      .assign(quality_0shot=lambda d: d['quality_0shot'].astype(float)))
        scores.append(per_answer.assign(labels=str(labels)))
    clock.done(f'scoring: {answered["qanswer"].nunique()} distinct answers, {len(label_sets)} label sets')
    names = system_names(list(systems), reverse, orderings, windows)
    results = _results(topics, qrels, contexts, pd.concat([zero, answered], ignore_index=True), scores, frames,
                       label_sets, names, dict(generated=generated, baseline=baseline, ndcg_order=ndcg_order),
                       {'dataset': dataset, 'reader': reader_name}, each)
    _warn_truncated(results.answers, ' of '.join(n for n in (reader_name, dataset) if n))
    return results


def _warn_truncated(answers: pd.DataFrame, whose: str) -> None:
    """One warning for a run whose answers include some the backend cut at ``max_new_tokens``."""
    cut = int(answers['truncated'].eq(True).sum())
    if cut:
        warn(f'{cut} of {len(answers)} answers{" (" + whose + ")" if whose else ""} reached '
             'max_new_tokens; raise --max-new-tokens (Reader(max_new_tokens=...) or the decoding\'s) '
             '(answers.csv says which, in its truncated column)')


def _results(topics, qrels, contexts, answered, scores, frames, label_sets, names, options,
             named: Dict[str, Optional[str]], each: pd.DataFrame) -> StudyResults:
    """The study's frames in their reported order, with ``dataset`` and ``reader`` columns when named."""
    per_query = pd.concat([f.assign(labels=str(labels)) for f, labels in zip(frames, label_sets)],
                          ignore_index=True)
    per_query = per_query[['labels'] + [c for c in per_query.columns if c != 'labels']]
    rank = {'labels': [str(x) for x in label_sets], 'system': names}
    per_query = per_query.sort_values(
        ['labels', 'k', 'system'], kind='stable',
        key=lambda c: c.map({v: i for i, v in enumerate(rank[c.name])}) if c.name in rank else c)
    per_query = per_query.reset_index(drop=True)
    scores = pd.concat(scores, ignore_index=True)
    zero = scores[scores['system'] == ZERO_SHOT].drop_duplicates(['qid', 'sample'])
    order = {q: i for i, q in enumerate(topics['qid'])}
    zero = zero.sort_values(['qid', 'sample'], key=lambda c: c.map(order) if c.name == 'qid' else c, kind='stable')
    cells = contexts.drop_duplicates(CELL)[CELL]
    k_shot = _ordered(answered[answered['system'] != ZERO_SHOT].drop_duplicates(CELL + ['sample']), cells, ['sample'])
    answers = pd.concat([zero, k_shot], ignore_index=True)[list(CSV_COLUMNS['answers.csv'][0])]
    info = answered.drop_duplicates(CELL + ['sample'])[CELL + ['sample'] + list(ANSWER_INFO)]
    answers = answers.merge(info, on=CELL + ['sample'], how='left')
    shown = contexts[contexts['docno'].notna()]
    shown = shown.assign(position=shown.groupby(CELL, sort=False).cumcount() + 1)
    labels = qrels.drop_duplicates(['qid', 'docno']).set_index(['qid', 'docno'])['label']
    shown = shown.assign(label=labels.reindex(pd.MultiIndex.from_frame(shown[['qid', 'docno']])).values)
    each = answers[CELL + ['sample']].merge(each.drop_duplicates(CELL + ['sample']), on=CELL + ['sample'],
                                            how='left')
    frames = {'per_query': per_query, 'answers': answers,
              'token_logprobs': each[each['token_logprobs'].notna()].reset_index(drop=True),
              'contexts': shown[list(CSV_COLUMNS['contexts.csv'][0])].reset_index(drop=True),
              'scores': scores[list(CSV_COLUMNS['scores.csv'][0])],
              'queries': topics[['qid', 'query']]}
    named = {column: value for column, value in named.items() if value is not None}
    frames = {name: f.assign(**named)[list(named) + list(f.columns)] for name, f in frames.items()}
    return StudyResults(**frames, **options)


def study_contexts(topics: pd.DataFrame, qrels: pd.DataFrame, systems: Mapping[str, pt.Transformer],
                   ks: Sequence[int], label_sets: Sequence[LabelsLike] = (2,), verbose: bool = True) -> pd.DataFrame:
    """Every context :func:`run_study` gives the reader for ``systems`` at ``ks`` in their original
    orderings, checked as it checks them: one frame with ``system``, ``k``, ``qid``, ``query``,
    ``docno``, ``text``, ``rank`` (a row without a docno for a query a system found nothing for, warned).

    Example::

        contexts = study_contexts(topics, qrels, {'BM25': bm25}, ks=[4])
        ContextAttribution(reader, scorer).evaluate(contexts, by=['system', 'k', 'qid'])
    """
    topics, qrels, ks, _ = _checked(topics, qrels, systems, ks, label_sets, (), 'context', DEFAULT_ORDERINGS, (), 1)
    return _all_contexts(topics, systems, ks, (), qrels, 'context', verbose)[0]
