"""The k-sweep: every system's contexts at every k, answered once, scored once per label set."""
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Union

import ir_measures
import pandas as pd
import pyterrier as pt

from .._util import check, check_int, normalise_frame, validate_columns, warn_qids
from ..bertscore import BertScore
from ..errors import FrameError, SettingError
from ..fbert import FBertScorer, Labels, check_labels, describe_labels, relevant_docnos
from ..order import ReverseOrder
from ..reader import Reader
from ..utility import utility
from . import stats

#: The suffix of a reversed system's name.
REVERSED = '-r'


@dataclass
class StudyResults:
    """What :func:`run_study` produces.

    Attributes:
        per_query: one row per (dataset,) label set, system, k and query: ``labels``, ``system``,
            ``k``, ``qid``, ``n_docs`` (contexts given), ``ndcg`` (nDCG@k, see ``ndcg_order``),
            ``fbert_0shot`` (P_0), ``fbert`` (P_k) and ``utility`` (U); ``dataset`` first when the
            study was given a dataset name.
        answers: every answer: (``dataset``,) ``system`` (``'0-shot'`` for the answers without
            context), ``k`` (0 for 0-shot), ``qid``, ``sample``, ``qanswer``.
        generated: answers the backend generated in this run (cache misses).
        baseline: the system significance is tested against.
        ndcg_order: ``'context'`` (nDCG@k of a reversed system ranks Context 1 first, the order the
            reader sees) or ``'retrieval'`` (the retrieval order of its unreversed system).
    """
    per_query: pd.DataFrame
    answers: pd.DataFrame
    generated: int = 0
    baseline: str = 'Rel'
    ndcg_order: str = 'context'

    @classmethod
    def concat(cls, results: Sequence['StudyResults']) -> 'StudyResults':
        """The results of several studies (one per dataset) as one."""
        first = results[0]
        return cls(pd.concat([r.per_query for r in results], ignore_index=True),
                   pd.concat([r.answers for r in results], ignore_index=True),
                   generated=sum(r.generated for r in results), baseline=first.baseline, ndcg_order=first.ndcg_order)

    def table(self, alpha: float = 0.05, correction: Optional[str] = None) -> pd.DataFrame:
        """Table 1 in long form; see :func:`pyterrier_utility.experiment.table1`."""
        return stats.table1(self.per_query, baseline=self.baseline, alpha=alpha, correction=correction)

    def correlations(self, method: str = 'pearson') -> pd.DataFrame:
        """r(nDCG@k, U) per (dataset,) label set, system and k; see :func:`pyterrier_utility.experiment.correlations`."""
        return stats.correlations(self.per_query, method=method)

    def save(self, folder: Union[str, Path], alpha: float = 0.05, correction: Optional[str] = None) -> Dict[str, Path]:
        """Writes per_query.csv, answers.csv and the tables (see :func:`write_tables`)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.answers.to_csv(folder / 'answers.csv', index=False)
        paths = write_tables(self.per_query, folder, baseline=self.baseline, alpha=alpha, correction=correction)
        return dict(paths, **{'answers.csv': folder / 'answers.csv'})


def write_tables(per_query: pd.DataFrame, folder: Union[str, Path], *, baseline: Optional[str] = 'Rel',
                 alpha: float = 0.05, correction: Optional[str] = None) -> Dict[str, Path]:
    """Writes per_query.csv, table1.csv, table1.md (a block per label set), table1_paper.md and
    table1.tex (the paper's layout; LaTeX with booktabs) and correlations.csv (Pearson, Spearman,
    Kendall) into ``folder``."""
    folder = Path(folder)
    table = stats.table1(per_query, baseline=baseline, alpha=alpha, correction=correction)
    paths = {name: folder / name for name in ('per_query.csv', 'table1.csv', 'table1.md', 'table1_paper.md',
                                              'table1.tex', 'correlations.csv')}
    per_query.to_csv(paths['per_query.csv'], index=False)
    table.to_csv(paths['table1.csv'], index=False)
    options = dict(baseline=baseline, alpha=alpha, correction=correction)
    paths['table1.md'].write_text(stats.table1_markdown(table, **options))
    paths['table1_paper.md'].write_text(stats.table1_paper(table, 'markdown', **options))
    paths['table1.tex'].write_text(stats.table1_paper(table, 'latex', **options))
    corr = pd.concat([stats.correlations(per_query, m) for m in ('pearson', 'spearman', 'kendall')], ignore_index=True)
    corr.to_csv(paths['correlations.csv'], index=False)
    return paths


class _Phases:
    """One line per phase of a study, with its time (when verbose)."""

    def __init__(self, verbose: bool):
        self.verbose = verbose
        self.start = time.perf_counter()

    def done(self, what: str) -> None:
        if self.verbose:
            now = time.perf_counter()
            pt.tqdm.write(f'{what} ({now - self.start:.1f} s)')
            self.start = now


def system_names(systems: Sequence[str], reverse: Sequence[str]) -> List[str]:
    """The reported systems: each of ``systems``, followed by its reversal when in ``reverse``."""
    names = []
    for name in systems:
        names.append(name)
        if name in reverse:
            names.append(name + REVERSED)
    return names


def _ranked(frame: pd.DataFrame) -> pd.DataFrame:
    if 'rank' not in frame.columns:
        frame = pt.model.add_ranks(frame.copy())
    return frame.sort_values(['qid', 'rank'], kind='stable')


def _contexts(ranking: pd.DataFrame, k: int, reverse: bool) -> pd.DataFrame:
    top = ranking[ranking['rank'] < k]
    return ReverseOrder()(top) if reverse else top


def _ndcg(contexts: pd.DataFrame, qrels: pd.DataFrame, k: int) -> Dict[str, float]:
    """nDCG@k of each query's contexts, ranked in context order (Context 1 first)."""
    contexts = contexts[contexts['docno'].notna()]  # placeholder rows of a query with no document
    if contexts.empty:
        return {}
    run = pd.DataFrame({'query_id': contexts['qid'].astype(str), 'doc_id': contexts['docno'].astype(str),
                        'score': -contexts['rank'].astype(float)})
    # Duplicate docnos would count twice in the gain; the first occurrence is the one that counts.
    run = run.drop_duplicates(['query_id', 'doc_id'])
    return {m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ k], qrels, run)}


