"""BM25 over a PISA index, as a picklable transformer."""
from typing import Optional

import pandas as pd
import pyterrier as pt

from .._messages import native_output_silenced


class PisaBM25(pt.Transformer):
    """BM25 over a built PISA index (pyterrier-pisa's), picklable: PISA's native retrieval context is
    opened when first needed, and again after unpickling.

    Args:
        index: the index folder.
        num_results: documents per query.

    Example::

        bm25 = PisaBM25(str(dataset.pisa_index().path), num_results=100)
    """

    def __init__(self, index: str, num_results: int = 100, verbose: bool = False):
        self.index = str(index)
        self.num_results = num_results
        self.verbose = verbose
        self._retriever: Optional[pt.Transformer] = None

    def __getstate__(self):
        return dict(self.__dict__, _retriever=None)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if self._retriever is None:
            from pyterrier_pisa import PisaIndex
            # The first retriever over an index compresses its scores: a flood of progress lines.
            with native_output_silenced(not self.verbose):
                self._retriever = PisaIndex(self.index).bm25(num_results=self.num_results)
        return self._retriever(inp)

    def fuse_rank_cutoff(self, k: int) -> 'PisaBM25':
        return self if k >= self.num_results else PisaBM25(self.index, num_results=k, verbose=self.verbose)

    def __repr__(self):
        return f'PisaBM25({self.index!r}, num_results={self.num_results})'
