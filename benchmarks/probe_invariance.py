"""Batch invariance of CausalLMBackend on the device at hand (a GPU, or a CPU of another kind): Gemma 3 270m's
shapes (its config and tokenizer, from ``HERE/gemma`` with ``tokenizer.json.gz``, or from the offline reader's
converted folder where ``HERE/gemma`` is absent), weights drawn at random with a fixed seed. Each (prompt,
seed) is answered alone, then among all others in one batch, then in reverse order in batches of 2; the probe
counts answers whose text or token log-probabilities differ, with the invariance on and off, and times both.

Usage: [THREADS=n] [DTYPES='float32 bfloat16'] python benchmarks/probe_invariance.py [cpu|cuda] [prompts] [new tokens]
"""
import gzip
import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch
import transformers

if os.environ.get('THREADS'):
    torch.set_num_threads(int(os.environ['THREADS']))

HERE = Path(__file__).resolve().parent
device = sys.argv[1] if len(sys.argv) > 1 else ('cuda' if torch.cuda.is_available() else 'cpu')
n_prompts = int(sys.argv[2]) if len(sys.argv) > 2 else 16
new_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 24
folder = Path('/tmp/gemma-probe')
folder.mkdir(exist_ok=True)
if (HERE / 'gemma').is_dir():
    for name in ('config.json', 'generation_config.json', 'tokenizer_config.json'):
        shutil.copy(HERE / 'gemma' / name, folder / name)
    with gzip.open(HERE / 'gemma' / 'tokenizer.json.gz') as src, open(folder / 'tokenizer.json', 'wb') as dst:
        shutil.copyfileobj(src, dst)
else:
    from pyterrier_utility.backends import gemma3_270m_path
    for name in ('config.json', 'generation_config.json', 'tokenizer_config.json', 'tokenizer.json'):
        shutil.copy(gemma3_270m_path() / name, folder / name)

from pyterrier_utility.backends.hf.backend import CausalLMBackend  # noqa: E402

print('torch', torch.__version__, 'transformers', transformers.__version__, 'device', device,
      torch.cuda.get_device_name() if device == 'cuda' else '', flush=True)
tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
config = transformers.AutoConfig.from_pretrained(folder)
torch.manual_seed(0)
model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
model = model.to(device).eval()

words = ('boundary layer flat plate supersonic flow wind tunnel mach heat transfer shock wave lift drag '
         'pressure viscous laminar turbulent nozzle wing').split()
prompts = []
for i in range(n_prompts):
    context = ' '.join(words[(i * 7 + j) % len(words)] for j in range(5 + 37 * (i % 5)))
    prompts.append(f'Context 1: {context}.\nQuestion: what was measured in case {i}?\nAnswer:')
seeds = (11, 12, 13)
pairs = [(p, s) for s in seeds for p in prompts]


def answers(outputs):
    return [(o.text, tuple(o.token_logprobs or ()), o.truncated) for o in outputs]


def sync():
    if device == 'cuda':
        torch.cuda.synchronize()


report = {}
for dtype in os.environ.get('DTYPES', 'float32 bfloat16').split():
    for invariant in (True, False):
        t0 = time.perf_counter()
        backend = CausalLMBackend(model, tokenizer, model_id='probe', dtype=dtype, invariant=invariant,
                                  temperature=1.0, top_k=50, max_new_tokens=new_tokens, batch_size=64,
                                  prefix_cache_mb=0)
        built = time.perf_counter() - t0
        alone = {}
        for p, s in pairs:
            alone[p, s] = answers(backend.generate([p], seeds=[s]))[0]
        backend.generate(prompts[:4], seeds=[1, 2, 3, 4])  # warm
        sync()
        t0 = time.perf_counter()
        together = answers(backend.generate([p for p, _ in pairs], seeds=[s for _, s in pairs]))
        sync()
        batched_s = time.perf_counter() - t0
        small = CausalLMBackend(model, tokenizer, model_id='probe', dtype=dtype, invariant=invariant,
                                temperature=1.0, top_k=50, max_new_tokens=new_tokens, batch_size=2, prefix_cache_mb=0)
        rev = pairs[::-1]
        in_twos = answers(small.generate([p for p, _ in rev], seeds=[s for _, s in rev]))
        differ_text = sum(a[0] != alone[k][0] for a, k in zip(together, pairs))
        differ_lp = sum(a[1] != alone[k][1] for a, k in zip(together, pairs))
        differ_twos = sum(a[:2] != alone[k][:2] for a, k in zip(in_twos, rev))
        distinct = len({a[0] for a in alone.values()})
        scored = backend.text_logprobs(prompts[-1])
        backend.text_logprobs(prompts[0])
        again = backend.text_logprobs(prompts[-1])
        row = dict(row_tile=backend.row_tile, build_s=round(built, 2), answers=len(pairs), distinct_texts=distinct,
                   batch_vs_alone_text=differ_text, batch_vs_alone_logprobs=differ_lp,
                   pairs_reversed_vs_alone=differ_twos, text_logprobs_repeat_equal=bool(torch.equal(
                       torch.as_tensor(scored), torch.as_tensor(again))),
                   batched_generation_s=round(batched_s, 3),
                   tokens=sum(len(a[1]) for a in together))
        key = f'{dtype} invariant={invariant}'
        report[key] = row
        print(key, json.dumps(row), flush=True)
for dtype in os.environ.get('DTYPES', 'float32 bfloat16').split():
    if f'{dtype} invariant=True' not in report:
        continue
    on, off = report[f'{dtype} invariant=True'], report[f'{dtype} invariant=False']
    print(f'{dtype}: batched generation time, invariant / not: '
          f'{on["batched_generation_s"] / off["batched_generation_s"]:.2f}')
