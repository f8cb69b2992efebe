"""The reader's perplexity of a context, by a forward pass of its model over the documents: nothing is
generated. Tian, Ganguly & Macdonald (ECIR 2026) take it per document (then the largest, smallest
and mean) and of the whole context."""
import math
from typing import Any, Dict, List, Optional

import pandas as pd

from .._checks import check
from ._base import QueryPredictor

#: How the documents' perplexities make one value per query, or ``whole``: that of the documents joined.
PERPLEXITY_AGGREGATIONS = ('max', 'min', 'mean', 'whole')


class ContextPerplexity(QueryPredictor):
    """The reader's perplexity of the query's top ``k`` documents: of a text, exp of minus the mean
    log-probability the model gives each of its tokens after those before it (the tokenizer's
    special tokens first, as a prompt starts; the first text token is predicted from them). Per
    document, aggregated by ``agg`` (``max``, ``min``, ``mean``), or ``whole``: the perplexity of the
    documents joined by a blank line; adds ``{agg}_perplexity``.

    Args:
        backend: the reader's :class:`~pyterrier_utility.backends.CausalLMBackend` (its
            ``text_logprobs``: one forward pass a text, batch-invariant as its answers; texts are cut at
            its ``max_input_length`` tokens).
        agg: a value of :data:`PERPLEXITY_AGGREGATIONS`.
        k: the documents of the context; ``None``: every row.
        verbose: a bar of the queries.

    Example::

        backend = pu.backends.gemma3_270m()
        pipeline = bm25 % 3 >> ContextPerplexity(backend, 'mean')
    """
    needs = ('qid', 'docno', 'text')
    undefined = 'a text of fewer than one predicted token'

    def __init__(self, backend: Any, agg: str = 'mean', k: Optional[int] = None, verbose: bool = False):
        check(agg in PERPLEXITY_AGGREGATIONS, 'ContextPerplexity',
              f'agg must be one of {list(PERPLEXITY_AGGREGATIONS)}, got {agg!r}')
        self.backend = backend
        self.agg = agg
        self.k = k
        self.verbose = verbose
        self.column = f'{agg}_perplexity'
        self._perplexities: Dict[str, float] = {}

    def sharing(self, other: 'ContextPerplexity') -> 'ContextPerplexity':
        """This predictor with ``other``'s perplexities: a text either has scored is not scored again.
        Returns ``self``."""
        self._perplexities = other._perplexities
        return self

    def __getstate__(self):
        return dict(self.__dict__, _perplexities={})

    def perplexity(self, text: str) -> float:
        """The model's perplexity of ``text`` (NaN when no token of it is predicted)."""
        if text not in self._perplexities:
            logprobs = self.backend.text_logprobs(text)
            self._perplexities[text] = math.exp(-float(logprobs.mean())) if len(logprobs) else float('nan')
        return self._perplexities[text]

    def predict(self, ranking: pd.DataFrame) -> float:
        docs: List[str] = (ranking if self.k is None else ranking.head(self.k))['text'].astype(str).tolist()
        if self.agg == 'whole':
            return self.perplexity('\n\n'.join(docs))
        values = pd.Series([self.perplexity(d) for d in docs], dtype=float)
        return float(getattr(values, self.agg)())

    def __repr__(self) -> str:
        return f'ContextPerplexity({self.backend.model_id!r}, agg={self.agg!r}, k={self.k!r}, verbose={self.verbose})'
