"""A study's results: every number and what it came from (:class:`StudyResults`); :func:`.sweep.run_study`
computes them. :meth:`StudyResults.save` writes its data; :func:`pyterrier_utility.report.write_study` writes
them with the tables rendered, and :func:`pyterrier_utility.report.write_report` the page over them."""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional, Sequence, Union

import pandas as pd

from .._checks import check
from ..reader import Reader
from ..schema import CELL, FRAME_FILES, HEALTH_FILE, NUGGET_FILES
from ..vocabulary import CORRELATION_METHODS, ZERO_SHOT
from . import health as answer_health, stats
from .stats import fold_readers


@dataclass
class StudyResults:
    """What :func:`run_study` produces: every number of the study and what it came from.

    Attributes:
        per_query: one row per (dataset,) label set, system, k and query: ``labels``, ``system``,
            ``k``, ``qid``, ``n_docs`` (contexts given), ``ndcg`` (nDCG@k, see ``ndcg_order``),
            ``quality_0shot`` (P_0), ``quality`` (P_k) and ``utility`` (U); ``dataset`` first when the
            study was given a dataset name.
        answers: every answer: (``dataset``,) ``system`` (``'0-shot'`` for the answers without
            context), ``k`` (0 for 0-shot), ``qid``, ``sample``, ``qanswer``, and what the backend
            said of it: ``logprob``, ``mean_logprob``, ``truncated`` (NaN or empty where unknown;
            see :class:`~pyterrier_utility.backends.Answer`).
        contexts: the documents each (system, k, query) gave the reader: ``position`` (1 = Context
            1), ``docno``, ``label`` (NaN: unjudged) and ``text``.
        scores: each answer's FBERT per label set and the relevant document that gave the maximum
            (``best_docno``).
        queries: ``qid``, ``query``.
        nuggets, nugget_assignments: for a quality scored by nuggets, the nuggets of each label set and query
            and each answer's support of each (:meth:`~pyterrier_utility.scoring.nuggets.NuggetScorer.frames`;
            saved as nuggets.jsonl and nugget_assignments.csv).
        token_logprobs: the answers whose engine reported each token's log-probability: the keys of
            ``answers`` and ``token_logprobs`` (a tuple per answer, in token order; its sum is the
            answer's ``logprob``); saved as token_logprobs.csv, the tuples as JSON lists.
        generated: answers the backend generated in this run (cache misses).
        baseline: the system significance is tested against.
        ndcg_order: ``'context'`` (nDCG@k of a reversed system ranks Context 1 first, the order the
            reader sees) or ``'retrieval'`` (the retrieval order of its unreversed system).
        settings: what ``settings.json`` holds (the config, seeds and backends of the run).
    """
    per_query: pd.DataFrame
    answers: pd.DataFrame
    contexts: Optional[pd.DataFrame] = None
    scores: Optional[pd.DataFrame] = None
    queries: Optional[pd.DataFrame] = None
    token_logprobs: Optional[pd.DataFrame] = None
    generated: int = 0
    baseline: Optional[str] = 'Rel'
    ndcg_order: str = 'context'
    settings: Optional[dict] = None
    nuggets: Optional[pd.DataFrame] = None
    nugget_assignments: Optional[pd.DataFrame] = None

    @classmethod
    def concat(cls, results: Sequence['StudyResults']) -> 'StudyResults':
        """The results of several studies (one per dataset) as one."""
        first = results[0]
        frames = {name: pd.concat([getattr(r, name) for r in results], ignore_index=True)
                  if all(getattr(r, name) is not None for r in results) else None for name in FRAME_FILES}
        # Every reader's study scores with the same judge: its nuggets are listed once.
        found = {name: pd.concat([getattr(r, name) for r in results], ignore_index=True).drop_duplicates(
                 ignore_index=True) for name in ('nuggets', 'nugget_assignments')
                 if any(getattr(r, name) is not None for r in results)}
        return cls(**frames, generated=sum(r.generated for r in results), baseline=first.baseline,
                   ndcg_order=first.ndcg_order, **found)

    def table(self, alpha: float = 0.05, correction: Optional[str] = None) -> pd.DataFrame:
        """Table 1 in long form; see :func:`pyterrier_utility.study.table1`."""
        return stats.table1(fold_readers(self.per_query), baseline=self.baseline, alpha=alpha, correction=correction)

    def correlations(self, method: str = 'pearson') -> pd.DataFrame:
        """r(nDCG@k, U) per (dataset,) label set, system and k; see
        :func:`pyterrier_utility.study.correlations`."""
        return stats.correlations(fold_readers(self.per_query), method=method)

    def confidence_correlations(self, method: str = 'pearson') -> pd.DataFrame:
        """r(confidence, U) per (dataset,) label set, system and k, where a query's confidence is the
        mean over samples of its k-shot answers' ``mean_logprob`` (the mean token log-probability):
        whether the reader's confidence predicts utility, the paper's suggested QPP direction. NaN
        (``n`` 0) where the answers carry no log-probability; see
        :func:`pyterrier_utility.study.correlations` for ``method``.

        Example::

            results.confidence_correlations('spearman')
        """
        return stats.correlations(fold_readers(self._with_confidence()), method=method, x='mean_logprob')

    def _with_confidence(self) -> pd.DataFrame:
        """``per_query`` with each query's mean k-shot ``mean_logprob`` over samples."""
        keys = [c for c in ('dataset', 'reader') if c in self.per_query.columns] + list(CELL)
        answers = self.answers
        if answers is None or 'mean_logprob' not in answers.columns:
            return self.per_query.assign(mean_logprob=float('nan'))
        confidence = answers.groupby(keys, sort=False)['mean_logprob'].mean()
        return self.per_query.merge(confidence, left_on=keys, right_index=True, how='left')

    def health(self) -> pd.DataFrame:
        """``health.csv``: per (dataset, reader,) system and k, the answers and the shares empty, cut and
        copied, and the mean tokens generated; see :mod:`~pyterrier_utility.study.health`.

        Example::

            print(results.health().query('empty > 0.05'))
        """
        return answer_health.answer_health(self.answers, self.contexts)

    def prompt(self, reader: Reader, system: str, k: int, qid: str, dataset: Optional[str] = None) -> str:
        """The exact prompt ``reader`` built for one cell of the study (``system`` '0-shot': the
        0-shot prompt), from the recorded contexts and queries.

        Example::

            print(results.prompt(reader, 'BM25', 3, '1'))
        """
        def one(frame):
            rows = frame[frame['qid'] == str(qid)]
            return rows[rows['dataset'] == dataset] if dataset is not None else rows
        query = one(self.queries)['query']
        check(len(query) == 1, 'StudyResults.prompt', f'no query {qid!r}' + (f' in {dataset!r}' if dataset else ''))
        if system == ZERO_SHOT:
            return reader.prompter.build_prompt(query.iloc[0])
        shown = one(self.contexts)
        shown = shown[(shown['system'] == system) & (shown['k'] == k)].sort_values('position')
        return reader.prompter.fitted_prompts([(str(qid), query.iloc[0], list(shown['text'].fillna('')))])[0]

    def save(self, folder: Union[str, Path], *, health: Optional[pd.DataFrame] = None) -> Dict[str, Path]:
        """Writes the study's data into ``folder``: per_query.csv, answers.csv, contexts.csv, scores.csv,
        queries.csv, token_logprobs.csv (where the engine reported them), nuggets.jsonl and
        nugget_assignments.csv (where P was scored by nuggets), health.csv (:meth:`health`)
        and, when answers carry log-probabilities, confidence_correlations.csv
        (:meth:`confidence_correlations`: Pearson, Spearman, Kendall); returns the paths by file name.
        ``health``: :meth:`health`, where the caller has it already. :func:`pyterrier_utility.report.write_study`
        writes them with the tables.

        Example::

            results.save('results/small')
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = {}
        for name, file in FRAME_FILES.items():
            frame = getattr(self, name)
            if name == 'token_logprobs' and frame is not None:
                frame = frame.assign(token_logprobs=[json.dumps(list(t)) for t in frame['token_logprobs']])
            if frame is not None and not (name == 'token_logprobs' and frame.empty):
                frame.to_csv(folder / file, index=False)
                paths[file] = folder / file
        if self.nuggets is not None and self.nugget_assignments is not None:
            from ..scoring.nuggets import write_nuggets  # the judge's modules only where a study has nuggets
            paths[NUGGET_FILES['nuggets']] = folder / NUGGET_FILES['nuggets']
            write_nuggets(self.nuggets, self.queries, paths[NUGGET_FILES['nuggets']])
            paths[NUGGET_FILES['assignments']] = folder / NUGGET_FILES['assignments']
            self.nugget_assignments.to_csv(paths[NUGGET_FILES['assignments']], index=False)
        health = self.health() if health is None else health
        health.to_csv(folder / HEALTH_FILE, index=False)
        paths[HEALTH_FILE] = folder / HEALTH_FILE
        if self.answers is not None and self.answers.get('mean_logprob', pd.Series(dtype=float)).notna().any():
            path = paths['confidence_correlations.csv'] = folder / 'confidence_correlations.csv'
            pd.concat([self.confidence_correlations(m) for m in CORRELATION_METHODS],
                      ignore_index=True).to_csv(path, index=False)
        return paths
