"""How many queries and samples the main job needs for its positive control to hold on every sampling.

Runs ``pyterrier-utility study`` once at the largest design (``--queries`` and ``--samples`` of
``--largest``, plus any extra study options), then reads smaller designs from copies of that run's
generation cache (a design of fewer queries, fewer samples, or samples from another ``--seed``:
sample j uses seed + j, so every answer it needs is in the cache and none is generated). Prints, per
design and seed: the answers, the shares empty and cut (health.csv), and Rel's and NRel's mean U with
the paired test's p at every label set and k (the study's positive control), and whether Rel beats
NRel everywhere and Rel is above 0 at k >= 3.

Usage: python benchmarks/bench_study_size.py [--largest 20 5] [--designs 10x5 10x3 20x3 20x2] [--seeds 0 1 2]
       [extra study options]
"""
import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from bench_max_new_tokens import study


def control(folder: Path) -> dict:
    """The positive control and the health of one study folder."""
    health = pd.read_csv(folder / 'health.csv')
    weight = health['answers'] / health['answers'].sum()
    table = pd.read_csv(folder / 'table1.csv')
    u = table[table['system'].isin(['Rel', 'NRel'])].pivot_table(index=['labels', 'k'], columns='system',
                                                                  values='utility')
    p = table[table['system'] == 'NRel'].set_index(['labels', 'k'])['p_baseline']
    cells = '; '.join(f'{labels} k={k}: {row.Rel:.3f} vs {row.NRel:.3f} (p {p[(labels, k)]:.2g})'
                      for (labels, k), row in u.iterrows())
    return {'answers': int(health['answers'].sum()), 'empty': float((health['empty'] * weight).sum()),
            'cut': float((health['cut'] * weight).sum()), 'cells': cells,
            'Rel > NRel': bool((u['Rel'] > u['NRel']).all()),
            'Rel > 0 at k >= 3': bool((u.loc[u.index.get_level_values('k') >= 3, 'Rel'] > 0).all()),
            'significant': bool((p < 0.05).all())}


def reread(cache: Path, queries: int, samples: int, seed: int, extra: list) -> dict:
    """A design read from a copy of ``cache``: a study in a fresh folder that generates nothing."""
    out = Path(tempfile.mkdtemp(prefix=f'pu-size-q{queries}s{samples}seed{seed}-'))
    shutil.copy(cache, out / cache.name)
    done = subprocess.run([sys.executable, '-m', 'pyterrier_utility.cli', 'study', '--out', str(out),
                           '--queries', str(queries), '--samples', str(samples), '--seed', str(seed)] + extra,
                          check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if ', 0 generated' not in done.stdout:
        raise SystemExit(f'design q{queries} s{samples} seed {seed} generated answers: the cache does not hold it')
    return control(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--largest', type=int, nargs=2, default=[20, 5], metavar=('QUERIES', 'SAMPLES'))
    parser.add_argument('--designs', nargs='+', default=['10x5', '10x3', '15x3', '20x2', '20x3', '20x5'])
    parser.add_argument('--seeds', type=int, nargs='+', default=[0, 1, 2])
    args, extra = parser.parse_known_args()
    queries, samples = args.largest
    big = study(['--queries', str(queries), '--samples', str(samples)] + extra, 'pu-size-')
    cache = Path(big['folder']) / 'generations.sqlite'
    print(f'largest design: {queries} queries x {samples} samples, {big["generated"]} answers generated in '
          f'{big["generation"]:.0f} s (load {big["load"]})\n')
    print('| queries | samples | seed | answers | empty | cut | Rel > NRel | Rel > 0 at k >= 3 | every p < 0.05 | '
          'Rel vs NRel (mean U, p) |')
    print('|---:|---:|---:|---:|---:|---:|---|---|---|---|')
    for design in args.designs:
        q, s = (int(x) for x in design.split('x'))
        for seed in args.seeds:
            if seed + s > samples:
                continue
            r = reread(cache, q, s, seed, extra)
            print(f'| {q} | {s} | {seed} | {r["answers"]} | {r["empty"]:.1%} | {r["cut"]:.1%} | {r["Rel > NRel"]} | '
                  f'{r["Rel > 0 at k >= 3"]} | {r["significant"]} | {r["cells"]} |', flush=True)


if __name__ == '__main__':
    main()
