"""A backend of the package's kind whose failures are scripted, for the Ray tests: its actors import it
from here (the tests put this folder on the workers' ``PYTHONPATH``)."""
import copy
import os
import signal
import time
from pathlib import Path
from typing import List, Optional

from pyterrier_utility.backends._base import Answer, DecodingBackendBase, query_of, split_decoding
from pyterrier_utility.prompt_formats import PROMPT_FORMATS
from pyterrier_utility.settings import Decoding


class ScriptedBackend(DecodingBackendBase):
    """Answers ``'<query> #<seed>'``, two answers per batch: at once, or after ``hold`` seconds (in steps
    of 10 ms, as a decode loop's) for each batch past the first ``quick`` it answers that has a prompt
    holding ``hold_on`` (any, by default). It raises ``ValueError`` on a prompt holding ``fail_on`` (at
    once); on a prompt holding ``kill_on`` it SIGKILLs its own process, the first time only: it creates
    the file ``marker`` first, so an actor restarted after it answers."""

    def __init__(self, fail_on: Optional[str] = None, kill_on: Optional[str] = None, marker: Optional[str] = None,
                 batch_size: int = 2, hold: float = 0.0, quick: int = 0, hold_on: str = '', **decoding):
        decoded = split_decoding('ScriptedBackend', None, Decoding(), decoding)
        super().__init__('scripted')
        self._set_decoding(decoded)
        self.fail_on, self.kill_on, self.marker = fail_on, kill_on, marker
        self.batch_size = batch_size
        self.hold, self.quick, self.hold_on, self.batches = hold, quick, hold_on, 0

    def _generate(self, inps: List[str], seeds: List[int], **options) -> List[Answer]:
        if self.fail_on is not None and any(self.fail_on in p for p in inps):
            raise ValueError('scripted failure')
        if self.kill_on is not None and any(self.kill_on in p for p in inps) and not Path(self.marker).exists():
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        self.batches += 1
        if self.batches > self.quick and any(self.hold_on in p for p in inps):
            until = time.monotonic() + self.hold
            while time.monotonic() < until:
                time.sleep(0.01)
        return [Answer(text=f'{query_of(p)} #{s}', truncated=False) for p, s in zip(inps, seeds)]


class ShareableScripted(ScriptedBackend):
    """The scripted backend, its answers cached under the scripted backend's key, and shareable by replica
    threads: each has a copy of its own (counting the batches it answers)."""

    @property
    def generation_key(self):
        return dict(super().generation_key, backend='ScriptedBackend')

    def thread_replica(self):
        return copy.copy(self)


#: The scripted prompts: ten questions, one context each; two seeds each.
PROMPTS = [PROMPT_FORMATS['plain'].build(f'question {i}', [f'document {i}']) for i in range(10)]
SEEDS = [0, 1]
#: What the scripted backend answers them.
EXPECTED = [[f"'question {i}' #{s}" for s in SEEDS] for i in range(10)]


def answered(cache):
    """Every scripted prompt's answers through ``cache``, as texts; and how many it generated."""
    before = cache.generated
    texts = [[a.text for a in row] for row in cache.answer(PROMPTS, SEEDS)]
    return texts, cache.generated - before


def stored(path) -> int:
    """The answers a generation cache file holds for the scripted backend."""
    from pyterrier_utility import GenerationCache
    return len(GenerationCache(ScriptedBackend(), path))
