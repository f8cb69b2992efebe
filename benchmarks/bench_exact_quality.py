"""How far the exact reader is from the bfloat16 one, on the bfloat16 reader's own answers.

The offline Gemma in bfloat16 answers main-job prompts (the first ``--queries`` answerable Cranfield
queries, 0-shot and with BM25's top 1, 3 and 5 documents, one sample each, the offline decoding); then each
answer is teacher-forced after its prompt under the bfloat16 and the exact reader, and this prints the mean
log-probability per answer token under each, and the share of prompts whose most likely first token is the
same for both.

Usage: python benchmarks/bench_exact_quality.py [--queries 20]
"""
import argparse

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=20)
    args = parser.parse_args()

    import pyterrier_utility as pu
    from pyterrier_utility.prompter import Prompter

    dataset = pu.datasets.cranfield()
    qrels, topics = dataset.get_qrels(), dataset.get_topics()
    topics = pu.datasets.answerable_topics(topics, qrels, labels=2).head(args.queries)
    ranking = dataset.bm25(num_results=5).transform(topics)
    readers = {'bfloat16': pu.backends.gemma3_270m(dtype='bfloat16'), 'exact': pu.backends.gemma3_270m(dtype='exact')}
    prompter = Prompter(pu.engines.OFFLINE.prompt_format)
    prompts = []
    for qid, query in zip(topics['qid'], topics['query']):
        docs = ranking[ranking.qid == qid].sort_values('rank').docno.tolist()
        prompts += [prompter.build_prompt(query, [dataset.texts[d] for d in docs[:k]]) for k in (0, 1, 3, 5)]
    answers = [a.text for a in readers['bfloat16'].generate(prompts, seeds=[1] * len(prompts))]
    tokenizer = readers['exact'].tokenizer
    totals = {name: [0.0, 0] for name in readers}
    same_first = 0
    for prompt, answer in zip(prompts, answers):
        if not answer:
            continue
        start = len(tokenizer(prompt).input_ids) - 1  # the answer's tokens follow the prompt's
        firsts = []
        for name, backend in readers.items():
            logprobs = backend.text_logprobs(prompt + answer)[start:]
            totals[name][0] += float(logprobs.sum())
            totals[name][1] += len(logprobs)
            firsts.append(int(torch.argmax(backend.next_token_logprobs(prompt))))
        same_first += firsts[0] == firsts[1]
    scored = sum(1 for a in answers if a)
    print(f'{len(prompts)} prompts, {scored} non-empty bfloat16 answers, {totals["exact"][1]} answer tokens')
    for name, (total, count) in totals.items():
        print(f'mean log-probability per answer token under {name}: {total / count:.4f}')
    print(f'the same most likely first token: {same_first} of {scored} prompts ({same_first / scored:.1%})')


if __name__ == '__main__':
    main()
