"""Table 1's statistics and layouts: n shown, marks only on enough queries, intervals, the two readings of U."""
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from pyterrier_utility.report import tables as rendering
from pyterrier_utility.study import stats


def per_query(n, shift=1.0, labels='label>=2'):
    """Rel and a system A always ``shift`` above it (a paired t-test finds it at any n >= 2)."""
    rng = np.random.default_rng(n)
    base = rng.uniform(0, 0.5, n)
    rows = [(labels, system, 2, f'q{i}', 1.0 - 0.1 * i if system != 'NRel' else 0.0, 0.5,
             u + shift * (system == 'A') + 0.01 * rng.uniform(), ) for system in ('A', 'Rel', 'NRel')
            for i, u in enumerate(base)]
    return pd.DataFrame(rows, columns=['labels', 'system', 'k', 'qid', 'ndcg', 'quality_0shot', 'utility'])


def test_marks_need_min_n_paired_queries():
    few = stats.table1(per_query(3)).set_index('system')
    assert few.loc['A', 'p_baseline'] < 0.05 and few.loc['A', 'mark'] == ''
    assert stats.table1(per_query(3), min_n=3).set_index('system').loc['A', 'mark'] == '\u2020'
    assert stats.table1(per_query(5)).set_index('system').loc['A', 'mark'] == '\u2020'


def test_every_table_says_n_and_the_minimum():
    table = stats.table1(per_query(3))
    legend = 'no mark on fewer than 5 paired queries, too few for the test to say much'
    markdown = rendering.table1_markdown(table)
    assert markdown.startswith('**label>=2**: mean utility, n = 3 queries; ') and legend in markdown
    paper = rendering.table1_paper(table)
    assert paper.startswith('Mean utility, n = 3 queries; ') and legend in paper
    assert '\\caption{Mean utility, n = 3 queries; ' in rendering.table1_paper(table, 'latex')
    uneven = per_query(6)
    uneven.loc[(uneven.system == 'A') & (uneven.qid == 'q0'), 'utility'] = np.nan
    assert 'n = 5\u20136 queries per cell' in rendering.table1_paper(stats.table1(uneven))


def test_latex_table():
    table = pd.DataFrame({
        'labels': ['label>=2'] * 4 + ['label>=3'] * 4, 'k': [1, 1, 3, 3] * 2, 'system': ['A', 'Rel'] * 4,
        'utility': [-0.12345, 0.5, 0.2, 0.1, 0.3, 0.6, -0.1, 0.2], 'n': [43] * 8,
        'quality_0shot': [0.41] * 4 + [0.39] * 4, 'p_baseline': [0.01, np.nan] * 4, 'p_reversal': [np.nan] * 8,
        'mark': ['\u2020', ''] * 4})
    assert rendering.table1_paper(table, 'latex') == (
        '\\begin{table}\n\\centering\n'
        '\\caption{Mean utility, n = 43 queries; $\\dagger$ differs from Rel, $\\ddagger$ differs from its unreversed '
        'ordering (paired t-test, p $<$ 0.05; no mark on fewer than 5 paired queries, too few for the test to say '
        'much). 0-shot: the mean $F_{\\mathrm{BERT}}$ of the answers without context; in bold, the best retrieval '
        'system of each column.}\n'
        '\\label{tab:utility}\n'
        '\\begin{tabular}{lrrrrrr}\n\\toprule\n'
        ' & \\multicolumn{3}{c}{label$\\geq$2} & \\multicolumn{3}{c}{label$\\geq$3} \\\\\n'
        '\\cmidrule(lr){2-4}\\cmidrule(lr){5-7}\n'
        'System & 0-shot & $k=1$ & $k=3$ & 0-shot & $k=1$ & $k=3$ \\\\\n'
        '\\midrule\n'
        'A & 0.410 & \\textbf{$-$0.123}$^{\\dagger}$ & \\textbf{0.200}$^{\\dagger}$ & 0.390 & '
        '\\textbf{0.300}$^{\\dagger}$ & \\textbf{$-$0.100}$^{\\dagger}$ \\\\\n'
        'Rel &  & 0.500 & 0.100 &  & 0.600 & 0.200 \\\\\n'
        '\\bottomrule\n\\end{tabular}\n\\end{table}\n')
    two = pd.concat([table.assign(dataset='DL19'), table.assign(dataset='DL20')])
    tex = rendering.table1_paper(two, 'latex')
    assert 'Dataset & System & 0-shot' in tex and '\nDL19 & A & 0.410' in tex and '\nDL20 & A & 0.410' in tex
    assert '\\midrule\nDL20' in tex


def test_correlation_intervals():
    frame = per_query(12)
    corr = stats.correlations(frame, resamples=500, seed=3).set_index('system')
    assert list(corr.columns[-2:]) == ['low', 'high']
    a = frame[frame.system == 'A']
    assert corr.loc['A', 'r'] == pytest.approx(sps.pearsonr(a['ndcg'], a['utility'])[0])
    assert corr.loc['A', 'low'] <= corr.loc['A', 'r'] <= corr.loc['A', 'high']
    check = sps.bootstrap((a['ndcg'].to_numpy(), a['utility'].to_numpy()), lambda x, y: sps.pearsonr(x, y)[0],
                          paired=True, vectorized=False, n_resamples=4000, method='percentile', random_state=1)
    assert corr.loc['A', 'low'] == pytest.approx(check.confidence_interval.low, abs=0.08)
    assert corr.loc['A', 'high'] == pytest.approx(check.confidence_interval.high, abs=0.08)
    assert math.isnan(corr.loc['NRel', 'low'])  # nDCG constant: r undefined, no interval
    linear = frame.assign(utility=2 * frame['ndcg'])
    line = stats.correlations(linear[linear.system == 'A'], resamples=200).iloc[0]
    assert (line['low'], line['high']) == pytest.approx((1.0, 1.0))
    assert stats.correlations(frame, resamples=50).equals(stats.correlations(frame, resamples=50))


