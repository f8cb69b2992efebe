"""Generation on a paper-shaped grid: the project's reader path against the fp32 path it replaced
and against llama.cpp, measured in the same run.

The grid is the study's: Cranfield queries, contexts at k = 1..10 from six systems (BM25, the
MiniLM re-ranker, their reversals, Rel, NRel) plus the 0-shot prompt, several samples per prompt
(temperature 0.3, top-k 50, repetition penalty 1.2, the offline Gemma 3 270M, the base-model stop
sequences). Three ways of answering it:

- **project**: ``Reader`` over ``GenerationCache(CausalLMBackend)`` as the study runs it (bfloat16
  on CPUs with bf16 instructions, one prefill per prompt for all its samples, prefix KV reuse);
- **fp32 reference**: the path the project used before (Hugging Face ``generate`` in float32, one
  row per (prompt, seed), left-padded batches of 8 of similar length, per-row seeded sampling);
- **llama.cpp**: llama-cpp-python on the same GGUF, one prompt at a time (when installed).

The references are slow, so they answer a random sample of the grid's (prompt, seed) pairs and
their time is scaled to the whole grid (said so in the output); the project answers the whole
grid. Agreement: answers identical to the fp32 reference's on the sample, for the project as run
and for the project's path forced to float32 (what the path changes, apart from the dtype).

The project's time is also put against this machine's limit: the roofline floor of the forward
passes it ran (``roofline.py``: matmul rate and memory bandwidth measured in the same run).

Usage: python benchmarks/bench_generation.py [--queries 2] [--samples 5] [--reference-answers 24]
"""
import argparse
import random
import time

import roofline
import torch


def grid_prompts(queries: int, ks, depth: int):
    """The distinct prompts of the grid (0-shot first), as ``run_study`` builds them."""
    import pyterrier_utility as pu
    from pyterrier_utility.study import default_systems
    d = pu.datasets.cranfield()
    qrels = d.get_qrels()
    topics = pu.datasets.answerable_topics(d.get_topics(), qrels, 2).head(queries)
    reader = pu.Reader(pu.backends.gemma3_270m())
    prompts = [reader.prompter.build_prompt(q) for q in topics['query']]
    for name, system in default_systems(d, qrels, depth=depth).items():
        ranking = system(topics).sort_values(['qid', 'rank'])
        for k in ks:
            top = ranking[ranking['rank'] < k]
            prompts += list(reader.prompter.prompts(top).values())
            if name in ('BM25', 'Neural'):
                prompts += list(reader.prompter.prompts(pu.ReverseOrder()(top)).values())
    return list(dict.fromkeys(prompts))


class _Forced:
    """A logits processor that makes ``generate`` take the tokens of a seeded per-row sampler."""

    def __init__(self, sampling):
        self.sampling = sampling

    def __call__(self, input_ids, scores):
        tokens = self.sampling.next_tokens(scores)
        forced = torch.full_like(scores, float('-inf'))
        forced[torch.arange(len(tokens)), tokens] = 0.0
        return forced


def fp32_reference(rows, args, stop):
    """The replaced path: HF generate, float32, left-padded length-sorted batches of 8 rows."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessorList

    from pyterrier_utility.backends import cut_at_stop, gemma3_270m_path
    from pyterrier_utility.backends.hf.sampling import SeededSampling as _SeededSampling
    path = gemma3_270m_path()
    tokenizer = AutoTokenizer.from_pretrained(path, padding_side='left')
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    answers = {}
    order = sorted(rows, key=lambda r: len(r[0]))
    for start in range(0, len(order), 8):
        batch = order[start:start + 8]
        enc = tokenizer([p for p, _ in batch], return_tensors='pt', padding=True)
        sampling = _SeededSampling([s for _, s in batch], args.temperature, args.top_k)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=args.max_new_tokens, do_sample=False,
                                 pad_token_id=tokenizer.pad_token_id, repetition_penalty=args.repetition_penalty,
                                 logits_processor=LogitsProcessorList([_Forced(sampling)]),
                                 stop_strings=stop, tokenizer=tokenizer)
        texts = tokenizer.batch_decode(out[:, enc['input_ids'].shape[1]:], skip_special_tokens=True)
        answers.update({row: cut_at_stop(t, stop) for row, t in zip(batch, texts)})
    return [answers[r] for r in rows]


def llama_cpp_answers(rows, args, stop):
    """llama-cpp-python on the GGUF the offline Gemma comes from, one prompt at a time."""
    from llama_cpp import Llama

    from pyterrier_utility.backends import cut_at_stop, gemma3_270m_gguf
    llm = Llama(str(gemma3_270m_gguf()), n_ctx=8192, n_threads=torch.get_num_threads(), verbose=False)
    return [cut_at_stop(llm(p, max_tokens=args.max_new_tokens, temperature=args.temperature, top_k=args.top_k,
                            repeat_penalty=args.repetition_penalty, stop=stop, seed=s)['choices'][0]['text'], stop)
            for p, s in rows]


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def grid_parser(description: str) -> argparse.ArgumentParser:
    """The options of the paper-shaped grid and its decoding, shared by the generation benchmarks."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=2)
    parser.add_argument('--k-max', type=int, default=10)
    parser.add_argument('--samples', type=int, default=5)
    parser.add_argument('--max-new-tokens', type=int, default=32)
    parser.add_argument('--temperature', type=float, default=0.3)
    parser.add_argument('--top-k', type=int, default=50)
    parser.add_argument('--repetition-penalty', type=float, default=1.2)
    parser.add_argument('--depth', type=int, default=20, help='documents the neural system re-ranks')
    return parser


