"""FBERT on a k-sweep-shaped workload: the project's scorer vs bert_score called per answer.

The reference scores each answer as the study's original scripts do: one ``BERTScorer.score`` call per
answer against its query's relevant documents (which re-encodes those documents every time), keeping
the best F1. The project's :class:`FBertScorer` encodes each distinct text once. Both use the same
model, loaded before timing starts, and start with nothing cached.

The project's time is also put against this machine's limit for the work FBERT cannot avoid: one
forward pass of the encoder per distinct text (2 x tokens x the linear weights of the layers used,
plus attention's 4 x tokens^2 x hidden per layer, padding not counted) and the token-similarity
products of every (answer, relevant document) pair (2 x answer tokens x document tokens x hidden),
at the best float32 matmul rate measured at the encoder's shapes in the same run (``roofline.py``).
Norms, activations, the greedy max and Python are left out: it is a floor, not an estimate.

Usage: python benchmarks/bench_fbert.py [--queries 20] [--relevant 30] [--reference-answers N]
(``--reference-answers`` times the reference on the first N answers only and scales its time up:
the reference takes about 3 s per answer on 2 CPU cores, close to an hour for the whole workload).
"""
import argparse
import time

import numpy as np
import pandas as pd
import roofline
import torch


def workload(queries: int, relevant: int, systems: int, ks: int, samples: int, seed: int = 0):
    """Synthetic qrels over Cranfield documents and answers made of corpus sentences."""
    import pyterrier_utility as pu
    texts = pu.datasets.cranfield().texts
    docnos = sorted(texts)
    rng = np.random.default_rng(seed)
    sentences = [s.strip() + '.' for t in texts.values() for s in t.split(' .') if len(s.split()) > 6]
    qrels = pd.DataFrame([(f'q{q}', d, 2) for q in range(queries)
                          for d in rng.choice(docnos, relevant, replace=False)], columns=['qid', 'docno', 'label'])
    cells = queries * (systems * ks * samples + samples)  # k-shot answers + 0-shot answers
    qids = [f'q{i % queries}' for i in range(cells)]
    answers = [' '.join(rng.choice(sentences, rng.integers(1, 4))) for _ in range(cells)]
    return texts, qrels, qids, answers


def encoder_floor(bertscore, distinct_texts, pairs) -> dict:
    """The floor of encoding ``distinct_texts`` once and matching the ``(answer, reference)`` pairs."""
    from bert_score.utils import sent_encode
    config = bertscore.model.config
    hidden, layers = config.hidden_size, bertscore.num_layers
    linear = sum(m.weight.numel() for name, m in bertscore.model.named_modules()
                 if isinstance(m, torch.nn.Linear) and name.startswith('encoder.layer.')
                 and int(name.split('.')[2]) < layers)
    tokens = {t: len(sent_encode(bertscore.tokenizer, t)) for t in distinct_texts}
    encode = sum(2 * n * linear + layers * 4 * n * n * hidden for n in tokens.values())
    match = sum(2 * tokens[a] * tokens[r] * hidden for a, r in pairs)
    rate = max(r for *_, r in roofline.matmul_rates(hidden, config.intermediate_size, torch.float32))
    return {'seconds': (encode + match) / rate, 'encode_flops': encode, 'match_flops': match, 'rate': rate,
            'tokens': sum(tokens.values())}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=20)
    parser.add_argument('--relevant', type=int, default=30)
    parser.add_argument('--systems', type=int, default=6)
    parser.add_argument('--ks', type=int, default=4)
    parser.add_argument('--samples', type=int, default=2)
    parser.add_argument('--reference-answers', type=int, default=0, help='0: all')
    args = parser.parse_args()

    from bert_score import BERTScorer

    import pyterrier_utility as pu
    texts, qrels, qids, answers = workload(args.queries, args.relevant, args.systems, args.ks, args.samples)
    refs = {q: [texts[d] for d in g['docno']] for q, g in qrels.groupby('qid')}
    print(f'workload: {len(answers)} answers ({args.queries} queries x ({args.systems} systems x {args.ks} k '
          f'x {args.samples} samples + {args.samples} 0-shot)), {args.relevant} relevant documents per query, '
          f'{len(answers) * args.relevant} answer-document pairs; model MiniLM-L6')

    bertscore = pu.BertScore('minilm')
    scorer = pu.FBertScorer(qrels, texts, labels=2, model_type=bertscore)
    start = time.perf_counter()
    ours = scorer.score(qids, answers)
    t_ours = time.perf_counter() - start
    print(f'project FBertScorer:         {t_ours:8.1f} s  ({bertscore.encoded} texts encoded)', flush=True)
    pairs = [(a, r) for q, a in zip(qids, answers) for r in refs[q] if a.strip() and r.strip()]
    distinct = set(answers) | {r for q in set(qids) for r in refs[q]}
    floor = encoder_floor(bertscore, distinct, pairs)
    print(f'floor: {len(distinct)} distinct texts, {floor["tokens"]} tokens, {floor["encode_flops"] / 1e12:.2f} TFLOP '
          f'encoding + {floor["match_flops"] / 1e12:.2f} TFLOP matching {len(pairs)} pairs at '
          f'{floor["rate"] / 1e12:.2f} TFLOP/s (best float32 matmul) = {floor["seconds"]:.1f} s; '
          f'project {t_ours:.1f} s = {t_ours / floor["seconds"]:.2f}x the floor', flush=True)

    reference = BERTScorer(model_type=bertscore.model_type, num_layers=bertscore.num_layers, batch_size=64)
    n_ref = args.reference_answers or len(answers)
    start = time.perf_counter()
    theirs = np.array([float(reference.score([a] * len(refs[q]), refs[q])[2].max())
                       for q, a in zip(qids[:n_ref], answers[:n_ref])])
    t_ref = (time.perf_counter() - start) * len(answers) / n_ref

    diff = float(np.abs(ours[:n_ref] - theirs).max())
    scaled = '' if n_ref == len(answers) else f' (timed on {n_ref} answers, scaled)'
    print(f'bert_score per answer:       {t_ref:8.1f} s{scaled}')
    print(f'speed-up:                    {t_ref / t_ours:8.1f}x')
    print(f'max |difference| of values:  {diff:.2e}  over {n_ref} answers')


if __name__ == '__main__':
    main()
