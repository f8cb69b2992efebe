"""Calling a backend: the one place where prompts go to a backend and answers come back.

What is to be generated is grouped into the backend's batches (:func:`~pyterrier_utility.backends.
work_batches`, every seed of a prompt in one call), each prompt answered with its own seed
(:func:`generate_seeded`), and what the backend returns is checked (one string per prompt, not an
error marker, encodable as UTF-8) before anything is kept. When a backend fails part-way (a server
going away, or Ctrl-C), the answers it completed are kept before the error goes on. A backend with
workers of its own (:class:`~pyterrier_utility.protocols.StreamingBackend`, such as
:class:`~pyterrier_utility.backends.RayBackend`) is given the same batches at once, each answered
whole by :func:`generate_seeded` on a worker, and hands each back as it completes: it is checked and
kept here, as it arrives. A backend whose requests answer one by one
(:func:`~pyterrier_utility.protocols.answers_each`, such as
:class:`~pyterrier_utility.backends.OpenAICompatibleBackend`) hands each answer back as it arrives,
and it is kept then, so a process killed mid-batch loses none that came back.
:class:`~pyterrier_utility.GenerationCache` hands it what it lacks and stores what comes back.
"""
from dataclasses import replace
from functools import partial
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import pyterrier as pt
import torch
from pyterrier_rag.backend import Backend

from ._messages import warn
from ._text import encodable
from .backends import Answer, cut_at_stop, work_batches
from .errors import BackendError
from .protocols import StreamingBackend, answers_each, deterministic, supports_seeds

#: Texts that third-party backends return in place of an answer when a request failed
#: (pyterrier-rag's OpenAI backend: ``ERROR::other``, ``ERROR::reduce_length``, ...).
ERROR_MARKERS = ('ERROR::',)


def checked_texts(backend: Backend, outputs, count: int) -> List[str]:
    """The answer texts of a backend's outputs for ``count`` prompts, or a :class:`BackendError`
    when they are not one string per prompt, or a text is an error marker."""
    try:
        outputs = list(outputs)
    except TypeError:
        raise BackendError(f'{backend!r} returned {type(outputs).__name__} for {count} prompts, '
                           'not a list of outputs; nothing was stored') from None
    if len(outputs) != count:
        raise BackendError(f'{backend!r} returned {len(outputs)} outputs for {count} prompts; '
                           'answers cannot be matched to prompts, nothing was stored')
    texts = []
    for i, out in enumerate(outputs):
        text = getattr(out, 'text', out)
        if not isinstance(text, str):
            raise BackendError(f'{backend!r} returned {type(text).__name__} as the answer to prompt {i} of '
                               f'{count}, not a string; nothing was stored')
        if text.startswith(ERROR_MARKERS):
            raise BackendError(f'{backend!r} returned the error marker {text!r} for prompt {i} of {count} '
                               '(its request failed); nothing was stored')
        if not encodable(text):
            raise BackendError(f'{backend!r} returned an answer to prompt {i} of {count} that cannot be encoded as '
                               f'UTF-8 (a lone surrogate): {text[:100]!r}; nothing was stored')
        texts.append(text)
    return texts


def checked_answers(backend: Backend, outputs, count: int) -> List[Answer]:
    """:func:`checked_texts` as :class:`Answer` s: a backend's own answers as they are; another
    backend's outputs with what they do not say (``truncated``, ``logprob``) unknown."""
    texts = checked_texts(backend, outputs, count)
    return [out if isinstance(out, Answer) else Answer(text=text, truncated=None)
            for out, text in zip(outputs, texts)]


def generate_seeded(backend: Backend, prompts: List[str], seeds: Sequence[int],
                    max_new_tokens: Optional[int], stop_sequences: Optional[List[str]],
                    on_answers: Optional[Callable[[Dict[int, Answer]], None]] = None) -> List[Answer]:
    """Answers ``prompts`` with one seed each, whatever the backend; the texts are checked.

    Backends that support seeds take them directly. For others, torch's generator is seeded once
    per group of prompts sharing a seed, inside a forked random state (the caller's is left as it
    was): reproducible for local backends, a best effort for remote ones. A backend that hands
    answers back as they complete (:func:`~pyterrier_utility.protocols.answers_each`) gives them to
    ``on_answers`` (prompt index -> answer) on the way.
    """
    if supports_seeds(backend):
        each = {'on_answers': on_answers} if on_answers is not None and answers_each(backend) else {}
        outs = backend.generate(prompts, seeds=list(seeds), max_new_tokens=max_new_tokens,
                                stop_sequences=stop_sequences, **each)
        return checked_answers(backend, outs, len(prompts))
    answers: Dict[int, Answer] = {}
    for seed in sorted(set(seeds)):
        idx = [i for i, s in enumerate(seeds) if s == seed]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            outs = backend.generate([prompts[i] for i in idx], max_new_tokens=max_new_tokens,
                                    stop_sequences=stop_sequences)
        for i, answer in zip(idx, checked_answers(backend, outs, len(idx))):
            # pyterrier-rag is untyped: mypy sees no BackendOutput.text
            answers[i] = replace(answer, text=cut_at_stop(answer.text, stop_sequences))  # type: ignore[call-arg]
    return [answers[i] for i in range(len(prompts))]


