"""COS-Mix's validation step: the LLM judges whether its own answer resolves the question."""
from typing import Sequence

import numpy as np
from pyterrier_rag.backend import Backend

from ..._checks import check
from ...cache import GenerationCache
from ...verdict import Verdict, starts_with_yes

#: The validator's prompt (``{query}``, ``{answer}``); a reply starting with "yes" accepts the answer.
#: COS-Mix's own prompt asks a website assistant for feedback, 0 meaning unsatisfactory; this one asks
#: for Yes or No, which any reader model can give.
VALIDATION_PROMPT = ('Someone asked the question below and received the answer below. Decide whether the answer '
                     'resolves the question: it says what was asked, rather than saying the information is '
                     'missing or answering something else.\nQuestion: {query}\nAnswer: {answer}\n'
                     'Does the answer resolve the question? Reply Yes or No.\nReply:')


class Validator:
    """Judges (question, answer) pairs with an LLM: True where the reply starts with "yes".

    A verdict is decoded greedily: a backend that samples is used through its copy at temperature 0
    (``with_settings``), so the reader's own backend can validate without its sampling settings; a
    sampling backend that cannot be copied so is refused. An empty answer is not satisfactory and is
    not sent. Replies are cached like the reader's answers (in the same file when given a
    :class:`~pyterrier_utility.GenerationCache` with a path).

    Args:
        backend: any backend of the Reader (or a :class:`~pyterrier_utility.GenerationCache`).
        prompt: the validation prompt, with ``{query}`` and ``{answer}``.
        max_new_tokens: the reply's length.

    Example::

        validator = Validator(pyterrier_utility.backends.gemma3_270m())  # decodes at temperature 0
        validator.validate(['what is lift?'], ['the upward force on a wing'])
    """

    def __init__(self, backend: Backend, prompt: str = VALIDATION_PROMPT, max_new_tokens: int = 4):
        check('{query}' in prompt and '{answer}' in prompt, 'Validator', 'prompt must contain {query} and {answer}')
        self.verdict = Verdict(backend, prompt, starts_with_yes, max_new_tokens=max_new_tokens, stop=('\n',),
                               greedy=True, owner='Validator')
        self.prompt = prompt
        self.max_new_tokens = max_new_tokens

    @property
    def cache(self) -> GenerationCache:
        """The generation cache its replies are kept in."""
        return self.verdict.cache

    def validate(self, queries: Sequence[str], answers: Sequence[str]) -> np.ndarray:
        """True where the answer is judged to resolve its question."""
        verdict = np.zeros(len(queries), dtype=bool)
        asked = [i for i, a in enumerate(answers) if str(a).strip()]
        if asked:
            verdict[asked] = self.verdict.ask([dict(query=queries[i], answer=answers[i]) for i in asked])
        return verdict

    def __repr__(self):
        return f'Validator({self.cache.backend!r})'
