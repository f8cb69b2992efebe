"""The offline LLM judge measured: as a relevance assessor against Cranfield's qrels, against FBERT on a
small study's answers, and what judging costs against generating, in one run.

1. The main job's slice (``pyterrier-utility study --queries N``, every other default: FBERT against the
   relevant documents) into a fresh folder, as a process of its own (``bench_main_job.main_job``, the
   replicas way): its generation time, from the study's own ``generation:`` line, is the reference.
2. The cost: the study's judge (``--quality judge-docs``: the study's reader, built from its
   ``settings.json`` as the study builds it, replicas included, behind a generation cache of its own)
   grades every answer of the slice against its query's relevant documents; its time, the judge's
   loading included, over the slice's generation time is the ratio, whose target is at most 1.
3. Agreement with FBERT: Spearman's rho (``scipy.stats.spearmanr``) between the judge's grade of each
   answer and its FBERT (``scores.csv``, label >= 2, the 0-shot answers included), over all of them, with
   95% intervals from 2000 bootstrap resamples of the answers and of the queries (each drawn with its
   answers, which are not independent), and within each query (the mean of the queries' rhos).
4. Relevance: (query, document) pairs of Cranfield's qrels, :data:`PER_LABEL` drawn at random (numpy seed
   0) from each of its labels 0 to 4 (this package's scale: 4 complete answer, 3 high relevance, 2 useful
   background, 1 minimum interest, 0 no interest), graded by the judge's model twice: by the judge itself,
   the document as the answer to the query and no references (:data:`~pyterrier_utility.scoring.judge.
   JUDGE_PROMPT`, 1 to 10, relevant at :data:`JUDGE_RELEVANT` or more), and with UMBRELA's zero-shot
   prompt (:data:`UMBRELA_PROMPT`, 0 to 3, relevant at 2 or more, as TREC DL's passage judgements are
   binarised).
   Relevant in the qrels is label >= 2, the study's default label set. For each, the confusion table and
   Cohen's kappa, computed from the binary table here and checked against
   ``sklearn.metrics.cohen_kappa_score`` (also at every other threshold, for the record); a reply that
   gives no grade of the scale is counted and left out.

Usage: python benchmarks/bench_judge.py [--queries 3] [--per-label 30] [--out DIR]
"""
import argparse
import json
import os
import re
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from bench_main_job import cpu_name, main_job

#: Pairs of each Cranfield label graded as relevance (labels 0 to 4: 150 pairs).
PER_LABEL = 30
#: The threshold both scales are binarised at: qrels label >= 2 (the study's default label set) and
#: UMBRELA's grade >= 2 (its two highest grades, as TREC DL's passage judgements are binarised).
RELEVANT = 2
#: The judge's grade (1 to 10) binarised: relevant above the scale's midpoint.
JUDGE_RELEVANT = 6
#: Bootstrap resamples.
RESAMPLES = 2000
#: UMBRELA's zero-shot prompt (Upadhyay et al., 2024, arXiv:2406.06519), as castorini/umbrela holds it in
#: ``src/umbrela/prompts/qrel_zeroshot_bing.txt`` (its trailing spaces included), with ``{query}`` and
#: ``{passage}``. One addition, as :data:`~pyterrier_utility.scoring.judge.JUDGE_PROMPT` begins its reply:
#: the reply starts with the format the prompt asks for (``##final score: ``), so that a base model gives
#: the grade in its first tokens.
UMBRELA_PROMPT = (
    'Given a query and a passage, you must provide a score on an integer scale of 0 to 3 with the following '
    'meanings:\n0 = represent that the passage has nothing to do with the query, \n1 = represents that the '
    'passage seems related to the query but does not answer it, \n2 = represents that the passage has some '
    'answer for the query, but the answer may be a bit unclear, or hidden amongst extraneous information and \n'
    '3 = represents that the passage is dedicated to the query and contains the exact answer.\n\nImportant '
    'Instruction: Assign category 1 if the passage is somewhat related to the topic but not completely, '
    'category 2 if passage presents something very important related to the entire topic but also has some '
    'extra information and category 3 if the passage only and entirely refers to the topic. If none of the '
    'above satisfies give it category 0.\n\nQuery: {query}\nPassage: {passage}\n\nSplit this problem into '
    'steps:\nConsider the underlying intent of the search.\nMeasure how well the content matches a likely intent '
    'of the query (M).\nMeasure how trustworthy the passage is (T).\nConsider the aspects above and the relative '
    'importance of each, and decide on a final score (O). Final score must be an integer value only.\nDo not '
    'provide any code in result. Provide each score in the format of: ##final score: score without providing '
    'any reasoning.\n##final score: ')
