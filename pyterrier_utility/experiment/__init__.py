"""The study: a k-sweep over systems, Table 1 with significance marks, and Figures 3-5.

Names are imported when first used (PEP 562): the CLI reads :mod:`.config` without loading the
study's models and plotting.

Example::

    from pyterrier_utility import experiment
    results = experiment.run_study(topics, qrels, experiment.default_systems(d, qrels), reader,
                                   d.texts, ks=[1, 3, 5], reverse=experiment.REVERSED_SYSTEMS)
    print(experiment.table1_markdown(results.table()))
    experiment.utility_vs_k(results.per_query, 'fig3.png')
"""
from .._lazy import lazy_module

#: Public name -> the module defining it.
_NAMES = {
    'PAPER': 'config', 'PRESETS': 'config', 'StudyConfig': 'config',
    'correlation_vs_k': 'figures', 'draw_figures': 'figures', 'ndcg_vs_utility': 'figures', 'utility_vs_k': 'figures',
    'read_study': 'folder', 'query_view': 'viewer', 'write_report': 'html',
    'adjust': 'stats', 'correlation': 'stats', 'correlations': 'stats', 'paired_ttest': 'stats', 'table1': 'stats',
    'table1_markdown': 'rendering', 'table1_paper': 'rendering', 'utility_ci': 'stats',
    'StudyResults': 'results', 'write_tables': 'results', 'run_study': 'study', 'system_names': 'study',
    'DEFAULT_SYSTEMS': 'systems', 'REVERSED_SYSTEMS': 'systems', 'SYSTEMS': 'config', 'default_systems': 'systems',
    'report': 'commands', 'run': 'driver', 'save': 'driver', 'prepare': 'preparation',
    'run_attribution': 'attribution', 'save_attribution': 'attribution', 'study_contexts': 'study',
}
# ``study`` is the module (run_study's); the CLI's study command is ``commands.study``.
_MODULES = ('attribution', 'commands', 'config', 'driver', 'figures', 'folder', 'html', 'preparation', 'rendering',
            'results', 'stats', 'study', 'systems', 'viewer')

__all__ = sorted([*_NAMES, *_MODULES])
__getattr__, __dir__ = lazy_module(globals(), _NAMES, _MODULES)
