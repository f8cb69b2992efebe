"""The study: a k-sweep over systems, Table 1 with significance marks, and Figures 3-5.

Example::

    from pyterrier_utility import experiment
    results = experiment.run_study(topics, qrels, experiment.default_systems(d, qrels), reader,
                                   d.texts, ks=[1, 3, 5], reverse=experiment.REVERSED_SYSTEMS)
    print(experiment.table1_markdown(results.table()))
    experiment.utility_vs_k(results.per_query, 'fig3.png')
"""
from . import config
from .config import PAPER, PRESETS, StudyConfig
from .figures import correlation_vs_k, draw_figures, ndcg_vs_utility, utility_vs_k
from .folder import read_study
from .html import query_view, write_report
from .stats import adjust, correlation, correlations, paired_ttest, table1, table1_markdown, table1_paper, utility_ci
from .study import StudyResults, run_study, system_names, write_tables
from .systems import REVERSED_SYSTEMS, SYSTEMS, default_systems
from .driver import one_k, report, run, save, study

__all__ = ['read_study', 'query_view', 'utility_ci', 'write_report', 'PAPER', 'PRESETS', 'StudyConfig', 'config', 'one_k', 'report', 'run', 'save', 'study', 'REVERSED_SYSTEMS', 'SYSTEMS', 'StudyResults', 'adjust', 'correlation', 'correlation_vs_k', 'correlations',
           'default_systems', 'draw_figures', 'ndcg_vs_utility', 'paired_ttest', 'run_study', 'system_names', 'table1',
           'table1_markdown', 'table1_paper', 'utility_vs_k', 'write_tables']