_GRADE = re.compile(r'\s*([0-3])(?!\d)')


def umbrela_grade(reply: str) -> float:
    """The grade a reply to :data:`UMBRELA_PROMPT` begins with, 0 to 3; NaN for anything else."""
    found = _GRADE.match(reply)
    return float(found.group(1)) if found else float('nan')


def kappa(truth: np.ndarray, judged: np.ndarray) -> float:
    """Cohen's kappa of two binary labellings, from their 2 x 2 table: (p_o - p_e) / (1 - p_e)."""
    table = np.array([[np.sum((truth == a) & (judged == b)) for b in (0, 1)] for a in (0, 1)], dtype=float)
    n = table.sum()
    observed = np.trace(table) / n
    expected = float(table.sum(axis=1) @ table.sum(axis=0)) / n ** 2
    return (observed - expected) / (1 - expected)


def bootstrap(values: pd.DataFrame, statistic, by_query: bool, seed: int = 0):
    """A 95% percentile interval of ``statistic`` over :data:`RESAMPLES` resamples of the queries (each with
    its answers) or of the answers."""
    rng = np.random.default_rng(seed)
    groups = [g for _, g in values.groupby('qid')] if by_query else [values.iloc[[i]] for i in range(len(values))]
    # A query drawn twice counts twice: each draw is a query of its own.
    found = [statistic(pd.concat([groups[i].assign(qid=f'{j}') for j, i in
                                  enumerate(rng.choice(len(groups), len(groups)))], ignore_index=True))
             for _ in range(RESAMPLES)]
    return np.nanpercentile(found, [2.5, 97.5])


def pooled_rho(values: pd.DataFrame) -> float:
    """Spearman's rho of the grades and FBERT over all answers (NaN where either is constant)."""
    from scipy.stats import spearmanr
    if values['grade'].nunique() < 2 or values['fbert'].nunique() < 2:
        return float('nan')
    return float(spearmanr(values['grade'], values['fbert']).statistic)


def within_rho(values: pd.DataFrame) -> float:
    """The mean over queries of Spearman's rho within each (NaN for a query whose grades or FBERT are
    constant: left out of the mean)."""
    from scipy.stats import spearmanr
    rhos = [spearmanr(g['grade'], g['fbert']).statistic for _, g in values.groupby('qid')
            if g['grade'].nunique() > 1 and g['fbert'].nunique() > 1]
    return float(np.mean(rhos)) if rhos else float('nan')


def study_judge(folder: Path):
    """The study's judge, built from its settings as ``--quality judge-docs`` builds it, its replies in
    a generation cache of its own (the answers' cache is not read), and the study's config."""
    from pyterrier_utility.study.config_json import from_dict
    from pyterrier_utility.study.readers import build_reader
    config = from_dict(json.loads((folder / 'settings.json').read_text())).replace(quality='judge-docs')
    return build_reader(config, config.judge_reader, folder / 'judge.sqlite').cache, config


