"""Generation throughput: the project's reader path vs pyterrier-rag's HuggingFaceBackend.

Both generate greedily with the same model (the offline Gemma 3 270M) on the same study-shaped
prompts (0-shot and k = 1, 3, 5 contexts from BM25 on Cranfield, in study order) with the same stop
sequences and token limit. pyterrier-rag's backend is driven as its text generator does (batches of
4, in the given order) and one prompt at a time; the project's :class:`GenerationCache` over
:class:`CausalLMBackend` batches 8 prompts of similar length together. Throughput counts the tokens
of the answers (text before the first stop sequence) per second of wall time.

Usage: python benchmarks/bench_generation.py [--queries 8] [--max-new-tokens 32] [--shots 0 1 3 5]
"""
import argparse
import time

import torch


def prompts_for(reader, queries: int, shots):
    import pyterrier_utility as pu
    d = pu.datasets.cranfield()
    topics = pu.datasets.answerable_topics(d.get_topics(), d.get_qrels(), 2).head(queries)
    ranking = d.bm25(num_results=max(shots) or 1)(topics)
    prompts = []
    for qid, query in zip(topics['qid'], topics['query']):
        texts = list(ranking[ranking['qid'] == qid].sort_values('rank')['text'])
        prompts += [reader.build_prompt(query, texts[:k]) for k in shots]
    return prompts


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=8)
    parser.add_argument('--max-new-tokens', type=int, default=32)
    parser.add_argument('--shots', type=int, nargs='+', default=[0, 1, 3, 5],
                        help='context sizes of the prompts (0: the 0-shot prompt)')
    parser.add_argument('--batch-size', type=int, default=8, help="the project's batch size")
    parser.add_argument('--reference-batches', type=int, nargs='+', default=[1, 4],
                        help="pyterrier-rag's batch sizes (1: one prompt at a time; 4: its text generator's)")
    args = parser.parse_args()
    torch.manual_seed(0)

    from pyterrier_rag.backend import HuggingFaceBackend

    import pyterrier_utility as pu
    from pyterrier_utility.backends import cut_at_stop
    stop = list(pu.reader.BASE_MODEL_STOP)
    ours = pu.backends.gemma3_270m(temperature=0, max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
    prompts = prompts_for(pu.Reader(ours), args.queries, args.shots)
    path = ours.model.name_or_path  # the converted model's folder
    theirs = HuggingFaceBackend(path, max_new_tokens=args.max_new_tokens, device='cpu')
    tokens = lambda answers: sum(len(ours.tokenizer(a, add_special_tokens=False)['input_ids']) for a in answers)
    print(f'{len(prompts)} prompts ({args.queries} queries x k={args.shots}), Gemma 3 270M, greedy, '
          f'at most {args.max_new_tokens} new tokens, {torch.get_num_threads()} threads')

    def reference(batch):
        out = []
        for start in range(0, len(prompts), batch):
            out += [cut_at_stop(o.text, stop) for o in theirs.generate(
                prompts[start:start + batch], max_new_tokens=args.max_new_tokens, stop_sequences=stop)]
        return out

    runs = {}
    for batch in args.reference_batches:
        name = 'pyterrier-rag HuggingFaceBackend, ' + ('one prompt at a time' if batch == 1 else f'batches of {batch}')
        answers, seconds = timed(lambda: reference(batch))
        runs[name] = (answers, seconds, tokens(answers) / seconds)
    cache = pu.GenerationCache(ours)
    answers, seconds = timed(lambda: [o.text for o in cache.generate(prompts, max_new_tokens=args.max_new_tokens,
                                                                     stop_sequences=stop)])
    ours_name = f'project CausalLMBackend, length-sorted batches of {args.batch_size}'
    runs[ours_name] = (answers, seconds, tokens(answers) / seconds)
    for name, (answers, seconds, rate) in runs.items():
        same = sum(a == b for a, b in zip(answers, runs[ours_name][0]))
        print(f'{name:55s} {seconds:7.1f} s  {rate:6.1f} answer tokens/s  '
              f'(answers identical to the project\'s: {same}/{len(prompts)})')
    for name in list(runs)[:-1]:
        print(f'throughput ratio vs {name}: {runs[ours_name][2] / runs[name][2]:.2f}x')


if __name__ == '__main__':
    main()
