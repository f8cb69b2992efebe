"""The reader: one answer per query (and sample) from a k-shot or 0-shot prompt."""
from typing import Dict, List, Optional, Sequence, Tuple

import pandas as pd
import pyterrier as pt
import pyterrier_alpha as pta
from pyterrier.validate import InputValidationError
from pyterrier_rag.backend import Backend

from ._util import check, check_int, normalise_frame, stop_sequences, warn_qids
from .cache import GenerationCache, warn_unseeded, work_batches
from .errors import FrameError

#: The k-shot prompt of the study; ``{contexts}`` holds one formatted context per line.
KSHOT_PROMPT = ('You are an expert at answering questions based on your own knowledge and related '
                'context. Please answer this question based on the given context. End your answer '
                'with STOP.\n{contexts}\nQuestion: {query}\nNow start your answer. Answer:')
#: The 0-shot prompt of the study.
ZEROSHOT_PROMPT = ('You are an expert at answering questions based on your own knowledge. Please '
                   'answer this question. End your answer with STOP.\nQuestion: {query}\n'
                   'Now start your answer. Answer:')
CONTEXT_FORMAT = 'Context {i}: {text}'
#: Stop sequences for base (non-instruction) models, which ignore "STOP" and go on to invent the
#: next "Question:" or "Context": the answer is what comes before.
BASE_MODEL_STOP = ('STOP', '\nQuestion:', '\nContext')