def judged_answers(folder: Path):
    """Every answer of the study graded by its judge against its query's relevant documents; the grades,
    the seconds it took (the judge's loading included) and the judge's cache."""
    import pyterrier_utility as pu
    from pyterrier_utility.qualities import JUDGE_DOCS, ScoringInputs
    start = time.perf_counter()
    judge, config = study_judge(folder)
    dataset = pu.datasets.cranfield()
    scorer = pu.JudgeScorer.for_quality(JUDGE_DOCS, ScoringInputs(dataset, dataset.get_qrels(),
                                                                  labels=config.label_sets[0], judge=judge))
    answers = pd.read_csv(folder / 'answers.csv', dtype={'qid': str}, keep_default_na=False)
    grades, _ = scorer.score_with_reference(answers['qid'], answers['qanswer'])
    return answers.assign(grade=grades), time.perf_counter() - start, judge, config


def qrels_pairs(dataset, per_label: int, seed: int = 0) -> pd.DataFrame:
    """``per_label`` pairs of the qrels drawn at random from each label, with their query's text."""
    topics = dataset.get_topics()
    queries = dict(zip(topics['qid'].astype(str), topics['query']))
    qrels = dataset.get_qrels().astype({'qid': str, 'docno': str})
    rng = np.random.default_rng(seed)
    pairs = pd.concat([g.iloc[rng.choice(len(g), min(per_label, len(g)), replace=False)]
                       for _, g in qrels.groupby('label')], ignore_index=True)
    return pairs.assign(query=pairs['qid'].map(queries), text=pairs['docno'].map(dataset.texts))


def judged_relevance(judge, pairs: pd.DataFrame) -> np.ndarray:
    """The judge's grade (1 to 10) of each document as an answer to its query, as the study's judge grades
    an answer (:data:`~pyterrier_utility.scoring.judge.JUDGE_PROMPT`), with no references."""
    import pyterrier_utility as pu
    scorer = pu.JudgeScorer(judge, dict(zip(pairs['qid'], pairs['query'])), {q: [''] for q in pairs['qid']})
    return scorer.score_with_reference(pairs['qid'], pairs['text'])[0]


def umbrela_relevance(judge, pairs: pd.DataFrame) -> np.ndarray:
    """UMBRELA's grade (0 to 3) of each pair by the judge's model."""
    from pyterrier_utility.verdict import Verdict
    verdict = Verdict(judge, UMBRELA_PROMPT, umbrela_grade, max_new_tokens=3, stop=('\n',), greedy=True,
                      owner='bench_judge')
    return np.array(verdict.ask([dict(query=q, passage=t) for q, t in zip(pairs['query'], pairs['text'])]))


