"""The reader: one answer per query (and sample) from a k-shot or 0-shot prompt."""
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Union

import pandas as pd
import pyterrier as pt
from pyterrier_rag.backend import Backend

from ._checks import check_int
from ._frames import validate_columns
from .backends import Answer, get_backend, reader_names
from .cache import GenerationCache
from .errors import BackendError, SettingError
from .generation import warn_unseeded
from .prompt_formats import PROMPT_FORMATS, PromptFormat, prompt_format as as_prompt_format
from .prompter import Prompter, checked_input
from .protocols import DecodingBackend, TokenizingBackend
from .schema import ANSWER_INFO
from .settings import BASE_MODEL_STOP, Decoding

#: The ``'plain'`` format's k-shot prompt; ``{contexts}`` holds one formatted context per line.
KSHOT_PROMPT = PROMPT_FORMATS['plain'].kshot
#: The ``'plain'`` format's 0-shot prompt.
ZEROSHOT_PROMPT = PROMPT_FORMATS['plain'].zero_shot
CONTEXT_FORMAT = PROMPT_FORMATS['plain'].context
__all__ = ['ANSWER_INFO', 'BASE_MODEL_STOP', 'CONTEXT_FORMAT', 'KSHOT_PROMPT', 'PROMPT_FORMATS', 'PromptFormat',
           'Reader', 'ZEROSHOT_PROMPT']


