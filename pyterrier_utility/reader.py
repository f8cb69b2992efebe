"""The reader: one answer per query (and sample) from a k-shot or 0-shot prompt."""
from typing import List, Optional, Sequence, Union

import pandas as pd
import pyterrier as pt
import pyterrier_alpha as pta
from pyterrier_rag.backend import Backend

from .cache import GenerationCache

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
        verbose: show progress.

    Example::

        reader = Reader(pyterrier_utility.backends.gemma3_270m(max_new_tokens=48))
        answers = (dataset.bm25() % 5 >> reader)(dataset.get_topics().head(3))
    """

    def __init__(self, backend: Backend, *, n_samples: int = 1, seed: int = 0,
                 max_new_tokens: Optional[int] = None, stop: Sequence[str] = ('STOP',),
                 prompt: str = KSHOT_PROMPT, zero_shot_prompt: str = ZEROSHOT_PROMPT,
                 context_format: str = CONTEXT_FORMAT, verbose: bool = False):
        if n_samples < 1:
            raise ValueError('n_samples must be at least 1')
        self.backend = backend if isinstance(backend, GenerationCache) else GenerationCache(backend)
        self.n_samples = n_samples
        self.seed = seed
        self.max_new_tokens = max_new_tokens
        self.stop = list(stop)
        self.prompt = prompt
        self.zero_shot_prompt = zero_shot_prompt
        self.context_format = context_format
        self.verbose = verbose

    def seeds(self) -> List[int]:
        """The seed of each sample."""
        return [self.seed + j for j in range(self.n_samples)]

    def build_prompt(self, query: str, texts: Sequence[str] = ()) -> str:
        """The prompt for a query and its context texts (none: the 0-shot prompt)."""
        if not len(texts):
            return self.zero_shot_prompt.format(query=query)
        contexts = '\n'.join(self.context_format.format(i=i, text=t) for i, t in enumerate(texts, 1))
        return self.prompt.format(contexts=contexts, query=query)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        zero_shot = 'docno' not in inp.columns
        pta.validate.columns(inp, includes=['qid', 'query'] if zero_shot else ['qid', 'query', 'docno', 'text'])
        if zero_shot:
            prompts = {qid: self.build_prompt(str(q)) for qid, q in zip(inp['qid'], inp['query'])}
        else:
            ordered = inp.sort_values(['qid', 'rank'], kind='stable') if 'rank' in inp.columns else inp
            prompts = {qid: self.build_prompt(str(g['query'].iloc[0]), [str(t) for t in g['text']])
                       for qid, g in ordered.groupby('qid', sort=False)}
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
        flat_prompts = [p for p in prompts for _ in seeds]
        flat_seeds = [s for _ in prompts for s in seeds]
        outs = []
        step = max(1, getattr(self.backend.backend, 'batch_size', 8)) * 4
        chunks = range(0, len(flat_prompts), step)
        for start in pt.tqdm(chunks, desc=repr(self), unit='batch', disable=not self.verbose or len(chunks) < 2):
            outs.extend(o.text for o in self.backend.generate(
                flat_prompts[start:start + step], seeds=flat_seeds[start:start + step],
                max_new_tokens=self.max_new_tokens, stop_sequences=self.stop))
        return [outs[i * len(seeds):(i + 1) * len(seeds)] for i in range(len(prompts))]

    def zero_shot(self, queries: pd.DataFrame) -> pd.DataFrame:
        """0-shot answers for a query frame (``qid``, ``query``), one row per query and sample."""
        return self(queries[['qid', 'query']].drop_duplicates('qid'))

    def __repr__(self):
        return f'Reader({self.backend.backend!r}, n_samples={self.n_samples})'
