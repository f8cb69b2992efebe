"""The reader: one answer per query (and sample) from a k-shot or 0-shot prompt."""
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pandas as pd
import pyterrier as pt
import pyterrier_alpha as pta
from pyterrier.validate import InputValidationError
from pyterrier_rag.backend import Backend

from ._util import check_encodable, check_int, normalise_frame, resolve_verbose, warn_qids
from .backends._base import Answer
from .cache import GenerationCache, warn_unseeded
from .errors import FrameError
from .prompts import PROMPT_FORMATS, PromptFormat, prompt_format as as_prompt_format
from .protocols import DecodingBackend, TokenizingBackend
from .settings import BASE_MODEL_STOP, STOP, Decoding
from .vocabulary import ANSWER_INFO

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
    score, laid out by a :class:`~pyterrier_utility.prompts.PromptFormat` (``'plain'``, this
    project's; ``'authors'``, the exact layout of the paper's authors' code; ``'authors-short'``).
    Given a query frame (no ``docno``), the query is answered 0-shot. Answers stop at ``STOP``,
    which is removed.

    Output: the input frame with ``qanswer`` added to every row, so the context documents stay
    (nDCG@k can still be computed downstream), and what the engine says of the answer:
    ``logprob`` (its sequence log-probability), ``mean_logprob`` (per token) and ``truncated``
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
            or ``pyterrier_rag.backend.OpenAIBackend(...)``. Sampling settings live in the backend.
        n_samples: answers per query (the study uses 5).
        seed: the seed of sample 0.
        max_new_tokens: the most tokens per answer (``None``: the backend's own limit, which for
            the backends of this package is their :class:`~pyterrier_utility.settings.Decoding`'s,
            and for pyterrier-rag's their ``max_new_tokens``, passed on every call).
        stop: stop sequences, removed from the answer (``None``: the prompt format's, else the
            backend's decoding's, else ``'STOP'``).
        prompt_format: a name in :data:`~pyterrier_utility.prompts.PROMPT_FORMATS` or a
            :class:`~pyterrier_utility.prompts.PromptFormat`.
        prompt: the k-shot template, with ``{contexts}`` and ``{query}`` (``None``: the format's).
        zero_shot_prompt: the 0-shot template, with ``{query}`` (``None``: the format's).
        context_format: one context line, with ``{i}`` (1-based) and ``{text}`` (``None``: the
            format's).
        max_prompt_tokens: the most prompt tokens; ``None`` takes the backend's ``max_input_length``
            less the new tokens when the backend has a ``tokenizer`` (else prompts are not measured).
        verbose: a progress bar counting the answers generated, with rate and ETA (``None``: in a
            notebook only; the CLI shows it).

    Example::

        reader = Reader(pyterrier_utility.backends.gemma3_270m(max_new_tokens=48), prompt_format='authors')
        answers = (dataset.bm25() % 5 >> reader)(dataset.get_topics().head(3))
    """

    def __init__(self, backend: Backend, *, n_samples: int = 1, seed: int = 0,
                 max_new_tokens: Optional[int] = None, stop: Union[None, str, Sequence[str]] = None,
                 prompt_format: Union[str, PromptFormat] = 'plain', prompt: Optional[str] = None,
                 zero_shot_prompt: Optional[str] = None, context_format: Optional[str] = None,
                 max_prompt_tokens: Optional[int] = None,
                 verbose: Optional[bool] = None):
        check_int('Reader', 'n_samples', n_samples, 1)
        check_int('Reader', 'seed', seed, 0)
        if max_new_tokens is not None:
            check_int('Reader', 'max_new_tokens', max_new_tokens, 1)
        if max_prompt_tokens is not None:
            check_int('Reader', 'max_prompt_tokens', max_prompt_tokens, 1)
        self.prompt_format = as_prompt_format(prompt_format)
        self.prompt = prompt
        self.zero_shot_prompt = zero_shot_prompt
        self.context_format = context_format
        overrides: Dict[str, Any] = {name: value for name, value in (('kshot', prompt), ('zero_shot', zero_shot_prompt),
                                                     ('context', context_format)) if value is not None}
        #: The format the prompts are built with: ``prompt_format`` with the templates given.
        self.template = (replace(self.prompt_format, name=self.prompt_format.name + '+custom', **overrides)
                         if overrides else self.prompt_format)
        self.backend = backend if isinstance(backend, GenerationCache) else GenerationCache(backend)
        warn_unseeded(self.backend.backend, n_samples)
        self.n_samples = n_samples
        self.seed = seed
        inner = self.backend.backend
        if max_new_tokens is None and not isinstance(inner, DecodingBackend):
            # pyterrier-rag's backends apply their own limit only when their generation_args hold
            # none; given generation_args without it, transformers would fall back to max_length.
            max_new_tokens = getattr(inner, 'max_new_tokens', None)
        self.max_new_tokens = max_new_tokens
        if stop is None and self.template.stop is not None:
            self.stop = list(self.template.stop)
        elif stop is None:
            self.stop = list(inner.decoding.stop if isinstance(inner, DecodingBackend) else STOP)
        else:
            self.stop = list(Decoding(stop=stop).stop)  # type: ignore[arg-type]  # Decoding makes it a tuple
        self.verbose = resolve_verbose(verbose)
        self.tokenizer: Any = inner.tokenizer if isinstance(inner, TokenizingBackend) else None
        if max_prompt_tokens is None and self.tokenizer is not None and inner.max_input_length:
            max_prompt_tokens = inner.max_input_length - (max_new_tokens or getattr(inner, 'max_new_tokens', 0) or 0)
        self.max_prompt_tokens = max_prompt_tokens
        self._warned_truncation = False

    def seeds(self) -> List[int]:
        """The seed of each sample."""
        return [self.seed + j for j in range(self.n_samples)]

    def build_prompt(self, query: str, texts: Sequence[str] = ()) -> str:
        """The prompt for a query and its context texts (none: the 0-shot prompt)."""
        return self.template.build(query, texts)

    def _tokens(self, text: str) -> List[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _fit(self, query: str, texts: List[str]) -> Tuple[List[str], bool]:
        """The texts truncated evenly so that the prompt fits ``max_prompt_tokens``."""
        if self.max_prompt_tokens is None or self.tokenizer is None:
            return texts, False
        frame = len(self._tokens(self.build_prompt(query, [''] * len(texts))))
        tokens = [self._tokens(t) for t in texts]
        room = self.max_prompt_tokens - frame
        if sum(map(len, tokens)) <= room:
            return texts, False
        # The largest equal share c with sum(min(len, c)) <= room: short documents stay whole.
        share, left = 0, max(room, 0)
        lengths = sorted(map(len, tokens))
        for i, n in enumerate(lengths):
            if n * (len(lengths) - i) > left:
                share = left // (len(lengths) - i)
                break
            left -= n
        return [t if len(tok) <= share else self.tokenizer.decode(tok[:share])
                for t, tok in zip(texts, tokens)], True

    def prompts(self, inp: pd.DataFrame, by: Union[str, Sequence[str]] = 'qid') -> Dict[object, str]:
        """The prompt of each group of rows (``by``: ``'qid'``, or several columns such as ``['system',
        'k', 'qid']``, giving tuple keys): k-shot from a result frame, documents in rank order, or
        0-shot from a query frame (or a group whose only row has no ``docno``)."""
        missing = inp.loc[inp['query'].isna(), 'qid']
        if len(missing):
            raise FrameError(f'{self!r}: no query text for qid {sorted(set(map(str, missing)))[:20]}')
        by = [by] if isinstance(by, str) else list(by)
        key = by[0] if len(by) == 1 else by
        if 'docno' not in inp.columns:
            first = inp.drop_duplicates(by)
            return {g: self.build_prompt(str(q)) for g, q in zip(first[key].itertuples(index=False, name=None)
                                                                  if len(by) > 1 else first[key], first['query'])}
        ordered = inp.sort_values(by + ['rank'], kind='stable') if 'rank' in inp.columns else inp
        found = ordered[ordered['docno'].notna()]
        nothing = ordered[ordered['docno'].isna()].drop_duplicates(by)
        warn_qids(f'{self!r}: no document retrieved; answered with the 0-shot prompt', nothing['qid'])
        dup = found.duplicated(by + ['docno'])
        warn_qids(f'{self!r}: duplicate docno in the ranking, given once at its first rank', found.loc[dup, 'qid'])
        found = found[~dup]
        blank = found['text'].isna() | (found['text'].astype(str).str.strip() == '')
        warn_qids(f'{self!r}: missing or empty document text, given as an empty context', found.loc[blank, 'qid'])
        prompts = {g: self.build_prompt(str(q)) for g, q in
                   zip(nothing[key].itertuples(index=False, name=None) if len(by) > 1 else nothing[key],
                       nothing['query'])}
        groups = [(g, g[by.index('qid')] if len(by) > 1 else g, str(rows['query'].iloc[0]),
                   ['' if pd.isna(t) else str(t) for t in rows['text']])
                  for g, rows in found.groupby(key, sort=False)]
        prompts.update(zip([g for g, _, _, _ in groups], self.fitted_prompts([c[1:] for c in groups])))
        return prompts

    def fitted_prompts(self, contexts: Sequence[Tuple[object, str, Sequence[str]]]) -> List[str]:
        """The prompt of each ``(qid, query, texts)``, documents truncated evenly where the prompt would
        exceed ``max_prompt_tokens`` (instructions and question kept; warned once per reader). Every
        prompt of a context goes through here: the k-shot ones, eRAG's single documents and
        LLM-retEval's gold contexts alike."""
        prompts, truncated = [], []
        for qid, query, texts in contexts:
            texts, cut = self._fit(query, list(texts))
            if cut:
                truncated.append(qid)
            prompts.append(self.build_prompt(query, texts))
        if truncated and not self._warned_truncation:
            self._warned_truncation = True
            warn_qids(f'{self!r}: prompts over {self.max_prompt_tokens} tokens; documents truncated evenly, '
                      'question kept (warned once)', truncated)
        return prompts

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        try:
            with pta.validate.any(inp) as v:
                v.result_frame(extra_columns=['query', 'text'], mode='k-shot')
                v.query_frame(extra_columns=['query'], mode='0-shot')
        except InputValidationError as e:
            mode = next(m for m in e.modes if m.mode_name == ('k-shot' if 'docno' in inp.columns else '0-shot'))
            missing = ', '.join(repr(c) for c in mode.missing_columns)
            raise InputValidationError(f'{self!r}: input has no column {missing} (a {mode.mode_name} input: '
                                       'a result frame with qid, query, docno, text, or a query frame with qid, '
                                       f'query; has {list(inp.columns)})', e.modes) from None
        check_encodable(repr(self), inp, ('query', 'text'))
        return self.answer_frame(normalise_frame(repr(self), inp, missing_docno_ok=True))

    def answer_frame(self, inp: pd.DataFrame, by: Union[str, Sequence[str]] = 'qid') -> pd.DataFrame:
        """``inp`` with ``qanswer`` on every row: each group of rows (``by``, see :meth:`prompts`) is
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
        prompts = [self.prompts(frame, by) for frame in frames]
        distinct = list(dict.fromkeys(p for group in prompts for p in group.values()))
        answered = dict(zip(distinct, self.answer_details(distinct)))
        out = []
        for frame, group in zip(frames, prompts):
            keys = list(frame[by].itertuples(index=False, name=None)) if len(by) > 1 else list(frame[by[0]])
            per_sample = []
            for j in range(self.n_samples):
                rows = [answered[group[g]][j] for g in keys]
                answers = frame.assign(qanswer=[a.text for a in rows],
                                       logprob=pd.Series([a.logprob for a in rows], index=frame.index, dtype=float),
                                       mean_logprob=pd.Series([a.mean_logprob for a in rows], index=frame.index,
                                                              dtype=float),
                                       truncated=[a.truncated for a in rows])
                if token_logprobs:
                    answers = answers.assign(token_logprobs=[getattr(a, 'token_logprobs', None) for a in rows])
                per_sample.append(answers.assign(sample=j) if self.n_samples > 1 else answers)
            out.append(pd.concat(per_sample, ignore_index=True))
        return out

    def answer(self, prompts: List[str]) -> List[List[str]]:
        """Answers for each prompt, one per sample, read back by the prompt format."""
        return [[a.text for a in per_prompt] for per_prompt in self.answer_details(prompts)]

    def answer_details(self, prompts: List[str]) -> List[List[Answer]]:
        """:meth:`answer` as :class:`~pyterrier_utility.backends.Answer` s, with what the backend
        said of each (``logprob``, ``tokens``, ``truncated``: of the whole generated text)."""
        answers = self.backend.answer_details(prompts, self.seeds(), max_new_tokens=self.max_new_tokens,
                                              stop_sequences=self.stop, verbose=self.verbose)
        # pyterrier-rag is untyped: mypy sees no BackendOutput.text
        return [[replace(a, text=self.template.extract(a.text)) for a in per_prompt]  # type: ignore[call-arg]
                for per_prompt in answers]

    def zero_shot(self, queries: pd.DataFrame) -> pd.DataFrame:
        """0-shot answers for a query frame (``qid``, ``query``), one row per query and sample."""
        return self(queries[['qid', 'query']].drop_duplicates('qid'))

    def __repr__(self):
        return (f'Reader({self.backend.backend!r}, n_samples={self.n_samples}, seed={self.seed}, stop={self.stop!r}, '
                f'prompt_format={self.template.name!r})')
