"""The command line's commands, over the study (:mod:`~pyterrier_utility.study`) and its report
(:mod:`~pyterrier_utility.report`): :mod:`.main` holds what each subcommand runs and prints (``study``,
``experiment``, ``attribute``, ``transfer``, ``predict``, ``report``); :mod:`.driver` runs and saves a study
from its configuration; :mod:`.attributing`, :mod:`.transferring` and :mod:`.predicting` are the
``attribute``, ``transfer`` and ``predict`` commands' steps. :mod:`pyterrier_utility.cli` parses the options
into their arguments.

Names are imported when first used (PEP 562): ``--help`` loads no model.
"""
from .._lazy import lazy_module

#: Public name -> the module defining it.
_NAMES = {
    'run': 'driver', 'save': 'driver',
    'run_attribution': 'attributing', 'save_attribution': 'attributing',
    'run_prediction': 'predicting', 'save_prediction': 'predicting',
    'run_transfer': 'transferring', 'save_transfer': 'transferring',
}
_MODULES = ('attributing', 'driver', 'main', 'predicting', 'transferring')

__all__ = sorted([*_NAMES, *_MODULES])
__getattr__, __dir__ = lazy_module(globals(), _NAMES, _MODULES)
