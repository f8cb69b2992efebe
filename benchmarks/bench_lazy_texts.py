"""Memory and time of the texts a study needs, fetched lazily, against loading the whole corpus.

A synthetic collection of N documents (default 100 000, ~60 words each) is written as TSV and
registered with ir_datasets from local files, as a real collection would be; its docstore is built
once (like an index, not counted). Each measurement runs in a fresh child process and reports its
peak resident memory beyond the imports:

- lazy (the project): ``get_dataset('irds:...').texts.get_many(docnos)`` for the documents a study
  touches (default 2 000: e.g. 20 queries x 100 retrieved);
- whole (the reference, measured in the same run): a dict of every document's text built from
  the corpus iterator (what ``Dataset.texts`` did before), then the same lookups.

Usage: python benchmarks/bench_lazy_texts.py [--docs 100000] [--touched 2000]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ('lift drag wing flow shock boundary layer heat nose mach pressure vortex stall flap jet plume turbulence '
         'laminar supersonic hypersonic cone body slender panel skin friction').split()


def register(folder: Path) -> str:
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TsvDocs
    from ir_datasets.util import LocalDownload
    ir_datasets.registry.register('pu-bench/synthetic', Dataset(TsvDocs(LocalDownload(folder / 'docs.tsv'),
                                                                        namespace='pu-bench/synthetic')))
    return 'irds:pu-bench/synthetic'


def child(mode: str, folder: Path, touched: int) -> None:
    import pyterrier_utility as pu
    name = register(folder)
    docnos = [f'd{i}' for i in range(0, int((folder / 'count').read_text()), 50)][:touched]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if mode == 'lazy':
        texts = pu.datasets.get_dataset(name).texts.get_many(docnos)
    else:
        corpus = {d['docno']: d['text'] for d in pu.datasets.get_dataset(name).get_corpus_iter()}
        texts = {d: corpus[d] for d in docnos}
    elapsed = time.perf_counter() - start
    assert len(texts) == len(docnos)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({'seconds': elapsed, 'mib': (peak - base) / 1024, 'chars': sum(map(len, texts.values()))}))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--docs', type=int, default=100_000)
    parser.add_argument('--touched', type=int, default=2000)
    parser.add_argument('--child', choices=['lazy', 'whole'])
    parser.add_argument('--folder')
    args = parser.parse_args()
    if args.child:
        return child(args.child, Path(args.folder), args.touched)
    import random
    folder = Path(tempfile.mkdtemp(prefix='pu-lazy-'))
    env = dict(os.environ, IR_DATASETS_HOME=str(folder / 'irds'), PYTERRIER_HOME=str(folder / 'pt'))
    rng = random.Random(0)
    with open(folder / 'docs.tsv', 'w') as f:
        for i in range(args.docs):
            f.write(f'd{i}\t' + ' '.join(rng.choice(WORDS) for _ in range(60)) + '\n')
    (folder / 'count').write_text(str(args.docs))
    size = (folder / 'docs.tsv').stat().st_size / 2 ** 20
    start = time.perf_counter()
    subprocess.run([sys.executable, '-c', f'import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); '
                    f'import bench_lazy_texts as b, pathlib; import pyterrier_utility as pu; '
                    f'pu.datasets.get_dataset(b.register(pathlib.Path({str(folder)!r}))).texts["d0"]'],
                   check=True, env=env, capture_output=True)
    print(f'{args.docs} documents ({size:.0f} MiB of text); docstore built once in {time.perf_counter() - start:.1f} s '
          '(like an index: not counted)')
    results = {}
    for mode in ('lazy', 'whole'):
        out = subprocess.run([sys.executable, __file__, '--child', mode, '--folder', str(folder), '--touched',
                              str(args.touched)], check=True, env=env, capture_output=True, text=True).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
    lazy, whole = results['lazy'], results['whole']
    assert lazy['chars'] == whole['chars']
    print(f'texts of {args.touched} documents a study touches:')
    print(f'  lazy (project):      {lazy["seconds"]:7.2f} s, {lazy["mib"]:8.1f} MiB peak beyond imports')
    print(f'  whole corpus (ref.): {whole["seconds"]:7.2f} s, {whole["mib"]:8.1f} MiB peak beyond imports')
    print(f'  ratio: {whole["seconds"] / lazy["seconds"]:.1f}x faster, '
          f'{whole["mib"] / max(lazy["mib"], 0.1):.1f}x less memory')


if __name__ == '__main__':
    main()
