"""What the predict command's signals cost against the study they read, in one run.

Reads a finished study folder (``--out``, default results/study); where there is none, it first makes
a small one (``pyterrier-utility study --queries 3`` into a temporary folder). The folder is only read.

The reference: a study folder records no timing, so the study's own command (``argv`` in its
settings.json) is run again into a fresh temporary folder, its generation from nothing (the
generation cache is the folder's; the index and embedding caches as they are): its wall time is the
main job's time, and its generation time the seconds inside the reader's ``generate``
(``bench_main_job.counted``). A folder this script has just made is its own reference.

Then the predict command's signals (``--perplexity --udcg``, no file written) with each transformer
timed: (a) the signals that need no model (term statistics, the score predictors, readability, the
IR measures and the answers' confidence); (b) those that need one: the dense predictors (MiniLM:
Spatial, A-Pair-Ratio), the reader's perplexity (ContextPerplexity, with the reader's loading) and
UDCG (NoResponse and UDCG); apart, the retrieval systems run again for their scores (a neural
system needs its model) and the meta-evaluation (correlations, bootstrap and the out-of-fold
regression, no model). Each is printed as a ratio to the study's generation time and to its wall.

The issue's targets: (a) adds at most 5% to the main job's time; the perplexity costs one prefill per
distinct document and context (forward passes of the reader's model counted against the distinct
texts of contexts.csv); UDCG one per distinct query and document.

Usage: python benchmarks/bench_prediction.py [--out results/study] [--queries 3]
"""
import argparse
import json
import os
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

from bench_main_job import counted, cpu_name

#: The share of the main job's time the model-free signals may add.
TARGET_SHARE = 0.05
#: The parts of each model-based group: its transformers and the loading of its model.
MODEL_GROUPS = {'dense (MiniLM)': ('Spatial', 'APairRatio', '_bi_encoder'),
                'perplexity': ('ContextPerplexity', '_reader_model'), 'UDCG': ('NoResponse', 'UDCG')}
#: The parts that are neither signals without a model nor in a group.
APART = ('_rankings', 'meta_evaluate')


def study_run(command) -> dict:
    """Runs the study ``command``: its wall time, generation time and answers generated."""
    from pyterrier_utility import cli
    print('study: pyterrier-utility', ' '.join(command), flush=True)
    start = time.perf_counter()
    with counted() as work:
        if cli.main(command):
            raise SystemExit('the study failed')
    return {'wall': time.perf_counter() - start, 'generation': work.seconds, 'answers': work.answers}


def rerun_command(folder: Path) -> list:
    """The folder's own study command, writing into a fresh temporary folder."""
    from pyterrier_utility.schema import SETTINGS_FILE
    argv = list(json.loads((folder / SETTINGS_FILE).read_text())['argv'])
    fresh = tempfile.mkdtemp(prefix='pu-bench-reference-')
    if '--out' in argv:
        argv[argv.index('--out') + 1] = fresh
        return argv
    return argv + ['--out', fresh]


@contextmanager
def timed_parts():
    """Seconds spent in each signal transformer (by class), in loading the reader and the encoder, in the
    retrieval run again and the meta-evaluation (a part called inside another counts in the outer), and
    the reader model's forward passes by the part that made them, while the block runs."""
    from pyterrier_utility.prediction import NoResponse, QueryPredictor
    from pyterrier_utility.prediction.dense import _DensePredictor
    from pyterrier_utility.study import prediction
    seconds: dict = defaultdict(float)
    passes: dict = defaultdict(int)
    running = ['elsewhere']
    originals = [(QueryPredictor, 'transform'), (NoResponse, 'transform'), (prediction, '_reader_model'),
                 (_DensePredictor, '_bi_encoder'), *((prediction, name) for name in APART)]
    saved = [getattr(owner, name) for owner, name in originals]
    load = prediction._reader_model

    def timing(function, name=None):
        def wrapped(*args, **kwargs):
            if len(running) > 1:  # inside a part already timed
                return function(*args, **kwargs)
            part = name or type(args[0]).__name__
            running.append(part)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                seconds[part] += time.perf_counter() - start
                running.pop()
        return wrapped

    def count(module, args):
        passes[running[-1]] += 1

    def loaded(config):
        backend = load(config)
        backend.model.register_forward_pre_hook(count)
        return backend

    for (owner, name), function in zip(originals, saved):
        setattr(owner, name, timing(loaded if function is load else function,
                                    None if name == 'transform' else name))
    try:
        yield seconds, passes
    finally:
        for (owner, name), function in zip(originals, saved):
            setattr(owner, name, function)