def test_utility_as_mean_of_per_sample_ratios():
    # P_0 = 0.5 and 0.25 in samples 0 and 1, P_k = 0.6 and 0.5: the ratio of means is
    # (0.55 - 0.375) / 0.375 = 0.4667, the mean of per-sample ratios (0.2 + 1.0) / 2 = 0.6.
    scores = pd.DataFrame({'labels': ['label>=2'] * 4, 'system': ['0-shot', '0-shot', 'A', 'A'], 'k': [0, 0, 2, 2],
                           'qid': ['q1'] * 4, 'sample': [0, 1, 0, 1], 'quality': [0.5, 0.25, 0.6, 0.5]})
    pq = pd.DataFrame({'labels': ['label>=2'], 'system': ['A'], 'k': [2], 'qid': ['q1'], 'quality_0shot': [0.375],
                       'quality': [0.55], 'utility': [(0.55 - 0.375) / 0.375]})
    out = stats.per_sample_utility(pq, scores)
    assert list(out.columns) == list(pq.columns)
    assert out['utility'].iloc[0] == pytest.approx(0.6)
    zero = scores.assign(quality=[0.0, 0.25, 0.6, 0.5])
    assert stats.per_sample_utility(pq, zero)['utility'].iloc[0] == pytest.approx(1.0)  # sample 0 left out


def test_a_dataset_with_one_label_set_fills_the_last_block_as_the_paper_prints_dev_small():
    """The paper prints DL under r_DL in {2,3} and r_DL = 3 and dev_small (binary labels) under
    "r_DL = 3, r_dev_small = 1": a dataset with fewer label sets fills the last blocks, with its own
    0-shot FBERT, and no † where it has no Rel."""
    dl = pd.DataFrame({
        'dataset': 'DL19', 'labels': ['label in {2,3}'] * 2 + ['label in {3}'] * 2, 'k': [2] * 4,
        'system': ['BM25', 'Rel'] * 2, 'utility': [0.058, 0.103, 0.031, 0.124], 'n': [43] * 4,
        'quality_0shot': [0.643] * 2 + [0.61] * 2, 'p_baseline': [0.01, np.nan] * 2, 'p_reversal': [np.nan] * 4,
        'mark': ['\u2020', ''] * 2})
    dev = pd.DataFrame({
        'dataset': 'dev_small', 'labels': 'label in {1}', 'k': [2, 2], 'system': ['BM25', 'BM25-r'],
        'utility': [0.041, 0.039], 'n': [6980] * 2, 'quality_0shot': [0.557] * 2, 'p_baseline': [np.nan] * 2,
        'p_reversal': [np.nan, 0.001], 'mark': ['', '\u2021']})
    table = pd.concat([dl, dev], ignore_index=True)
    rows = rendering.table1_paper(table).split('\n\n')[1]
    assert rows == (
        '| Dataset | System | label in {2,3}, 0-shot | label in {2,3}, k=2 '
        '| label in {3} / label in {1}, 0-shot | label in {3} / label in {1}, k=2 |\n'
        '|---|---|---:|---:|---:|---:|\n'
        '| DL19 | BM25 | 0.643 | 0.058\u2020 | 0.610 | 0.031\u2020 |\n'
        '|  | Rel |  | 0.103 |  | 0.124 |\n'
        '| dev_small | BM25 |  |  | 0.557 | 0.041 |\n'
        '|  | BM25-r |  |  |  | 0.039\u2021 |\n')
    tex = rendering.table1_paper(table, 'latex')
    assert '\\multicolumn{2}{c}{label in \\{3\\} / label in \\{1\\}}' in tex
    assert ('\ndev\\_small & BM25 &  &  & 0.557 & \\textbf{0.041} \\\\\n'
            ' & BM25-r &  &  &  & 0.039$^{\\ddagger}$ \\\\') in tex
    # The same label sets everywhere: the blocks are the label sets, as before.
    same = rendering.table1_paper(pd.concat([dl, dl.assign(dataset='DL20')], ignore_index=True))
    assert '| label in {2,3}, 0-shot | label in {2,3}, k=2 | label in {3}, 0-shot | label in {3}, k=2 |' in same


def test_each_table_names_the_column_its_frame_lacks_before_computing():
    from pyterrier.validate import InputValidationError
    frame = per_query(5)
    for name, missing, compute in (('table1', 'quality_0shot', stats.table1), ('table1', 'labels', stats.table1),
                                   ('correlations', 'ndcg', stats.correlations),
                                   ('utility_ci', 'utility', stats.utility_ci)):
        with pytest.raises(InputValidationError, match=rf"^{name}: input has no column '{missing}'"):
            compute(frame.drop(columns=missing))