def main():
    parser = grid_parser(__doc__)
    parser.add_argument('--reference-answers', type=int, default=24,
                        help='(prompt, seed) pairs the references answer, drawn at random from the grid')
    args = parser.parse_args()

    import pyterrier_utility as pu
    stop = list(pu.reader.BASE_MODEL_STOP)
    prompts = grid_prompts(args.queries, range(1, args.k_max + 1), args.depth)
    seeds = list(range(args.samples))
    rows = [(p, s) for p in prompts for s in seeds]
    sample = random.Random(0).sample(rows, min(args.reference_answers, len(rows)))
    print(f'grid: {args.queries} queries x k=1..{args.k_max} x 6 systems + 0-shot = {len(prompts)} distinct prompts '
          f'x {args.samples} samples = {len(rows)} answers; Gemma 3 270M, temperature {args.temperature}, '
          f'top-k {args.top_k}, <= {args.max_new_tokens} new tokens, {torch.get_num_threads()} threads')

    def project(**options):
        # The references' decoding: the penalty over every token, the base model's stops.
        backend = pu.backends.gemma3_270m(temperature=args.temperature, top_k=args.top_k,
                                          max_new_tokens=args.max_new_tokens, repeat_last_n=None, stop=stop,
                                          repetition_penalty=args.repetition_penalty, **options)
        return backend, pu.Reader(pu.GenerationCache(backend), n_samples=args.samples, stop=stop)

    backend, reader = project()
    shape = roofline.Shape.of(backend.model)
    rate, bandwidth, _ = roofline.machine(shape, backend.dtype)
    passes = roofline.Passes().attach(backend.model)
    answers, ours = timed(lambda: reader.answer(prompts))
    passes.detach()
    floor = passes.floor(shape, rate, bandwidth)
    by_row = {(p, s): a.text for p, row in zip(prompts, answers) for s, a in zip(seeds, row)}
    used = reader.cache.backend  # the copy holding the reader's length and stops, which did the work
    print(f'project ({str(backend.dtype).replace("torch.", "")}, in this process, whole grid): {ours:8.1f} s; '
          f'prompt tokens {used.prompt_tokens} asked, {used.prefilled_tokens} prefilled '
          f'({used.prompt_tokens / max(used.prefilled_tokens, 1):.1f}x fewer); prefix KV kept at the end '
          f'{used.prefixes.bytes / 2**20:.0f} MiB in {len(used.prefixes)} prefixes')
    print(f'roofline: {rate / 1e12:.2f} TFLOP/s best matmul, {bandwidth / 1e9:.1f} GB/s read; '
          f'{floor["passes"]} forward passes, {floor["flops"] / 1e12:.1f} TFLOP, {floor["bytes"] / 1e9:.0f} GB -> '
          f'floor {floor["seconds"]:.1f} s ({floor["compute_bound_s"]:.1f} s compute-bound, '
          f'{floor["memory_bound_s"]:.1f} s memory-bound); project {ours:.1f} s = '
          f'{ours / floor["seconds"]:.2f}x the floor')

    reference, seconds = timed(lambda: fp32_reference(sample, args, stop))
    scaled = seconds * len(rows) / len(sample)
    same = sum(by_row[r] == a for r, a in zip(sample, reference))
    print(f'fp32 reference ({len(sample)} answers): {seconds:8.1f} s -> {scaled:8.1f} s for the grid (scaled); '
          f'project is {scaled / ours:.1f}x faster; answers identical to the reference: {same}/{len(sample)}')
    fp32_backend, _ = project(dtype='float32')
    outs = fp32_backend.generate([p for p, _ in sample], seeds=[s for _, s in sample], stop_sequences=stop)
    fp32_answers = dict(zip(sample, (o.text for o in outs)))
    same32 = sum(fp32_answers[r] == a for r, a in zip(sample, reference))
    print(f'project path forced to float32: answers identical to the reference: {same32}/{len(sample)}')

    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        print('llama.cpp: llama-cpp-python is not installed; not measured')
        return
    theirs, seconds = timed(lambda: llama_cpp_answers(sample, args, stop))
    scaled = seconds * len(rows) / len(sample)
    print(f'llama.cpp Q4_K_M, one prompt at a time ({len(sample)} answers): {seconds:8.1f} s -> {scaled:8.1f} s '
          f'for the grid (scaled); project is {scaled / ours:.1f}x faster')


if __name__ == '__main__':
    main()
