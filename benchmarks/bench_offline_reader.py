"""Candidates for the offline reader, each run as the main job: answer health, speed and mean U.

Runs ``pyterrier-utility study`` (its defaults: 10 Cranfield queries, k = 1, 3, 5, 5 samples, plus any
extra options given) once per candidate, each in a fresh folder (its own generation cache, so every
answer is generated), one after the other, and prints per candidate: the shares of answers empty, cut
at max_new_tokens and copied from a context document (the study's health.csv), answers generated per
second of the generation phase, and the mean U of Rel, NRel, BM25 and Neural per label set and k
(table1.csv); then whether each meets the bars of a trustworthy default: empty <= 1%, cut <= 10%,
Rel > NRel at every k and label set, Rel > 0 at k >= 3.

A candidate is a prompt format (``plain``, or ``example``: a worked example first), a decoding (the
repetition penalty 1.2 over every token or over the last 64 as llama.cpp counts it, or none; the stop
sequences of a base model, or also the end of the answer's line) and an offline reader; every option
is given explicitly, so the result does not depend on the study's defaults.

Usage: python benchmarks/bench_offline_reader.py [--candidates NAME ...] [extra study options, e.g. --queries 5]
"""
import argparse
from pathlib import Path

import pandas as pd
from bench_max_new_tokens import study

#: The stop sequences of a base model (the study's STOP, a new Question or Context line), and the same
#: with the end of the answer's line (few-shot prompts of base models answer in one line).
BASE_STOPS = ['--stop', 'STOP', '\nQuestion:', '\nContext']
LINE_STOPS = ['--stop', 'STOP', '\n']
#: The repetition penalty over every token of prompt and answer, over the last 64 (llama.cpp's
#: window), or none.
EVERY = ['--repetition-penalty', '1.2', '--repeat-last-n', 'none']
LAST_64 = ['--repetition-penalty', '1.2', '--repeat-last-n', '64']
NONE = ['--repetition-penalty', '1', '--repeat-last-n', 'none']
PLAIN, EXAMPLE = ['--prompt-format', 'plain'], ['--prompt-format', 'example']
#: name -> the study options that make it.
CANDIDATES = {
    'plain, penalty on every token': PLAIN + EVERY + BASE_STOPS,
    'plain, penalty on the last 64': PLAIN + LAST_64 + BASE_STOPS,
    'plain, no penalty': PLAIN + NONE + BASE_STOPS,
    'plain, penalty on the last 64, one line': PLAIN + LAST_64 + LINE_STOPS,
    'example, penalty on every token': EXAMPLE + EVERY + BASE_STOPS,
    'example, penalty on the last 64': EXAMPLE + LAST_64 + BASE_STOPS,
    'example, no penalty': EXAMPLE + NONE + BASE_STOPS,
    'example, penalty on the last 64, one line': EXAMPLE + LAST_64 + LINE_STOPS,
    'example, no penalty, one line': EXAMPLE + NONE + LINE_STOPS,
    'smollm2-135m (instruct, chat template), plain, penalty on the last 64':
        ['--reader', 'smollm2-135m'] + PLAIN + LAST_64 + BASE_STOPS,
}
#: The systems whose mean U is printed.
SHOWN = ('Rel', 'NRel', 'BM25', 'Neural')
#: The bars of a trustworthy default.
BARS = {'empty': 0.01, 'cut': 0.10}


def measure(name: str, extra: list) -> dict:
    """One candidate as the main job: its health over all answers, speed, mean U and the bars."""
    done = study(CANDIDATES[name] + extra, 'pu-reader-')
    folder = Path(done['folder'])
    health = pd.read_csv(folder / 'health.csv')
    weight = health['answers'] / health['answers'].sum()
    shares = {column: float((health[column] * weight).sum()) for column in ('empty', 'cut', 'copied')}
    table = pd.read_csv(folder / 'table1.csv')
    u = table[table['system'].isin(SHOWN)].pivot_table(index=['labels', 'k'], columns='system', values='utility')
    control = (u['Rel'] > u['NRel']).all()
    positive = (u.loc[u.index.get_level_values('k') >= 3, 'Rel'] > 0).all()
    bars = {'empty <= 1%': shares['empty'] <= BARS['empty'], 'cut <= 10%': shares['cut'] <= BARS['cut'],
            'Rel > NRel': bool(control), 'Rel > 0 at k >= 3': bool(positive)}
    return {'name': name, **shares, 'answers/s': done['generated'] / done['generation'],
            'generated': done['generated'], 'generation': done['generation'], 'load': done['load'],
            'u': u[[s for s in SHOWN if s in u.columns]], 'bars': bars, 'folder': str(folder),
            'tokens': float((health['mean_tokens'] * weight).sum())}


def report(rows: list) -> str:
    """The candidates side by side (health, speed, bars), then each one's mean U."""
    lines = ['| candidate | empty | cut | copied | mean tokens | answers/s | generation (s) | load | bars met |',
             '|---|---:|---:|---:|---:|---:|---:|---|---|']
    for r in rows:
        met = ', '.join(k for k, v in r['bars'].items() if v) or 'none'
        failed = [k for k, v in r['bars'].items() if not v]
        lines.append(f'| {r["name"]} | {r["empty"]:.1%} | {r["cut"]:.1%} | {r["copied"]:.1%} | {r["tokens"]:.1f} | '
                     f'{r["answers/s"]:.2f} | {r["generation"]:.1f} | {r["load"]} | '
                     + ('**all**' if not failed else f'{met}; fails {", ".join(failed)}') + ' |')
    for r in rows:
        u = r['u']
        lines += ['', f'Mean U, {r["name"]} ({r["folder"]}):', '', '| labels | k | ' + ' | '.join(u.columns) + ' |',
                  '|---|---:|' + '---:|' * len(u.columns)]
        lines += [f'| {labels} | {k} | ' + ' | '.join(f'{v:.3f}' for v in row) + ' |'
                  for (labels, k), row in zip(u.index, u.to_numpy())]
    return '\n'.join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--candidates', nargs='+', choices=list(CANDIDATES), default=list(CANDIDATES))
    args, extra = parser.parse_known_args()
    rows = []
    for name in args.candidates:
        rows.append(measure(name, extra))
        print(report(rows), flush=True)


if __name__ == '__main__':
    main()