def run_study(topics: pd.DataFrame, qrels: pd.DataFrame, systems: Mapping[str, pt.Transformer],
              reader: Reader, texts: Mapping[str, str], *, ks: Sequence[int] = (1, 3, 5),
              label_sets: Sequence[Labels] = (2,), reverse: Sequence[str] = (),
              bertscore: Union[str, BertScore] = 'minilm', baseline: str = 'Rel',
              ndcg_order: str = 'context', dataset: Optional[str] = None, verbose: bool = True) -> StudyResults:
    """Runs the study: contexts from each system at each k, 0-shot and k-shot answers, P, U, nDCG@k.

    Each system runs once, to depth ``max(ks)``; the contexts at a smaller k are its top k (every
    system here gives nested prefixes: retrievers, re-rankers, :class:`OracleSampler`), except a
    system with ``cutoff_changes_contexts`` (COS-Mix), which runs once per k as ``system % k``. Systems
    named in ``reverse`` are also reported reversed (``name-r``). All prompts of the study — one
    0-shot prompt per query, one prompt per system, k and query — are answered in one batched call,
    each distinct prompt and seed once (so k=1 and its reversal, or an oracle with fewer documents
    than k, cost nothing extra), through the reader's generation cache (give it a path to resume
    and re-run for free). Each distinct answer is scored once per label set; every text is encoded
    once.

    A query a system returns nothing for is answered with the 0-shot prompt (``n_docs`` 0, nDCG 0)
    and warned about. Queries without a relevant document under a label set get NaN P and U and
    are warned about by the scorer; P_0 = 0 gives NaN U, warned.

    Args:
        topics: ``qid``, ``query``.
        qrels: ``qid``, ``docno``, ``label`` (graded labels give nDCG its gains).
        systems: name -> transformer producing a ranking with ``text`` for a topics frame.
        reader: the :class:`~pyterrier_utility.Reader` (its backend, samples and seed).
        texts: docno -> text for the relevant documents (FBERT references).
        ks: context sizes.
        label_sets: relevant labels for P, each a minimum (``2``) or a set (``{2, 3}``).
        reverse: names of systems also reported reversed.
        bertscore: BERTScore model name or a shared :class:`~pyterrier_utility.BertScore`.
        baseline: the system significance is tested against in :meth:`StudyResults.table`.
        ndcg_order: nDCG@k of a reversed system on the contexts as the reader sees them
            (``'context'``) or in the retrieval order of its unreversed system (``'retrieval'``); the
            paper's wording allows both.
        dataset: a name for the collection, added as a ``dataset`` column (several studies, one table).
        verbose: progress bars.

    Example::

        d = pyterrier_utility.datasets.cranfield()
        systems = pyterrier_utility.experiment.default_systems(d, d.get_qrels())
        reader = Reader(GenerationCache(backends.gemma3_270m(max_new_tokens=40), 'answers.sqlite'))
        results = run_study(d.get_topics().head(5), d.get_qrels(), systems, reader, d.texts,
                            ks=[1, 3, 5], reverse=['BM25', 'Neural'])
        print(results.table())
    """
    validate_columns('run_study topics', topics, ['qid', 'query'])
    validate_columns('run_study qrels', qrels, ['qid', 'docno', 'label'])
    check(ndcg_order in ('context', 'retrieval'), 'run_study',
          f"ndcg_order must be 'context' or 'retrieval', got {ndcg_order!r}")
    check(len(ks) > 0, 'run_study', 'give at least one k')
    ks = sorted({check_int('run_study', 'k', k, 1) for k in ks})
    unknown = [r for r in reverse if r not in systems]
    if unknown:
        raise SettingError(f'run_study: reverse names systems that are not given: {unknown}')
    check(len(label_sets) > 0, 'run_study', 'give at least one label set')
    label_sets = [check_labels('run_study', labels) for labels in label_sets]
    topics = normalise_frame('run_study topics', topics[['qid', 'query']].drop_duplicates())
    topics = topics.drop_duplicates('qid').reset_index(drop=True)
    missing = topics['qid'][topics['query'].isna()]
    if len(missing):
        raise FrameError(f'run_study: no query text for qid {sorted(missing)[:20]}')
    queries = dict(zip(topics['qid'], topics['query'].astype(str)))
    qrels = normalise_frame('run_study qrels', qrels)
    for labels in label_sets:
        check(bool(set(relevant_docnos(qrels, labels)) & set(queries)), 'run_study',
              f'no topic has a relevant document at {describe_labels(labels)} (the qrels have labels '
              f'{sorted(qrels["label"].unique().tolist())}): nothing could be scored')
    irm_qrels = qrels.rename(columns={'qid': 'query_id', 'docno': 'doc_id', 'label': 'relevance'})

    clock = _Phases(verbose)
    # Contexts: each system once, each (system, k) a prefix, reversals of the prefix.
    zero = {qid: reader.build_prompt(query) for qid, query in queries.items()}
    cells = []  # (system, k, qid, docnos, prompt)
    ndcg: Dict[tuple, Dict[str, float]] = {}
    def run(name, system):
        ranking = system(topics)
        validate_columns(f'run_study system {name!r}', ranking, ['qid', 'query', 'docno', 'text'])
        ranking = _ranked(ranking.astype({'qid': str}))
        warn_qids(f'{name} retrieved nothing; answered with the 0-shot prompt (empty context)',
                  set(queries) - set(ranking['qid']))
        return ranking

    for name, system in pt.tqdm(systems.items(), desc='systems', disable=not verbose):
        # A system whose contexts at k are not the top k of a deeper run (COS-Mix) runs once per k.
        per_k = getattr(system, 'cutoff_changes_contexts', False)
        ranking = None if per_k else run(name, system)
        for k in ks:
            if per_k:
                ranking = run(name, system.fuse_rank_cutoff(k))
            for reverse_it in ([False, True] if name in reverse else [False]):
                label = name + (REVERSED if reverse_it else '')
                contexts = _contexts(ranking, k, reverse_it)
                ndcg[label, k] = _ndcg(contexts if ndcg_order == 'context' else _contexts(ranking, k, False),
                                       irm_qrels, k)
                prompts = reader.prompts(contexts) if len(contexts) else {}
                docs = {q: list(dict.fromkeys(g['docno'].dropna().astype(str)))
                        for q, g in contexts.groupby('qid', sort=False)}
                cells += [(label, k, qid, docs.get(qid, []), prompts.get(qid, zero[qid])) for qid in queries]

    clock.done(f'retrieval: {len(systems)} systems, {len(cells)} contexts')
    # Answers: every distinct prompt once, batched.
    prompts = list(dict.fromkeys(list(zero.values()) + [c[4] for c in cells]))
    before = reader.backend.generated
    answered = dict(zip(prompts, reader.answer(prompts)))
    generated = reader.backend.generated - before
    seeds = list(range(reader.n_samples))
    answer_rows = [('0-shot', 0, qid, j, answered[p][j]) for qid, p in zero.items() for j in seeds]
    answer_rows += [(s, k, qid, j, answered[p][j]) for s, k, qid, _, p in cells for j in seeds]
    answers = pd.DataFrame(answer_rows, columns=['system', 'k', 'qid', 'sample', 'qanswer'])
    clock.done(f'generation: {len(prompts)} distinct prompts x {reader.n_samples} samples, {generated} generated')

    # Answer quality per label set; U from mean P over samples.
    if not isinstance(bertscore, BertScore):
        bertscore = BertScore(bertscore)
    frames = []
    for labels in label_sets:
        scorer = FBertScorer(qrels, texts, labels=labels, model_type=bertscore)
        distinct = answers.drop_duplicates(['qid', 'qanswer'])
        p = dict(zip(zip(distinct['qid'], distinct['qanswer']), scorer.score(distinct['qid'], distinct['qanswer'])))
        scored = answers.assign(p=[p[q, a] for q, a in zip(answers['qid'], answers['qanswer'])])
        mean_p = scored.groupby(['system', 'k', 'qid'], sort=False)['p'].mean()
        p0 = mean_p.xs(('0-shot', 0), level=['system', 'k'])
        rows = pd.DataFrame([(s, k, qid, len(docs)) for s, k, qid, docs, _ in cells],
                            columns=['system', 'k', 'qid', 'n_docs'])
        rows['ndcg'] = [ndcg[s, k].get(q, 0.0) for s, k, q in zip(rows['system'], rows['k'], rows['qid'])]
        rows['fbert_0shot'] = rows['qid'].map(p0).astype(float)
        rows['fbert'] = [mean_p[s, k, q] for s, k, q in zip(rows['system'], rows['k'], rows['qid'])]
        rows['utility'] = utility(rows['fbert'], rows['fbert_0shot'])
        warn_qids(f'utility is NaN because the 0-shot FBERT is 0 ({describe_labels(labels)})',
                  p0.index[p0 == 0])
        rows.insert(0, 'labels', describe_labels(labels))
        frames.append(rows)
    per_query = pd.concat(frames, ignore_index=True)
    clock.done(f'scoring: {answers["qanswer"].nunique()} distinct answers, {len(label_sets)} label sets')
    rank = {'labels': [describe_labels(x) for x in label_sets], 'system': system_names(list(systems), reverse)}
    per_query = per_query.sort_values(
        ['labels', 'k', 'system'], kind='stable',
        key=lambda c: c.map({v: i for i, v in enumerate(rank[c.name])}) if c.name in rank else c)
    per_query = per_query.reset_index(drop=True)
    if dataset is not None:
        per_query.insert(0, 'dataset', dataset)
        answers.insert(0, 'dataset', dataset)
    return StudyResults(per_query, answers, generated=generated, baseline=baseline, ndcg_order=ndcg_order)
