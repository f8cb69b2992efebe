"""Where the main job's time goes: a py-spy sampling profile of the study, folded into its parts.

Runs ``pyterrier-utility study`` (``--queries`` of the main job, every other default) in each of
``--ways`` (those of ``bench_main_job.py``: ``replicas`` by default, ``padded`` the reference) under
``py-spy record``, every thread sampled, waits left out, and prints each part's share of the samples:

- decode, attention (``batch_invariant_attention`` or transformers' SDPA in a decode step);
- decode, linear layers (the output layer included);
- decode, the rest of the step's model (norms, activations, rotary embeddings, the layers' Python);
- decode, the sampler, the repetition penalty and the log-probabilities' normaliser;
- decode, the KV cache's upkeep (merging a batch's prompts, appending, dropping finished rows);
- prefill, linear layers; prefill, attention; prefill, the rest (the model's other work, the
  prefix cache's lookups and copies, tokenizing);
- the rest of generation (batches, the generation cache, the replicas' hand-offs);
- scoring (BERTScore), and the rest (imports, retrieval, tables, figures, report).

The exact reader's layers and attention run in TorchScript (``backends.hf.exact_kernels``), which py-spy does
not see into: its samples fall on the Python frames that call them (``_attend_step``, ``_attend_chunk``, and
``_decoder`` for a layer's work on either side of attention, linear layers and norms together);
``bench_exact_profile.py`` splits them into their kernels.
A thread's samples are its CPU time: with two replica threads on two cores, the shares are those of the
two cores' time together. Needs py-spy (``pip install py-spy``), run as root or where ptrace is allowed.

Usage: python benchmarks/bench_profile.py [--queries 5] [--rate 50] [--ways replicas padded]
"""
import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Iterable, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_main_job import WAYS  # noqa: E402

#: The parts, in the order printed.
PARTS = ('decode: attention', 'decode: linear layers', 'decode: the rest of the model',
         'decode: sampler, penalty, normaliser', 'decode: KV cache upkeep',
         'prefill: linear layers', 'prefill: attention', 'prefill: the rest',
         'generation: the rest', 'scoring (BERTScore)', 'imports, retrieval, tables, figures, report')

ATTENTION = ('batch_invariant_attention', 'sdpa_attention_forward', '_attend_step', '_attend_chunk')
STEP_WORK = ('SeededSampling', 'Penalty.', 'row_logsumexp', 'float_rows', '_top_k', '_softmax')
UPKEEP = ('_merge', 'start_shared', 'start_buffer', 'start_merged', 'batch_select_indices', '_Shared.update',
          '_Buffered', '_set_owner', '_compact', 'ExactBatch', '_BatchLayer')


def _any(frames: Iterable[str], markers: Iterable[str]) -> bool:
    return any(m in f for f in frames for m in markers)


LINEAR = ('TiledLinear.forward', 'Linear.forward', 'ExactLinear.__call__')
#: A step's work, by the frame that marks it; the first found wins: (markers, part).
PREFILL = ((ATTENTION, 'prefill: attention'), (LINEAR, 'prefill: linear layers'))
DECODE = ((ATTENTION, 'decode: attention'), (LINEAR, 'decode: linear layers'), (UPKEEP, 'decode: KV cache upkeep'),
          (STEP_WORK, 'decode: sampler, penalty, normaliser'),
          (('forward (', 'hf/exact.py'), 'decode: the rest of the model'))


def part_of(frames: List[str]) -> str:
    """The part a sample's stack (root first) belongs to."""
    if _any(frames, ('BertScore', 'bertscore', 'FBERT')):
        return 'scoring (BERTScore)'
    if not _any(frames, ('CausalLMBackend._generate',)):
        return 'imports, retrieval, tables, figures, report'
    for step, parts, rest in ((('CausalLMBackend._prefill',), PREFILL, 'prefill: the rest'),
                              (('backends/hf/loop.py',), DECODE, None)):
        if _any(frames, step):
            found = next((part for markers, part in parts if _any(frames, markers)), rest)
            if found:
                return found
            break
    if _any(frames, UPKEEP):
        return 'decode: KV cache upkeep'
    return 'generation: the rest'


def profile(way: str, args, tmp: Path) -> collections.Counter:
    """The samples of the study run ``way``, counted by part."""
    options, preamble, caps = WAYS[way]
    env = {**os.environ, **caps}
    if preamble:
        site = tmp / f'site-{way}'
        site.mkdir()
        (site / 'sitecustomize.py').write_text(textwrap.dedent(preamble))
        env['PYTHONPATH'] = os.pathsep.join([str(site)] + [p for p in [env.get('PYTHONPATH')] if p])
    raw = tmp / f'{way}.txt'
    command = [args.spy, 'record', '-r', str(args.rate), '-f', 'raw', '--threads', '--subprocesses', '-o', str(raw),
               '--', sys.executable, '-m', 'pyterrier_utility.cli', 'study', '--out', str(tmp / way),
               '--queries', str(args.queries), *options]
    print(f'{way}:', ' '.join(command[command.index('--') + 1:]), flush=True)
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    counts: collections.Counter = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, n = line.rsplit(' ', 1)
        counts[part_of(stack.split(';'))] += int(n)
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--queries', type=int, default=5)
    parser.add_argument('--rate', type=int, default=50, help='samples per second')
    parser.add_argument('--ways', nargs='+', choices=list(WAYS), default=['replicas', 'padded'])
    args = parser.parse_args()
    args.spy = shutil.which('py-spy') or shutil.which('py-spy', path=str(Path(sys.executable).parent))
    if args.spy is None:
        sys.exit('bench_profile.py needs py-spy: pip install py-spy')
    with tempfile.TemporaryDirectory(prefix='pu-profile-') as tmp:
        found = {way: profile(way, args, Path(tmp)) for way in args.ways}
    totals = {way: sum(counts.values()) for way, counts in found.items()}
    print('\n| part | ' + ' | '.join(args.ways) + ' |')
    print('|---|' + '---:|' * len(args.ways))
    for part in PARTS:
        print(f'| {part} | ' + ' | '.join(f'{100 * found[w][part] / totals[w]:.1f}%' for w in args.ways) + ' |')
    print('| samples (CPU seconds) | ' + ' | '.join(f'{totals[w] / args.rate:.1f}' for w in args.ways) + ' |')


if __name__ == '__main__':
    main()
