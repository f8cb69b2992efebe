"""A finished study shown with U under another gain, nothing generated or scored (:func:`redrawn`)."""
import dataclasses
import tempfile

from ..qualities import DEFAULT_QUALITY
from ..scoring.utility import check_gain, with_gain
from ..study.config import StudyConfig, figure4_k
from ..study.folder import StudyFolder, read_study
from ..study.stats import fold_readers
from .figures import draw_figures
from .tables import write_tables


def redrawn(study: StudyFolder, gain: str) -> StudyFolder:
    """``study`` with U under ``gain`` (``'relative'`` or ``'absolute'``): ``per_query``'s ``utility``
    computed again from each query's P_k and P_0, and Table 1, the correlations and the figures drawn
    again from it with the study's own settings (its ks, correction, ``min_n``, Figure 4's k and nDCG
    order), as the study run with that gain draws them; ``study`` itself where it holds that gain already.

    Example::

        from pyterrier_utility.report.html import report_html
        page = report_html(redrawn(read_study('results/study'), 'absolute'))
    """
    if check_gain('redrawn', gain) == study.gain:
        return study
    settings = study.settings or {}

    def own(frame):  # as the study wrote it: a dataset column only where it names its datasets
        return frame if study.named_datasets else frame.drop(columns='dataset')
    per_query = own(with_gain(study.per_query, gain))
    ks = settings.get('ks') or sorted(set(per_query['k']))
    with tempfile.TemporaryDirectory() as folder:
        write_tables(per_query, folder, baseline='Rel' if 'Rel' in set(per_query['system']) else None,
                     correction=settings.get('correction'), min_n=settings.get('min_n', StudyConfig.min_n), ks=ks,
                     health=None if study.health is None else own(study.health), gain=gain,
                     quality=settings.get('quality', DEFAULT_QUALITY))
        draw_figures(fold_readers(per_query), folder,
                     figure4_k(settings.get('fig4_k', StudyConfig.fig4_k), per_query['k'], ks),
                     ndcg_order=settings.get('ndcg_order', StudyConfig.ndcg_order), formats=('png',),
                     ks=settings.get('figure_ks') or ks, gain=gain)
        drawn = read_study(folder)
    return dataclasses.replace(study, per_query=with_gain(study.per_query, gain), correlations=drawn.correlations,
                               table1=drawn.table1, figures=drawn.figures, gain=gain)