def agreement(name: str, labels: np.ndarray, grades: np.ndarray, threshold: float, thresholds) -> None:
    """The confusion table of qrels labels and grades, and Cohen's kappa binarised at ``threshold`` (and, for
    the record, at each of ``thresholds``), the pairs without a grade left out."""
    from sklearn.metrics import cohen_kappa_score
    graded = pd.DataFrame({'qrels label': labels, 'grade': grades})
    table = pd.crosstab(graded['qrels label'], graded['grade'].fillna(-1).astype(int)).rename(columns={-1: 'none'})
    print(f'{name}: confusion (rows: qrels label; columns: the grade, none where the reply gave none):')
    print(table.to_string())
    valid = graded.dropna()
    if valid.empty:
        print(f'{name}: no reply gave a grade: no kappa')
        return
    truth = (valid['qrels label'] >= RELEVANT).astype(int).values

    def at(t):
        judged = (valid['grade'] >= t).astype(int).values
        return judged, kappa(truth, judged), cohen_kappa_score(truth, judged)
    judged, ours, theirs = at(threshold)
    binary = pd.crosstab(pd.Series(truth, name='qrels relevant'), pd.Series(judged, name='judged relevant'))
    print(f'{name}: binarised at qrels label >= {RELEVANT} and grade >= {threshold} ({len(valid)} pairs with a '
          f'grade of {len(graded)}):')
    print(binary.to_string())
    print(f"{name}: Cohen's kappa {ours:.3f} (sklearn {theirs:.3f}"
          f"{', equal' if np.isclose(ours, theirs) else ', DIFFERENT'}); agreement {np.mean(truth == judged):.3f}, "
          f'judged relevant {judged.mean():.3f} against {truth.mean():.3f} in the qrels')
    print(f'{name}: kappa at each threshold: ' + ', '.join(f'>= {t}: {at(t)[2]:.3f}' for t in thresholds))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=3, help="the main job's slice: its queries")
    parser.add_argument('--per-label', type=int, default=PER_LABEL, help='qrels pairs graded per label')
    parser.add_argument('--out', help="a folder to keep the slice's study folder in (default: the system's "
                        'temporary folder)')
    args = parser.parse_args()

    from scipy.stats import spearmanr

    import pyterrier_utility as pu
    print(f'CPU: {cpu_name()}; {os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at the start')
    pu.backends.gemma3_270m_path()
    out = args.out or tempfile.mkdtemp(prefix='pu-bench-judge-')
    os.makedirs(out, exist_ok=True)
    job = main_job('replicas', argparse.Namespace(queries=args.queries, study=[]), out)
    folder = job.folder / 'study'

    answers, seconds, judge, config = judged_answers(folder)
    distinct = answers[['qid', 'qanswer']].drop_duplicates()
    print(f'judge: {config.judge_reader} ({judge.backend!r}), judge-docs against the relevant documents '
          f'({config.label_sets[0]})')
    print(f'cost: {len(answers)} answers ({len(distinct)} distinct (query, answer)), {judge.generated} replies '
          f'generated in {seconds:.1f} s (the judge loaded included); the slice generated {job.answers} answers '
          f'in {job.generation:.1f} s: judging {seconds / job.generation:.3f} x the generation (target at most 1: '
          f"{'met' if seconds <= job.generation else 'NOT met'})", flush=True)
    grades = answers['grade']
    print(f'grades: {int(grades.isna().sum())} NaN of {len(grades)}; ' + ', '.join(
        f'{int(g)}: {n}' for g, n in grades.dropna().value_counts().sort_index().items()))

    scores = pd.read_csv(folder / 'scores.csv', dtype={'qid': str}).rename(columns={'quality': 'fbert'})  # P is FBERT
    scores = scores[scores['labels'] == str(config.label_sets[0])]
    paired = scores.merge(answers, on=['system', 'k', 'qid', 'sample']).dropna(subset=['grade', 'fbert'])
    rho = pooled_rho(paired)
    (low, high), (q_low, q_high) = (bootstrap(paired, pooled_rho, by) for by in (False, True))
    print(f'agreement with FBERT: {len(paired)} answers (0-shot included) of {paired["qid"].nunique()} queries, '
          f'Spearman rho {rho:.3f} (scipy p = {spearmanr(paired["grade"], paired["fbert"]).pvalue:.3g}); 95% CI '
          f'{low:.3f} to {high:.3f} with the answers resampled, {q_low:.3f} to {q_high:.3f} with the queries')
    low, high = bootstrap(paired, within_rho, True)
    print(f'within each query: mean rho {within_rho(paired):.3f} (95% CI {low:.3f} to {high:.3f}, queries '
          'resampled)')
    print(f'by system: judge grade and FBERT means\n'
          f'{paired.groupby("system")[["grade", "fbert"]].mean().round(3).to_string()}', flush=True)

    pairs = qrels_pairs(pu.datasets.cranfield(), args.per_label)
    for name, grade, threshold, thresholds in (('judge', judged_relevance, JUDGE_RELEVANT, range(2, 11)),
                                               ('UMBRELA', umbrela_relevance, RELEVANT, range(1, 4))):
        start = time.perf_counter()
        grades = grade(judge, pairs)
        took = time.perf_counter() - start
        print(f'{name}: {len(pairs)} qrels pairs ({args.per_label} per label 0-4, seed 0) graded in {took:.1f} s '
              f'({took / len(pairs):.2f} s a pair)')
        agreement(name, pairs['label'].values, grades, threshold, thresholds)
    print(f'load average {os.getloadavg()[0]:.2f} at the end')


if __name__ == '__main__':
    main()
