"""A study folder of any size, written as the study writes one, with random but consistent values:
P_k is the mean FBERT of a cell's samples, U is (P_k - P_0) / P_0, contexts are each system's top k."""
import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from pyterrier_utility.report import tables as rendering
from pyterrier_utility.study import StudyConfig, StudyResults, stats
from pyterrier_utility.study.config_json import to_dict

SYSTEMS = ('BM25', 'BM25-r', 'Neural', 'Neural-r', 'Rel', 'NRel')
LABEL_SETS = ('label>=2', 'label in {2,3}')
WORDS = ('lift drag wing flow boundary layer shock wave heat transfer mach number pressure surface '
         'velocity vortex turbulent laminar nose cone plate jet').split()


def _words(rng, n: int) -> str:
    return ' '.join(rng.choice(WORDS, n))


def _rankings(rng, pool: pd.DataFrame, k: int):
    """system -> the docs of its top k (Rel: judged 2+ first; NRel: judged below 2 first)."""
    order = {'BM25': rng.permutation(len(pool)), 'Neural': rng.permutation(len(pool)),
             'Rel': np.argsort(-pool['label'].fillna(-1).to_numpy(), kind='stable'),
             'NRel': np.argsort(pool['label'].fillna(-1).to_numpy() >= 2, kind='stable')}
    top = {name: pool.iloc[o[:k]] for name, o in order.items()}
    top.update({f'{name}-r': top[name].iloc[::-1] for name in ('BM25', 'Neural')})
    return top


def _contexts(rng, queries: int, ks: Sequence[int], pool_size: int = 12):
    rows = []
    for q in range(queries):
        pool = pd.DataFrame({'docno': [f'd{q}-{j}' for j in range(pool_size)],
                             'label': rng.choice([0, 1, 2, 3, np.nan], pool_size),
                             'text': [_words(rng, 60) for _ in range(pool_size)]})
        for k in ks:
            for system, top in _rankings(rng, pool, k).items():
                rows += [(system, k, f'q{q}', i + 1, d, lab, t)
                         for i, (d, lab, t) in enumerate(zip(top['docno'], top['label'], top['text']))]
    return pd.DataFrame(rows, columns=['system', 'k', 'qid', 'position', 'docno', 'label', 'text'])


def _scores(rng, answers: pd.DataFrame, contexts: pd.DataFrame, label_sets: Sequence[str]) -> pd.DataFrame:
    """The FBERT of every answer under every label set, the best document one of the query's relevant ones."""
    relevant = contexts[contexts['label'] >= 2].groupby('qid')['docno'].unique()
    frames = []
    for labels in label_sets:
        frame = answers[['system', 'k', 'qid', 'sample']].copy()
        frame.insert(0, 'labels', labels)
        frame['quality'] = rng.uniform(0.3, 0.9, len(frame)).round(6)
        frame['best_docno'] = [rng.choice(relevant[q]) if q in relevant.index else '' for q in frame['qid']]
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _per_query(rng, scores: pd.DataFrame, contexts: pd.DataFrame) -> pd.DataFrame:
    mean = scores.groupby(['labels', 'system', 'k', 'qid'], sort=False)['quality'].mean().reset_index()
    zero = mean[mean['system'] == '0-shot'].set_index(['labels', 'qid'])['quality']
    pq = mean[mean['system'] != '0-shot'].reset_index(drop=True)
    sizes = contexts.groupby(['system', 'k', 'qid']).size()
    pq.insert(4, 'n_docs', [int(sizes.get((s, k, q), 0)) for s, k, q in zip(pq['system'], pq['k'], pq['qid'])])
    pq.insert(5, 'ndcg', rng.uniform(0, 1, len(pq)))
    pq.insert(6, 'quality_0shot', [zero[lab, q] for lab, q in zip(pq['labels'], pq['qid'])])
    pq['utility'] = (pq['quality'] - pq['quality_0shot']) / pq['quality_0shot']
    return pq


def write_study(folder, queries: int = 10, ks: Sequence[int] = (1, 3, 5), samples: int = 5,
                label_sets: Sequence[str] = LABEL_SETS, figures: bool = True, seed: int = 0) -> Path:
    """Writes per_query, answers (with what an engine says of them: log-probabilities, cut at the
    main job's max_new_tokens), scores, contexts and queries CSVs, settings.json (the main job's settings),
    table1_paper.md,
    correlations.csv, confidence_correlations.csv and (``figures``) fig3_utility_vs_k.png into
    ``folder``; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    contexts = _contexts(rng, queries, ks)
    cells = [('0-shot', 0, f'q{q}') for q in range(queries)] + [
        (s, k, f'q{q}') for k in ks for s in SYSTEMS for q in range(queries)]
    answers = pd.DataFrame([(s, k, q, j, _words(rng, 12)) for s, k, q in cells for j in range(samples)],
                           columns=['system', 'k', 'qid', 'sample', 'qanswer'])
    # What the engine says of each answer, from a generator of its own (the other values stay as they were).
    config = StudyConfig(queries=queries, ks=tuple(ks), samples=samples, label_sets=tuple(label_sets), seed=seed)
    said, limit = np.random.default_rng(seed + 1), config.decoding.max_new_tokens
    tokens = said.integers(limit // 8, limit + 1, len(answers))
    answers['mean_logprob'] = said.uniform(-3, -0.2, len(answers)).round(6)
    answers['logprob'] = (answers['mean_logprob'] * tokens).round(6)
    answers['truncated'] = tokens == limit
    answers = answers[['system', 'k', 'qid', 'sample', 'qanswer', 'logprob', 'mean_logprob', 'truncated']]
    scores = _scores(rng, answers, contexts, label_sets)
    per_query = _per_query(rng, scores, contexts)
    for name, frame in (('per_query', per_query), ('answers', answers), ('scores', scores), ('contexts', contexts)):
        frame.to_csv(folder / f'{name}.csv', index=False)
    pd.DataFrame({'qid': [f'q{q}' for q in range(queries)],
                  'query': [f'what about {_words(rng, 4)} {q}' for q in range(queries)]}).to_csv(
        folder / 'queries.csv', index=False)
    (folder / 'settings.json').write_text(json.dumps(dict(
        to_dict(config), command='study', argv=['study', '--queries', str(queries), '--out', str(folder)],
        seeds=[seed + j for j in range(samples)],
        backends={'gemma3-270m': {'backend': 'CausalLMBackend', 'model': 'gemma-3-270m', 'dtype': 'bfloat16',
                                  'decoding': config.decoding.as_dict()}}), indent=2))
    (folder / 'table1_paper.md').write_text(rendering.table1_paper(stats.table1(per_query)))
    pd.concat([stats.correlations(per_query, m) for m in ('pearson', 'spearman')]).to_csv(
        folder / 'correlations.csv', index=False)
    results = StudyResults(per_query, answers)
    pd.concat([results.confidence_correlations(m) for m in ('pearson', 'spearman')]).to_csv(
        folder / 'confidence_correlations.csv', index=False)
    if figures:
        import matplotlib.pyplot as plt

        from pyterrier_utility.report import utility_vs_k
        plt.close(utility_vs_k(per_query, folder / 'fig3_utility_vs_k.png'))
    return folder