def generate_batches(backend: Backend, todo: Dict[str, Dict[str, int]], max_new_tokens: Optional[int],
                     stop_sequences: Optional[List[str]], keep: Callable[[Dict[str, Answer]], None],
                     verbose: bool = False) -> Dict[str, Answer]:
    """Generates ``todo`` (prompt -> key -> seed) in the backend's batches and returns key -> answer;
    each batch's answers go to ``keep`` as the batch completes, or each answer as it arrives from a
    backend that :func:`~pyterrier_utility.protocols.answers_each` (with a progress bar counting
    answers when ``verbose``). A :class:`~pyterrier_utility.protocols.StreamingBackend` is given every batch
    at once and answers them on its workers with :func:`generate_seeded`, in any order.

    On a :class:`~pyterrier_utility.errors.BackendError` or a Ctrl-C, the answers the failed batch
    completed (those a backend attaches to the error as ``completed``, checked as any other) go to
    ``keep`` before the error goes on; a ``BackendError`` then says how many were kept."""
    prompts = list(todo)
    chunks = [[(k, prompts[i], s) for i in group for k, s in todo[prompts[i]].items()]
              for group in work_batches(backend, prompts, [len(todo[p]) for p in prompts])]
    found: Dict[str, Answer] = {}
    total = sum(len(t) for t in todo.values())
    with pt.tqdm(total=total, desc='answers', unit='answer', disable=not verbose or not total) as progress:
        if isinstance(backend, StreamingBackend):
            call = partial(generate_seeded, max_new_tokens=max_new_tokens, stop_sequences=stop_sequences)
            try:
                for i, outs in backend.stream(call, [([p for _, p, _ in c], [s for _, _, s in c]) for c in chunks]):
                    new = {k: a for (k, _, _), a in zip(chunks[i], checked_answers(backend, outs, len(chunks[i])))}
                    keep(new)
                    found.update(new)
                    progress.update(len(new))
            except BackendError as e:
                raise BackendError(f'{e} [{len(found)} answers of the batches completed are in the cache; a re-run '
                                   'generates only what is missing]') from e
            return found
        for chunk in chunks:
            kept: Dict[str, Answer] = {}  # what the backend handed back before the batch completed
            try:
                answers = generate_seeded(backend, [p for _, p, _ in chunk], [s for _, _, s in chunk],
                                          max_new_tokens, stop_sequences,
                                          on_answers=partial(_keep_arrived, chunk, kept, keep, progress))
            except (BackendError, KeyboardInterrupt) as e:
                # A Ctrl-C may carry the answers completed too (OpenAICompatibleBackend's does).
                completed = {i: a if isinstance(a, Answer) else Answer(text=a, truncated=None)
                             for i, a in getattr(e, 'completed', {}).items()}
                rest = {chunk[i][0]: a for i, a in completed.items()
                        if 0 <= i < len(chunk) and _keepable(a) and chunk[i][0] not in kept}
                keep(rest)
                if isinstance(e, KeyboardInterrupt):
                    raise
                raise BackendError(f'{e} [{len(kept) + len(rest)} answers of the failed batch and all earlier '
                                   'batches are in the cache; a re-run generates only what is missing]',
                                   prompt=e.prompt) from e
            new = {k: a for (k, _, _), a in zip(chunk, answers) if k not in kept}
            keep(new)
            found.update(kept)
            found.update(new)
            progress.update(len(new))
    return found


def _keepable(answer: Answer) -> bool:
    """An answer text that may be stored: a string, not an error marker, encodable as UTF-8."""
    return isinstance(answer.text, str) and not answer.text.startswith(ERROR_MARKERS) and encodable(answer.text)


def _keep_arrived(chunk: List[Tuple[str, str, int]], kept: Dict[str, Answer], keep: Callable[[Dict[str, Answer]], None],
                  progress, arrived: Dict[int, Answer]) -> None:
    """Stores the answers of a batch that arrived before the batch completed (a backend that
    :func:`~pyterrier_utility.protocols.answers_each`), so that a process killed mid-batch keeps
    them; ``kept`` records them, once stored, for the rest of the batch."""
    new = {chunk[i][0]: a for i, a in arrived.items() if _keepable(a)}
    keep(new)
    kept.update(new)
    progress.update(len(new))


def warn_unseeded(backend: Backend, n_samples: int) -> None:
    """Warns when several samples are asked of a sampling backend that takes no seeds."""
    if n_samples > 1 and not supports_seeds(backend) and not deterministic(backend):
        warn(f'{backend!r} takes no seeds: its {n_samples} samples per prompt are seeded through torch '
             'only, which does not reach remote servers or vLLM; use pyterrier_utility.backends.'
             'OpenAICompatibleBackend or VLLMBackend for reproducible samples')
