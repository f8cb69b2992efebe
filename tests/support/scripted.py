"""A backend of the package's kind whose failures are scripted, for the Ray tests: its actors import it
from here (the tests put this folder on the workers' ``PYTHONPATH``)."""
import os
import signal
from pathlib import Path
from typing import List, Optional

from pyterrier_utility.backends._base import Answer, DecodingBackendBase, query_of, split_decoding
from pyterrier_utility.prompt_formats import PROMPT_FORMATS
from pyterrier_utility.settings import Decoding


class ScriptedBackend(DecodingBackendBase):
    """Answers ``'<query> #<seed>'`` at once, two answers per batch. It raises ``ValueError`` on a prompt
    holding ``fail_on``; on a prompt holding ``kill_on`` it SIGKILLs its own process, the first time
    only: it creates the file ``marker`` first, so an actor restarted after it answers."""

    def __init__(self, fail_on: Optional[str] = None, kill_on: Optional[str] = None, marker: Optional[str] = None,
                 batch_size: int = 2, **decoding):
        decoded = split_decoding('ScriptedBackend', None, Decoding(), decoding)
        super().__init__('scripted')
        self._set_decoding(decoded)
        self.fail_on, self.kill_on, self.marker = fail_on, kill_on, marker
        self.batch_size = batch_size

    def _generate(self, inps: List[str], seeds: List[int], **options) -> List[Answer]:
        if self.fail_on is not None and any(self.fail_on in p for p in inps):
            raise ValueError('scripted failure')
        if self.kill_on is not None and any(self.kill_on in p for p in inps) and not Path(self.marker).exists():
            Path(self.marker).touch()
            os.kill(os.getpid(), signal.SIGKILL)
        return [Answer(text=f'{query_of(p)} #{s}', truncated=False) for p, s in zip(inps, seeds)]


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
