"""The study, computed: its configuration, its preparation, the k-sweep, the statistics, the answers'
health, and a study folder read back. :mod:`~pyterrier_utility.report` renders what it computes (Table 1
as text, the figures, the HTML report); :mod:`~pyterrier_utility.commands` runs both as the command
line's commands.

Names are imported when first used (PEP 562): the CLI reads :mod:`.config` without loading the
study's models.

Example::

    from pyterrier_utility import study, report
    results = study.run_study(topics, qrels, study.default_systems(d, qrels), reader,
                                   d.texts, ks=[1, 3, 5], reverse=study.REVERSED_SYSTEMS)
    print(report.table1_markdown(results.table()))
    report.utility_vs_k(results.per_query, 'fig3.png')
"""
from .._lazy import lazy_module

#: Public name -> the module defining it.
_NAMES = {
    'PAPER': 'presets', 'PRESETS': 'presets', 'StudyConfig': 'config', 'SYSTEMS': 'config',
    'read_study': 'folder', 'prepare': 'preparation', 'run_prediction': 'prediction',
    'adjust': 'stats', 'correlation': 'stats', 'correlations': 'stats', 'paired_ttest': 'stats', 'table1': 'stats',
    'utility_ci': 'stats',
    'StudyResults': 'results', 'run_study': 'sweep', 'system_names': 'sweep', 'study_contexts': 'sweep',
    'DEFAULT_SYSTEMS': 'systems', 'REVERSED_SYSTEMS': 'systems', 'default_systems': 'systems',
}
_MODULES = ('collection', 'config', 'config_json', 'folder', 'health', 'merge', 'meta_evaluation', 'output',
            'prediction', 'preparation', 'presets', 'readers', 'record', 'results', 'scorers', 'stats', 'sweep',
            'systems', 'validate')

__all__ = sorted([*_NAMES, *_MODULES])
__getattr__, __dir__ = lazy_module(globals(), _NAMES, _MODULES)
