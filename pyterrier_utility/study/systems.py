"""The study's systems: its default context sources, the systems a config asks for on one dataset
(with COS-Mix and the saved runs), and those also reported in other orderings and windows."""
from typing import Dict, List, Optional

import pandas as pd
import pyterrier as pt

from .._messages import inform
from ..contexts.oracle import OracleSampler
from ..contexts.runs import RunFile
from ..errors import SettingError
from ..methods.cosmix import cosmix_system
from ..reader import Reader
from ..rerankers import RERANKERS, reranker as cached_reranker
from ..settings import LabelsLike
from ..vocabulary import DEFAULT_SYSTEMS, ORACLE_MODES, REVERSED_SYSTEMS
from .config import StudyConfig

__all__ = ['DEFAULT_SYSTEMS', 'REVERSED_SYSTEMS', 'build_systems', 'default_systems', 'ranked_systems']


def default_systems(dataset, qrels: pd.DataFrame, *, neural: str = 'dense', labels: LabelsLike = 2,
                    seed: int = 0, depth: int = 100, index: Optional[str] = None,
                    bm25: str = 'pisa', verbose: bool = False, retrieval: bool = True,
                    reranker: bool = True, oracle: str = 'sampled',
                    progress: bool = True) -> Dict[str, pt.Transformer]:
    """BM25, a neural re-ranker of BM25's top ``depth``, and the Rel / NRel oracles.

    Args:
        dataset: a :class:`pyterrier_utility.datasets.Dataset` (its ``bm25()`` and ``texts``).
        qrels: the judgements the oracles sample from.
        neural: ``'dense'`` (the MiniLM bi-encoder shipped with the offline extra) or ``'monot5'``
            (``castorini/monot5-base-msmarco``, the paper's).
        labels: the labels Rel samples from (a minimum or a set).
        seed: the oracles' sampling seed.
        depth: documents each system returns (BM25's top ``depth`` are re-ranked).
        index: an existing index for BM25 (PISA, or Terrier with ``bm25='terrier'``).
        bm25: BM25's engine, ``'pisa'`` or ``'terrier'``.
        verbose: keep the engines' own logs.
        retrieval: build BM25 (its index) and the re-ranker; ``False`` gives the oracles alone.
        reranker: load the neural re-ranker (``False``: no ``Neural`` system); its scores are
            kept in the cache folder across runs (:func:`pyterrier_utility.rerankers.reranker`).
        oracle: how Rel and NRel pick documents: ``'sampled'`` (the paper's text: a random sample of
            relevant / judged non-relevant documents, NRel completed from unjudged ones) or
            ``'authors'`` (the authors' released runs: every judged document sorted by label,
            highest first for Rel, lowest first for NRel); see :data:`~pyterrier_utility.contexts.oracle.ORACLE_MODES`.
        progress: a bar of the documents re-ranked (``False``: none).

    Example::

        systems = default_systems(d, d.get_qrels())
        results = run_study(topics, d.get_qrels(), systems, reader, d.texts, reverse=['BM25', 'Neural'])
    """
    if oracle not in ORACLE_MODES:
        raise SettingError(f'default_systems: oracle must be one of {list(ORACLE_MODES)}, got {oracle!r}')
    if neural not in RERANKERS:
        raise SettingError(f'default_systems: neural must be one of {sorted(RERANKERS)}, got {neural!r}')
    systems = {}
    if retrieval:
        systems['BM25'] = dataset.bm25(num_results=depth, index=index, engine=bm25, verbose=verbose)
        if reranker:
            systems['Neural'] = systems['BM25'] >> cached_reranker(neural, dataset.corpus_name, verbose=progress)
    return {
        **systems,
        'Rel': OracleSampler(qrels, dataset.texts, labels=labels, seed=seed, num_results=depth, mode=oracle),
        'NRel': OracleSampler(qrels, dataset.texts, relevant=False, fill_unjudged=oracle == 'sampled', seed=seed,
                              num_results=depth, mode=oracle),
    }


def build_systems(config: StudyConfig, name: str, dataset, qrels: pd.DataFrame, topics: pd.DataFrame,
                  reader: Reader) -> Dict[str, pt.Transformer]:
    """The systems of the config for one dataset: only those asked for are built (no index or
    re-ranker for an oracle-only study), then the saved runs that rank some of its queries."""
    asked = set(config.systems) - {'COSMix'}
    systems = {}
    if asked & set(DEFAULT_SYSTEMS):
        built = default_systems(dataset, qrels, neural=config.neural, labels=config.rel_labels,
                                seed=config.oracle_seed, index=config.index, bm25=config.bm25,
                                verbose=config.verbose, retrieval=bool(asked & set(REVERSED_SYSTEMS)),
                                reranker='Neural' in asked, oracle=config.oracle, progress=True)
        systems.update({s: built[s] for s in config.systems if s in built})
    if 'COSMix' in config.systems:
        systems['COSMix'] = cosmix_system(dataset, reader, threshold=config.cosmix_threshold, reranker=config.neural)
    for run_name, path in config.runs:
        run = RunFile(path, dataset.texts)
        if run.qids() & set(topics['qid'].astype(str)):
            systems[run_name] = run
        else:
            inform(f'{name}: run {run_name} ranks none of its queries; left out')
    return {s: systems[s] for s in list(config.systems) + [r for r, _ in config.runs] if s in systems}


def ranked_systems(config: StudyConfig, systems) -> List[str]:
    """The systems also reported in other orderings and windows: the retrievers and the saved runs."""
    return [s for s in systems if s in REVERSED_SYSTEMS or s in dict(config.runs)]