class Reader(pt.Transformer):
    """Answers each query from its retrieved documents (k-shot) or from nothing (0-shot).

    Given a result frame (``qid``, ``query``, ``docno``, ``text``, with ``rank`` or in rank order),
    the documents of each query become ``Context 1 .. Context k`` in rank order, never re-sorted by
    score, laid out by a :class:`~pyterrier_utility.prompt_formats.PromptFormat` (``'plain'``, this
    project's; ``'authors'``, the exact layout of the paper's authors' code; ``'authors-short'``).
    Given a query frame (no ``docno``), the query is answered 0-shot. Given a
    :class:`~pyterrier_utility.Prompter`'s output (a ``prompt`` column), each prompt is answered as
    it is. Answers stop where the prompt format asks (``STOP``), the stop removed.

    Output: the input frame with ``qanswer`` added to every row, so the context documents stay
    (nDCG@k can still be computed downstream), and what the engine says of the answer:
    ``logprob`` (its sequence log-probability), ``mean_logprob`` (per token), ``tokens`` (how many it
    generated) and ``truncated``
    (stopped at ``max_new_tokens``), NaN or ``None`` where the backend does not say (see
    :class:`~pyterrier_utility.backends.Answer`). With ``n_samples > 1`` every row is repeated per
    sample and a ``sample`` column (0 .. n_samples-1) says which; sample ``j`` uses seed
    ``seed + j``. Answers are memoised for the reader's lifetime (every 0-shot answer is generated
    once per experiment); wrap the backend in :class:`~pyterrier_utility.GenerationCache` with a
    path to keep them across runs.

    Edge cases: a document appearing twice for a query is given once (first rank), warned; a
    missing or empty ``text`` gives an empty context line (numbering kept), warned; rows without a
    ``docno`` (a query the retriever found nothing for) give the 0-shot prompt, warned; a query that
    is not a string is converted with ``str``, and a missing query raises an error naming the
    qids. Document text is only ever inserted as data: braces or "Context" inside it are kept
    verbatim. When a prompt would exceed the model's input limit (``max_prompt_tokens``), the
    documents are truncated evenly — the longest first, so that all keep an equal share — and the
    instructions and question are kept whole; warned once per reader.

    Args:
        backend: a :class:`pyterrier_rag.backend.Backend`, e.g. :func:`pyterrier_utility.backends.gemma3_270m`
            or ``pyterrier_rag.backend.OpenAIBackend(...)``, or a reader name as the command line takes it
            (``'gemma3-270m'``, ``'vllm:MODEL'``, ...: :func:`~pyterrier_utility.backends.get_backend` builds
            it). Sampling settings live in the backend, and so does the decoding its model needs: the
            offline readers' is the study's (:data:`~pyterrier_utility.engines.OFFLINE_DECODING`).
        n_samples: answers per query (the study uses 5).
        seed: the seed of sample 0.
        max_new_tokens: the most tokens per answer (``None``: the backend's own limit, which for
            the backends of this package is their :class:`~pyterrier_utility.settings.Decoding`'s,
            and for pyterrier-rag's their ``max_new_tokens``, passed on every call).
        stop: stop sequences, removed from the answer (``None``: those the prompt format's text asks
            for, then the backend's decoding's where the format takes them (a base model's
            ``'\\nQuestion:'``); see :meth:`~pyterrier_utility.prompt_formats.PromptFormat.stops`).
            For the backends of this package, the length and the stops become the backend's decoding
            once, when the reader is built: the reader's ``cache`` is then the generation cache over
            its ``with_settings`` copy (``backend``: the backend as given), and the answers' keys hold
            them; pyterrier-rag's backends are given them with each call.
        prompt_format: a name in :data:`~pyterrier_utility.prompt_formats.PROMPT_FORMATS` or a
            :class:`~pyterrier_utility.prompt_formats.PromptFormat` (``None``: the one the backend's model
            needs, ``'example'`` for the offline readers, else ``'plain'``).
        prompt: the k-shot template, with ``{contexts}`` and ``{query}`` (``None``: the format's).
        zero_shot_prompt: the 0-shot template, with ``{query}`` (``None``: the format's).
        context_format: one context line, with ``{i}`` (1-based) and ``{text}`` (``None``: the
            format's).
        max_prompt_tokens: the most prompt tokens; ``None`` takes the backend's ``max_input_length``
            less the new tokens when the backend has a ``tokenizer`` (else prompts are not measured).
        verbose: a progress bar counting the answers generated, with rate and ETA (PyTerrier's
            ``pt.tqdm``: a widget in a notebook, text in a terminal or log); ``False``: none.

    Example::

        reader = Reader('gemma3-270m')      # the study's offline reader, decoding and prompt format
        answers = (dataset.bm25() % 5 >> reader)(dataset.get_topics().head(3))
    """

    def __init__(self, backend: Union[str, Backend], *, n_samples: int = 1, seed: int = 0,
                 max_new_tokens: Optional[int] = None, stop: Union[None, str, Sequence[str]] = None,
                 prompt_format: Union[None, str, PromptFormat] = None, prompt: Optional[str] = None,
                 zero_shot_prompt: Optional[str] = None, context_format: Optional[str] = None,
                 max_prompt_tokens: Optional[int] = None,
                 verbose: bool = True):
        if isinstance(backend, str):
            backend = get_backend(backend)
        elif not isinstance(backend, Backend):
            raise SettingError(f'Reader: backend must be a reader name ({reader_names()}) or a pyterrier_rag '
                               f'Backend, got {type(backend).__name__} {backend!r}')
        check_int('Reader', 'n_samples', n_samples, 1)
        check_int('Reader', 'seed', seed, 0)
        if max_prompt_tokens is not None:
            check_int('Reader', 'max_prompt_tokens', max_prompt_tokens, 1)
        inner = backend.backend if isinstance(backend, GenerationCache) else backend
        # The backend's model may need a format of its own (the offline base models: a worked example).
        self.prompt_format = as_prompt_format(prompt_format or getattr(inner, 'prompt_format', None) or 'plain')
        self.prompt = prompt
        self.zero_shot_prompt = zero_shot_prompt
        self.context_format = context_format
        overrides: Dict[str, Any] = {name: value for name, value in (('kshot', prompt), ('zero_shot', zero_shot_prompt),
                                                     ('context', context_format)) if value is not None}
        #: The format the prompts are built with: ``prompt_format`` with the templates given.
        self.template = (replace(self.prompt_format, name=self.prompt_format.name + '+custom', **overrides)
                         if overrides else self.prompt_format)
        cache = backend if isinstance(backend, GenerationCache) else GenerationCache(backend)
        warn_unseeded(inner, n_samples)
        self.n_samples = n_samples
        self.seed = seed
        held = inner.decoding if isinstance(inner, DecodingBackend) else Decoding()
        given: Dict[str, Any] = {'stop': self.template.stops(held.stop) if stop is None else stop}
        if max_new_tokens is not None:
            given['max_new_tokens'] = max_new_tokens
        # The reader's length and stops, resolved once into a Decoding, which checks them.
        decoding = held.replace(**given)
        self.stop = list(decoding.stop)
        if isinstance(inner, DecodingBackend):
            # A backend of this package holds them in its decoding: the cache keys, and the backend
            # applies, that decoding alone.
            changes = {name: getattr(decoding, name) for name in given
                       if getattr(decoding, name) != getattr(held, name)}
            if changes:
                cache = cache.with_settings(**changes)
            self._per_call: Dict[str, Any] = {}
        else:  # pyterrier-rag's backends take them with each call
            if max_new_tokens is None:
                # They apply their own limit only when their generation_args hold none; given
                # generation_args without it, transformers would fall back to max_length.
                max_new_tokens = getattr(inner, 'max_new_tokens', None)
            self._per_call = {'max_new_tokens': max_new_tokens, 'stop_sequences': self.stop}
        self.max_new_tokens = max_new_tokens
        #: The backend as given, its decoding without the reader's length and stops.
        self.backend = inner
        #: The generation cache the reader answers through (over the backend with the reader's settings).
        self.cache = cache
        self.verbose = bool(verbose)
        self.tokenizer: Any = inner.tokenizer if isinstance(inner, TokenizingBackend) else None
        if max_prompt_tokens is None and self.tokenizer is not None and inner.max_input_length:
            max_prompt_tokens = inner.max_input_length - (max_new_tokens or getattr(inner, 'max_new_tokens', 0) or 0)
        #: The prompt side: the format and the fitting to ``max_prompt_tokens``.
        self.prompter = Prompter(self.template, tokenizer=self.tokenizer, max_prompt_tokens=max_prompt_tokens,
                                 name=repr(self))

    @property
    def max_prompt_tokens(self) -> Optional[int]:
        """The most prompt tokens (the prompter's; ``None``: prompts are not measured)."""
        return self.prompter.max_prompt_tokens

    def seeds(self) -> List[int]:
        """The seed of each sample."""
        return [self.seed + j for j in range(self.n_samples)]

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if 'prompt' in inp.columns:  # a Prompter's output: answered as it is
            validate_columns(repr(self), inp, ['qid', 'prompt'])
            return self._with_answers(inp, self.answer(list(inp['prompt'])))
        return self.answer_frame(checked_input(repr(self), inp))

    def answer_frame(self, inp: pd.DataFrame, by: Union[str, Sequence[str]] = 'qid') -> pd.DataFrame:
        """``inp`` with ``qanswer`` on every row: each group of rows (``by``, see :meth:`Prompter.prompts`) is
        one prompt; with several samples, the rows are repeated per sample with a ``sample`` column.
        All prompts are answered in one call (each distinct prompt and seed once)."""
        return self.answer_frames([inp], by)[0]

    def answer_frames(self, frames: Sequence[pd.DataFrame], by: Union[str, Sequence[str]] = 'qid',
                      token_logprobs: bool = False) -> List[pd.DataFrame]:
        """:meth:`answer_frame` of several frames (e.g. query frames for 0-shot and result frames
        for k-shot), their prompts answered together in one call; with ``token_logprobs``, also
        each answer's token log-probabilities (a ``token_logprobs`` column of tuples, ``None``
        where the engine reports none)."""
        by = [by] if isinstance(by, str) else list(by)
        prompts = [self.prompter.prompts(frame, by) for frame in frames]
        distinct = list(dict.fromkeys(p for group in prompts for p in group.values()))
        try:
            answered = dict(zip(distinct, self.answer(distinct)))
        except BackendError as e:  # a prompt the engine refused: named by its group and documents
            raise self.prompter.blame(e, frames, by) from e
        out = []
        for frame, group in zip(frames, prompts):
            keys = list(frame[by].itertuples(index=False, name=None)) if len(by) > 1 else list(frame[by[0]])
            out.append(self._with_answers(frame, [answered[group[g]] for g in keys], token_logprobs))
        return out

    def _with_answers(self, frame: pd.DataFrame, answers: Sequence[Sequence[Answer]],
                      token_logprobs: bool = False) -> pd.DataFrame:
        """``frame`` with each row's answers (one per sample), the rows repeated per sample with a
        ``sample`` column when there are several."""
        per_sample = []
        for j in range(self.n_samples):
            rows = [row[j] for row in answers]
            answered = frame.assign(qanswer=[a.text for a in rows],
                                    logprob=pd.Series([a.logprob for a in rows], index=frame.index, dtype=float),
                                    mean_logprob=pd.Series([a.mean_logprob for a in rows], index=frame.index,
                                                           dtype=float),
                                    tokens=pd.Series([a.tokens for a in rows], index=frame.index, dtype=float),
                                    truncated=[a.truncated for a in rows])
            if token_logprobs:
                answered = answered.assign(token_logprobs=[getattr(a, 'token_logprobs', None) for a in rows])
            per_sample.append(answered.assign(sample=j) if self.n_samples > 1 else answered)
        return pd.concat(per_sample, ignore_index=True)

    def answer(self, prompts: List[str]) -> List[List[Answer]]:
        """The answers to each prompt, one per sample, read back by the prompt format: each an
        :class:`~pyterrier_utility.backends.Answer`, its ``text`` with what the backend said of it
        (``logprob``, ``tokens``, ``truncated``: of the whole generated text)."""
        answers = self.cache.answer(prompts, self.seeds(), verbose=self.verbose, **self._per_call)
        # pyterrier-rag is untyped: mypy sees no BackendOutput.text
        return [[replace(a, text=self.template.extract(a.text)) for a in per_prompt]  # type: ignore[call-arg]
                for per_prompt in answers]

    def zero_shot(self, queries: pd.DataFrame) -> pd.DataFrame:
        """0-shot answers for a query frame (``qid``, ``query``), one row per query and sample."""
        return self(queries[['qid', 'query']].drop_duplicates('qid'))

    def __repr__(self):
        return (f'Reader({self.cache.backend!r}, n_samples={self.n_samples}, seed={self.seed}, stop={self.stop!r}, '
                f'prompt_format={self.template.name!r})')
