"""How likely the reader is to decline to answer from one document: the probability of its abstention
marker as the first token of its answer, by a forward pass (Amiraz et al., ACL 2025; the passage
scores of UDCG, Trappolini et al., EACL 2026). Nothing is generated."""
from typing import Any, Dict, Tuple

import pandas as pd
import pyterrier as pt

from .._frames import validate_columns

#: The answer the prompt asks for when the document does not hold the answer.
NO_RESPONSE = 'NO-RESPONSE'
#: The prompt of one query and one document, with ``{text}`` and ``{query}``.
ABSTENTION_PROMPT = (f'Answer the question from the document below alone, in a few words and without explanation. '
                     f'If the document does not contain the answer, reply {NO_RESPONSE}.\n\n'
                     'Document: {text}\nQuestion: {query}\nAnswer:')


class NoResponse(pt.Transformer):
    """The reader's probability of declining to answer each row's query from that row's document alone:
    the probability that its answer to :data:`ABSTENTION_PROMPT` starts with the first token of
    :data:`NO_RESPONSE` (after a space when the backend does not use a chat template, as it follows
    ``Answer:``). Adds ``no_response`` to every row; each distinct (query, text) is prefilled once.
    ``1 - no_response`` is a relevant document's utility and an irrelevant one's distracting effect
    (Amiraz, Cuconasu, Filice & Karnin, ACL 2025), which :class:`~.udcg.UDCG` combines.

    Args:
        backend: the reader's :class:`~pyterrier_utility.backends.CausalLMBackend` (its prompt
            formatting, chat template and ``max_input_length``).
        verbose: a bar of the prompts.

    Example::

        backend = pu.backends.gemma3_270m()
        pipeline = bm25 % 5 >> pu.prediction.NoResponse(backend) >> pu.prediction.UDCG(qrels)
    """

    def __init__(self, backend: Any, verbose: bool = False):
        self.backend = backend
        self.verbose = verbose
        self._probabilities: Dict[Tuple[str, str], float] = {}

    def __getstate__(self):
        return dict(self.__dict__, _probabilities={})

    @property
    def token(self) -> int:
        """The id of the first token of :data:`NO_RESPONSE` as the reader's answer would start with it."""
        lead = '' if self.backend.chat_template else ' '
        return self.backend.tokenizer.encode(lead + NO_RESPONSE, add_special_tokens=False)[0]

    def probability(self, query: str, text: str) -> float:
        """The probability that the reader's answer to ``query`` from ``text`` alone starts with the
        marker."""
        if (query, text) not in self._probabilities:
            logprobs = self.backend.next_token_logprobs(ABSTENTION_PROMPT.format(text=text, query=query))
            self._probabilities[query, text] = float(logprobs[self.token].exp())
        return self._probabilities[query, text]

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query', 'docno', 'text'])
        pairs = list(zip(inp['query'].astype(str), inp['text'].astype(str)))
        values = [self.probability(q, t) for q, t in pt.tqdm(pairs, desc='NoResponse', unit='doc',
                                                             disable=not self.verbose)]
        return inp.assign(no_response=pd.Series(values, index=inp.index, dtype=float))

    def __repr__(self) -> str:
        return f'NoResponse({self.backend.model_id!r}, verbose={self.verbose})'
