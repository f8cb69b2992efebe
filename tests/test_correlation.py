"""Correlations: scipy's values where defined, NaN where not, and the layer they sit in."""
import ast
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

import pyterrier_utility as pu
from pyterrier_utility import rank_correlation, study
from pyterrier_utility.scoring.correlation import correlation


@pytest.mark.parametrize('method, fn', [('pearson', sps.pearsonr), ('spearman', sps.spearmanr),
                                        ('kendall', sps.kendalltau)])
def test_correlation_is_scipys_over_the_finite_pairs(method, fn):
    x = np.array([0.1, 0.4, np.nan, 0.3, 0.9, 0.5])
    y = np.array([1.0, 0.2, 0.7, np.inf, 0.8, 0.1])
    r, p = correlation(x, y, method)
    expected = fn([0.1, 0.4, 0.9, 0.5], [1.0, 0.2, 0.8, 0.1])
    assert (r, p) == pytest.approx((expected[0], expected[1]))


@pytest.mark.parametrize('x, y', [([1, 2], [2, 1]), ([1, 1, 1], [1, 2, 3]), ([1, 2, 3], [0, 0, 0])])
def test_correlation_is_nan_with_fewer_than_three_pairs_or_a_constant_side(x, y):
    assert all(math.isnan(v) for v in correlation(x, y, 'spearman'))


def test_rank_correlation_is_scipys_on_the_queries_both_scored():
    x = pd.Series({'q1': 0.1, 'q2': 0.5, 'q3': 0.4, 'q4': 0.9, 'q5': np.nan})
    y = pd.Series({'q2': 0.3, 'q1': 0.2, 'q3': 0.1, 'q4': 0.4, 'q6': 1.0})
    out = rank_correlation(x, y)
    both = ([0.1, 0.5, 0.4, 0.9], [0.2, 0.3, 0.1, 0.4])
    assert out['n'] == 4
    assert (out['kendall_tau'], out['kendall_p']) == pytest.approx(tuple(sps.kendalltau(*both)))
    assert (out['spearman_rho'], out['spearman_p']) == pytest.approx(tuple(sps.spearmanr(*both)))


def test_the_study_re_exports_the_same_function():
    assert study.correlation is correlation


def test_only_the_package_and_its_cli_import_the_study():
    """The study sits above the measures: no module outside ``study/`` imports it, but those above
    it: its report (``report/``), the commands (``commands/``), the CLI (``cli.py`` and its table of
    options, whose ``--preset`` offers the study's presets) and the package's ``__init__``."""
    package = Path(pu.__file__).parent
    above = {package / '__init__.py', package / 'cli.py', package / '_options.py'}
    importers = []
    for path in package.rglob('*.py'):
        if any(package / room in path.parents for room in ('experiment', 'report', 'commands')) or path in above:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.module or ''] + [a.name for a in node.names] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            if any(n == 'experiment' or 'experiment.' in n or n.endswith('.experiment') for n in names):
                importers.append(path.name)
    assert importers == []
