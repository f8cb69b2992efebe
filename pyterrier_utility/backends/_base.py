"""What the backends of this package share: decoding settings that can be changed on a copy."""
import copy

from .._util import check, check_sampling

#: The decoding settings a backend may hold; those it has can be changed with ``with_settings``.
DECODING = ('temperature', 'top_k', 'top_p', 'max_new_tokens', 'repetition_penalty')


class DecodingSettings:
    """Mixin: ``with_settings(temperature=0.5)`` gives a copy sharing the model (or servers) whose
    decoding settings differ; its answers are cached under their own key."""

    @property
    def deterministic(self) -> bool:
        """True when answers do not depend on the seed (greedy decoding)."""
        return self.temperature == 0

    def with_settings(self, **changes) -> 'DecodingSettings':
        """A copy with other decoding settings (``temperature``, ``top_k``, ...), the model shared.

        Example::

            gold_backend = backend.with_settings(temperature=0.5)
        """
        unknown = [name for name in changes if name not in DECODING or not hasattr(self, name)]
        check(not unknown, repr(self), f'cannot change {unknown}; its decoding settings are '
                                       f'{[n for n in DECODING if hasattr(self, n)]}')
        clone = copy.copy(self)
        clone.__dict__.update(changes)
        check_sampling(repr(clone), temperature=clone.temperature, top_k=clone.top_k,
                       max_new_tokens=clone.max_new_tokens, top_p=getattr(clone, 'top_p', None),
                       repetition_penalty=getattr(clone, 'repetition_penalty', None))
        clone._copied()
        return clone

    def _call(self, inps, seeds, return_logprobs: bool, num_responses: int, stop_sequences):
        """The seeds (0 for every prompt when none are given) and stop sequences of a ``generate``
        call, which asks one answer per prompt and no logprobs."""
        if return_logprobs or num_responses != 1:
            raise ValueError(f'{self!r} returns one answer per prompt, without logprobs')
        return (list(seeds) if seeds is not None else [0] * len(inps)), list(stop_sequences or [])

    def _copied(self) -> None:
        """Resets what a copy must not share (connections, locks)."""
