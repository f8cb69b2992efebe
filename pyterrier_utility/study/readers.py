"""A study's reader built from its config: the backend, placed where the command asks, behind the
folder's generation cache.

Example::

    from pyterrier_utility.study import StudyConfig
    from pyterrier_utility.study.readers import build_reader
    reader = build_reader(StudyConfig(), 'gemma3-270m')
"""
from pathlib import Path
from typing import Optional

from .. import backends
from ..cache import GenerationCache
from ..engines import engine_of
from ..errors import SettingError
from ..reader import Reader
from ..settings import Placement
from .config import StudyConfig


def build_reader(config: StudyConfig, name: str, cache_path: Optional[Path] = None,
                 placement: Placement = Placement()) -> Reader:
    """The reader ``name`` of the config: its backend (every decoding setting in it) behind a
    generation cache (one file for every reader: keys hold the model), where ``placement`` says: on a Ray
    cluster, in its ``replicas`` Ray actors of ``replica_gpus`` GPUs each
    (:class:`~pyterrier_utility.backends.RayBackend`); a reader computed on this CPU, in ``replicas``
    threads of this process, each computing on one torch thread
    (:class:`~pyterrier_utility.backends.ThreadBackend`; by default one per thread torch would use); else in
    this process. Its answers and cache keys are the same everywhere."""
    options = config.backend_options(name)
    if placement.ray:
        backend = backends.RayBackend(name, placement.replicas or 1, num_gpus=placement.replica_gpus,
                                      address=placement.ray, **options)
    elif engine_of(name).on_cpu:
        replicas = placement.replicas or backends.cpu_replicas()
        backend = (backends.ThreadBackend(name, replicas, **options) if replicas > 1
                   else backends.get_backend(name, **options))
    else:
        if (placement.replicas or 1) > 1:
            raise SettingError(f'--replicas {placement.replicas} without --ray: replicas are for readers '
                               f'computed on this CPU (offline, huggingface:), not {name!r}; give --ray to run it '
                               'on Ray actors')
        backend = backends.get_backend(name, **options)
    return Reader(GenerationCache(backend, cache_path), n_samples=config.samples, seed=config.seed,
                  prompt_format=config.prompt_format, verbose=True)
