"""Backends the tests count calls with."""
from typing import List

from pyterrier_rag.backend import Backend, BackendOutput


class CountingBackend(Backend):
    """Deterministic answers derived from the prompt (and seed), counting every prompt generated.
    With ``logprobs``, each is an ``Answer`` of as many tokens as words, each of log-probability
    -0.5 per context of its prompt minus 0.25, truncated for an odd seed. ``calls`` holds every
    prompt generated, ``stops`` the stop sequences of every call. A prompt's worked example (the
    ``'example'`` format's) is not read: the answer is derived from the query's own part."""
    supports_seeds = True

    def __init__(self, seeded: bool = True, logprobs: bool = False):
        super().__init__('counting')
        self.seeded = seeded
        self.logprobs = logprobs
        self.calls: List[str] = []
        self.stops: List[tuple] = []  # the stop sequences of each call
        self.batch_size = 4

    @property
    def deterministic(self):
        return not self.seeded

    def generate(self, inps, *, seeds=None, max_new_tokens=None, stop_sequences=None, **kw):
        seeds = seeds or [0] * len(inps)
        self.calls.extend(inps)
        self.stops.append(tuple(stop_sequences or ()))
        outs = []
        from pyterrier_utility.prompt_formats import EXAMPLE
        for p, s in zip(inps, seeds):
            p = p.split(f'{EXAMPLE["answer"]} STOP\n\n')[-1]
            contexts = p.count('Context ')
            first = p.split('Context 1: ')[1].split('\n')[0] if 'Context 1: ' in p else 'no context'
            text = f'{first} (seed {s if self.seeded else "-"}, {contexts} contexts)'
            if self.logprobs:
                from pyterrier_utility.backends import Answer
                words = len(text.split())
                outs.append(Answer(text=text, truncated=s % 2 == 1, logprob=words * (-0.5 * contexts - 0.25),
                                   tokens=words))
            else:
                outs.append(BackendOutput(text=text))
        return outs


class EchoBackend(Backend):
    """Answers with the texts of its prompt's contexts, in order, and the seed: ``'a c #1'`` for
    Contexts 'a' and 'c' and seed 1 (``'#0'`` alone for a 0-shot prompt), so an answer says which
    documents its prompt held. ``calls`` holds every prompt generated."""
    supports_seeds = True

    def __init__(self):
        super().__init__('echo')
        self.calls: List[str] = []

    def generate(self, inps, *, seeds=None, max_new_tokens=None, stop_sequences=None, **kw):
        seeds = seeds or [0] * len(inps)
        self.calls.extend(inps)
        return [BackendOutput(text=' '.join([line.split(': ', 1)[1] for line in p.splitlines()
                                             if line.startswith('Context ')] + [f'#{s}']))
                for p, s in zip(inps, seeds)]


class FirstContextBackend(Backend):
    """Answers with its prompt's first context, or ``no_context`` without one (eRAG's and document
    utility's single-document answers). ``calls`` holds every prompt generated."""
    supports_seeds = True

    def __init__(self, no_context: str = 'unknown'):
        super().__init__('first-context')
        self.no_context = no_context
        self.calls: List[str] = []

    def generate(self, inps, *, seeds=None, **kw):
        self.calls.extend(inps)
        return [BackendOutput(text=p.split('Context 1: ')[1].split('\n')[0] if 'Context 1: ' in p
                              else self.no_context) for p in inps]