def distinct_texts(folder: Path):
    """The distinct document texts of the study's contexts, the distinct texts ContextPerplexity
    scores (documents and contexts joined, a one-document context being its document) and the
    distinct (query, document text) pairs."""
    import pandas as pd
    contexts = pd.read_csv(folder / 'contexts.csv', dtype={'qid': str, 'docno': str}, keep_default_na=False)
    contexts = contexts[contexts['docno'] != '']
    queries = pd.read_csv(folder / 'queries.csv', dtype={'qid': str})[['qid', 'query']]
    documents = set(contexts['text'])
    joined = {'\n\n'.join(cell.sort_values('position')['text'])
              for _, cell in contexts.groupby(['system', 'k', 'qid'])}
    asked = contexts.merge(queries, on='qid')
    pairs = set(zip(asked['query'], asked['text']))
    return documents, documents | joined, pairs


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', default='results/study', metavar='STUDY_DIR', help='a finished study folder')
    parser.add_argument('--queries', type=int, default=3, help='the queries of the study made where --out has none')
    args = parser.parse_args()

    from pyterrier_utility.commands import predicting as prediction
    from pyterrier_utility.prediction.parameters import PredictionParameters
    print(f'CPU: {cpu_name()}; load average {os.getloadavg()[0]:.2f} at the start')
    folder = Path(args.out)
    if (folder / 'per_query.csv').is_file():
        reference = study_run(rerun_command(folder))
    else:
        folder = Path(tempfile.mkdtemp(prefix='pu-bench-study-'))
        print(f'{args.out} holds no finished study: a small one is made in {folder}')
        reference = study_run(['study', '--out', str(folder), '--queries', str(args.queries)])
    generation, wall = reference['generation'], reference['wall']
    print(f"reference: the study's command, {reference['answers']} answers generated: wall {wall:.1f} s, "
          f'generation {generation:.1f} s', flush=True)

    settings = PredictionParameters(perplexity=True, udcg=True)
    start = time.perf_counter()
    with timed_parts() as (seconds, passes):
        found = prediction.run_prediction(folder, settings, verbose=False)
    total = time.perf_counter() - start
    grouped = {group: sum(seconds[p] for p in parts) for group, parts in MODEL_GROUPS.items()}
    model_free = total - sum(grouped.values()) - sum(seconds[p] for p in APART)

    def line(name, value):
        return (f'{name}: {value:.1f} s = {value / generation:.3f} x the generation, '
                f'{value / wall:.1%} of the main job')
    print(f"predict over {folder} ({found.signals['qid'].nunique()} queries, {len(found.signals)} rows, "
          f'{len(found.definitions)} signals): {total:.1f} s in all')
    print(line('(a) signals without a model', model_free))
    free = sorted((p, s) for p, s in seconds.items()
                  if p not in APART and all(p not in parts for parts in MODEL_GROUPS.values()))
    print('    of which ' + ', '.join(f'{p} {s:.2f} s' for p, s in free)
          + f'; term statistics and the rest {model_free - sum(s for _, s in free):.2f} s')
    for group, value in grouped.items():
        print(line(f'(b) {group}', value))
    print(line('retrieval run again (for the scores)', seconds['_rankings']))
    print(line(f'meta-evaluation ({settings.n_resamples} resamples)', seconds['meta_evaluate']))
    share = model_free / wall
    print(f"target: (a) at most {TARGET_SHARE:.0%} of the main job's time: {share:.1%}, "
          f"{'met' if share <= TARGET_SHARE else 'NOT met'} (with the retrieval run again "
          f"{(model_free + seconds['_rankings']) / wall:.1%})")
    documents, texts, pairs = distinct_texts(folder)
    perplexity, udcg = passes['ContextPerplexity'], passes['NoResponse']
    print(f'target: one prefill per distinct document and context: {perplexity} forward passes for '
          f'{len(documents)} documents and {len(texts) - len(documents)} further contexts ({len(texts)} texts), '
          f"{'met' if perplexity <= len(texts) else 'NOT met'}")
    print(f'UDCG: {udcg} prefills for {len(pairs)} distinct (query, document) pairs, '
          f"{'one each' if udcg <= len(pairs) else 'more than one each'}")
    print(f'load average {os.getloadavg()[0]:.2f} at the end')


if __name__ == '__main__':
    main()