class Reader(pt.Transformer):
    """Answers each query from its retrieved documents (k-shot) or from nothing (0-shot).

    Given a result frame (``qid``, ``query``, ``docno``, ``text``, with ``rank`` or in rank order),
    the documents of each query become ``Context 1 .. Context k`` in rank order, never re-sorted by
    score. Given a query frame (no ``docno``), the query is answered 0-shot. Answers stop at ``STOP``,
    which is removed.

    Output: the input frame with ``qanswer`` added to every row, so the context documents stay
    (nDCG@k can still be computed downstream). With ``n_samples > 1`` every row is repeated per
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
        max_new_tokens: the most tokens per answer (``None``: the backend's own limit).
        stop: stop sequences, removed from the answer.
        prompt: the k-shot template, with ``{contexts}`` and ``{query}``.
        zero_shot_prompt: the 0-shot template, with ``{query}``.
        context_format: one context line, with ``{i}`` (1-based) and ``{text}``.
        max_prompt_tokens: the most prompt tokens; ``None`` takes the backend's ``max_input_length``
            less the new tokens when the backend has a ``tokenizer`` (else prompts are not measured).
        verbose: show progress.

    Example::

        reader = Reader(pyterrier_utility.backends.gemma3_270m(max_new_tokens=48))
        answers = (dataset.bm25() % 5 >> reader)(dataset.get_topics().head(3))
    """

    def __init__(self, backend: Backend, *, n_samples: int = 1, seed: int = 0,
                 max_new_tokens: Optional[int] = None, stop: Sequence[str] = ('STOP',),
                 prompt: str = KSHOT_PROMPT, zero_shot_prompt: str = ZEROSHOT_PROMPT,
                 context_format: str = CONTEXT_FORMAT, max_prompt_tokens: Optional[int] = None,
                 verbose: bool = False):
        check_int('Reader', 'n_samples', n_samples, 1)
        check_int('Reader', 'seed', seed, 0)
        if max_new_tokens is not None:
            check_int('Reader', 'max_new_tokens', max_new_tokens, 1)
        if max_prompt_tokens is not None:
            check_int('Reader', 'max_prompt_tokens', max_prompt_tokens, 1)
        for name, template, fields in (('prompt', prompt, ('{contexts}', '{query}')),
                                       ('zero_shot_prompt', zero_shot_prompt, ('{query}',)),
                                       ('context_format', context_format, ('{text}',))):
            check(isinstance(template, str) and all(f in template for f in fields), 'Reader',
                  f'{name} must be a string with {", ".join(fields)}, got {template!r}')
        self.backend = backend if isinstance(backend, GenerationCache) else GenerationCache(backend)
        warn_unseeded(self.backend.backend, n_samples)
        self.n_samples = n_samples
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.stop = stop_sequences('Reader', stop)
        self.prompt = prompt
        self.zero_shot_prompt = zero_shot_prompt
        self.context_format = context_format
        self.verbose = verbose
        inner = self.backend.backend
        self.tokenizer = getattr(inner, 'tokenizer', None)
        if max_prompt_tokens is None and self.tokenizer is not None and getattr(inner, 'max_input_length', None):
            max_prompt_tokens = inner.max_input_length - (max_new_tokens or getattr(inner, 'max_new_tokens', 0) or 0)
        self.max_prompt_tokens = max_prompt_tokens
        self._warned_truncation = False

    def seeds(self) -> List[int]:
        """The seed of each sample."""
        return [self.seed + j for j in range(self.n_samples)]

    def build_prompt(self, query: str, texts: Sequence[str] = ()) -> str:
        """The prompt for a query and its context texts (none: the 0-shot prompt)."""
        if not len(texts):
            return self.zero_shot_prompt.format(query=query)
        contexts = '\n'.join(self.context_format.format(i=i, text=t) for i, t in enumerate(texts, 1))
        return self.prompt.format(contexts=contexts, query=query)

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

    def prompts(self, inp: pd.DataFrame) -> Dict[object, str]:
        """qid -> prompt for a result frame (k-shot, documents in rank order) or a query frame (0-shot)."""
        missing = inp.loc[inp['query'].isna(), 'qid']
        if len(missing):
            raise FrameError(f'{self!r}: no query text for qid {sorted(set(map(str, missing)))[:20]}')
        if 'docno' not in inp.columns:
            return {qid: self.build_prompt(str(q)) for qid, q in zip(inp['qid'], inp['query'])}
        ordered = inp.sort_values(['qid', 'rank'], kind='stable') if 'rank' in inp.columns else inp
        found = ordered[ordered['docno'].notna()]
        nothing = set(ordered['qid']) - set(found['qid'])
        warn_qids(f'{self!r}: no document retrieved; answered with the 0-shot prompt', nothing)
        dup = found.duplicated(['qid', 'docno'])
        warn_qids(f'{self!r}: duplicate docno in the ranking, given once at its first rank', found.loc[dup, 'qid'])
        found = found[~dup]
        blank = found['text'].isna() | (found['text'].astype(str).str.strip() == '')
        warn_qids(f'{self!r}: missing or empty document text, given as an empty context', found.loc[blank, 'qid'])
        prompts = {qid: self.build_prompt(str(q)) for qid, q in
                   ordered.loc[ordered['qid'].isin(nothing)].drop_duplicates('qid')[['qid', 'query']].values}
        queries = [(qid, str(g['query'].iloc[0]), ['' if pd.isna(t) else str(t) for t in g['text']])
                   for qid, g in found.groupby('qid', sort=False)]
        prompts.update(zip([q for q, _, _ in queries], self.fitted_prompts(queries)))
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
        inp = normalise_frame(repr(self), inp, missing_docno_ok=True)
        prompts = self.prompts(inp)
        answers = self.answer(list(prompts.values()))
        per_sample = []
        for j in range(self.n_samples):
            by_qid = {qid: answers[i][j] for i, qid in enumerate(prompts)}
            frame = inp.assign(qanswer=inp['qid'].map(by_qid))
            if self.n_samples > 1:
                frame = frame.assign(sample=j)
            per_sample.append(frame)
        return pd.concat(per_sample, ignore_index=True)

    def answer(self, prompts: List[str]) -> List[List[str]]:
        """Answers for each prompt, one per sample."""
        seeds = self.seeds()
        outs: List[List[str]] = [None] * len(prompts)
        groups = work_batches(self.backend.backend, prompts, [len(seeds)] * len(prompts))
        total = len(prompts) * len(seeds)
        with pt.tqdm(total=total, desc='answers', unit='answer',
                     disable=not self.verbose or len(groups) <= 1) as progress:
            for group in groups:
                answers = self.backend.generate([prompts[i] for i in group for _ in seeds], seeds=seeds * len(group),
                                                max_new_tokens=self.max_new_tokens, stop_sequences=self.stop)
                for n, i in enumerate(group):
                    outs[i] = [a.text for a in answers[n * len(seeds):(n + 1) * len(seeds)]]
                progress.update(len(group) * len(seeds))
        return outs

    def zero_shot(self, queries: pd.DataFrame) -> pd.DataFrame:
        """0-shot answers for a query frame (``qid``, ``query``), one row per query and sample."""
        return self(queries[['qid', 'query']].drop_duplicates('qid'))

    def __repr__(self):
        return f'Reader({self.backend.backend!r}, n_samples={self.n_samples}, seed={self.seed}, stop={self.stop!r})'
