"""A study rendered: Table 1 as Markdown and LaTeX and the tables of a study folder (:mod:`.tables`),
Figures 3 to 5 (:mod:`.figures`), the browsable HTML report with its query explorer (:mod:`.html`,
:mod:`.explorer`, built of :mod:`.markup`'s pieces), the predictions' heatmap and section
(:mod:`.prediction_report`), the transfer's figures and section across readers (:mod:`.transfer_report`), a
finished study drawn again with U as the other gain (:mod:`.redraw`), and one query inline in Jupyter
(:mod:`.viewer`). Everything here reads what :mod:`~pyterrier_utility.study` computes.

Names are imported when first used (PEP 562): matplotlib only where a figure is drawn.

Example::

    from pyterrier_utility import report
    print(report.table1_markdown(results.table()))
    report.write_study(results, 'results/study')
    report.write_report('results/study')   # results/study/report.html
"""
from .._lazy import lazy_module

#: Public name -> the module defining it.
_NAMES = {
    'table1_markdown': 'tables', 'table1_paper': 'tables', 'write_tables': 'tables', 'write_study': 'tables',
    'correlation_vs_k': 'figures', 'draw_figures': 'figures', 'ndcg_vs_utility': 'figures', 'utility_vs_k': 'figures',
    'write_report': 'html', 'query_view': 'viewer', 'redrawn': 'redraw',
}
_MODULES = ('explorer', 'figures', 'html', 'markup', 'prediction_report', 'redraw', 'tables', 'transfer_report',
            'viewer')

__all__ = sorted([*_NAMES, *_MODULES])
__getattr__, __dir__ = lazy_module(globals(), _NAMES, _MODULES)
