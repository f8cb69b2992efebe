"""An LLM's verdict on each of several items, written once: a prompt filled per item, generated through the
generation cache, each reply parsed. LLM-retEval's match, COS-Mix's validation and the judge's grade
(:class:`~pyterrier_utility.JudgeScorer`) all ask so.

Example::

    from pyterrier_utility.verdict import Verdict, starts_with_yes
    verdict = Verdict(backend, 'Is "{answer}" an answer to "{query}"? Reply Yes or No.\\nReply:', starts_with_yes,
                      max_new_tokens=4, greedy=True)
    verdict.ask([{'query': 'what is lift?', 'answer': 'the upward force on a wing'}])   # [True] or [False]
"""
from typing import Any, Callable, Dict, List, Mapping, Sequence

from pyterrier_rag.backend import Backend

from ._checks import check
from .cache import GenerationCache
from .protocols import DecodingBackend


def starts_with_yes(reply: str) -> bool:
    """Whether a reply says yes: it starts with "yes", in any case, after white space."""
    return reply.strip().lower().startswith('yes')


class Verdict:
    """Asks ``backend`` one prompt per item and parses each reply: prompt -> generate -> parse.

    The replies go through a :class:`~pyterrier_utility.GenerationCache` (the one given, with its file,
    or one in memory), so a prompt asked again is read, not generated. A backend of this package holds the
    reply's length and stops in its decoding, set on its copy (``with_settings``; with ``greedy``, at
    temperature 0 too, so that the reader's own backend can judge without its sampling settings);
    pyterrier-rag's backends take them with each call, and with ``greedy`` one that samples is refused.

    Args:
        backend: any backend of the Reader, or a :class:`~pyterrier_utility.GenerationCache`.
        prompt: the prompt, with a ``{field}`` for each field of an item.
        parse: a reply's text -> its verdict.
        max_new_tokens: the reply's length.
        stop: where a reply ends (none: where the backend's decoding says).
        greedy: decode at temperature 0.
        owner: the name its errors give.
    """

    def __init__(self, backend: Backend, prompt: str, parse: Callable[[str], Any], *, max_new_tokens: int,
                 stop: Sequence[str] = (), greedy: bool = False, owner: str = 'Verdict'):
        cache = backend if isinstance(backend, GenerationCache) else GenerationCache(backend)
        self._per_call: Dict[str, Any] = {}
        if isinstance(cache.backend, DecodingBackend):  # it answers by its decoding
            changes: Dict[str, Any] = dict(temperature=0) if greedy else {}
            changes.update(max_new_tokens=max_new_tokens, **({'stop': tuple(stop)} if stop else {}))
            cache = cache.with_settings(**changes)
        else:  # pyterrier-rag's backends take the length and stops with each call
            check(not greedy or cache.deterministic, owner, f'{cache.backend!r} samples and cannot be copied to '
                                                            'decode greedily (temperature 0); give a greedy backend')
            self._per_call.update(max_new_tokens=max_new_tokens, **({'stop_sequences': list(stop)} if stop else {}))
        self.cache, self.prompt, self.parse = cache, prompt, parse

    @property
    def backend(self) -> Backend:
        """The backend asked (behind the cache)."""
        return self.cache.backend

    def replies(self, items: Sequence[Mapping[str, Any]]) -> List[str]:
        """The reply to each item's prompt, read from the cache where it was asked before."""
        if not items:
            return []
        return [r.text for r in self.cache.generate([self.prompt.format(**item) for item in items], **self._per_call)]

    def ask(self, items: Sequence[Mapping[str, Any]]) -> List[Any]:
        """The verdict on each item: its prompt's reply, parsed."""
        return [self.parse(reply) for reply in self.replies(items)]

    def __repr__(self):
        return f'Verdict({self.cache.backend!r})'
