"""The prompt side of the reader: a query and its documents laid out by a prompt format, fitted to
the model's input limit, as a transformer of its own."""
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pandas as pd
import pyterrier as pt
import pyterrier_alpha as pta
from pyterrier.validate import InputValidationError

from ._checks import check_int
from ._frames import check_encodable, normalise_frame
from ._messages import warn_qids
from .errors import BackendError, FrameError
from .prompt_formats import PromptFormat, prompt_format as as_prompt_format


def checked_input(name: str, inp: pd.DataFrame) -> pd.DataFrame:
    """``inp`` checked as a reader's input (a result frame with ``qid``, ``query``, ``docno``,
    ``text``, or a query frame with ``qid``, ``query``: an error naming the missing columns) and
    normalised; ``name`` names the transformer in the error."""
    try:
        with pta.validate.any(inp) as v:
            v.result_frame(extra_columns=['query', 'text'], mode='k-shot')
            v.query_frame(extra_columns=['query'], mode='0-shot')
    except InputValidationError as e:
        mode = next(m for m in e.modes if m.mode_name == ('k-shot' if 'docno' in inp.columns else '0-shot'))
        missing = ', '.join(repr(c) for c in mode.missing_columns)
        raise InputValidationError(f'{name}: input has no column {missing} (a {mode.mode_name} input: '
                                   'a result frame with qid, query, docno, text, or a query frame with qid, '
                                   f'query; has {list(inp.columns)})', e.modes) from None
    check_encodable(name, inp, ('query', 'text'))
    return normalise_frame(name, inp, missing_docno_ok=True)


class Prompter(pt.Transformer):
    """The prompt of each query: k-shot from a result frame (documents in rank order, never re-sorted
    by score), 0-shot from a query frame. Output: one row per query, ``qid``, ``query`` and
    ``prompt``; a :class:`~pyterrier_utility.Reader` answers such a frame as it is.

    Where a prompt would exceed ``max_prompt_tokens`` (measured with ``tokenizer``), the documents
    are truncated evenly (the longest first, so that all keep an equal share) and the instructions
    and question are kept whole; warned once per prompter. A query without documents (a row without
    ``docno``) gets the 0-shot prompt, a document twice for a query is given once (first rank), and
    a missing or empty text gives an empty context line: each warned, naming the qids.

    Args:
        prompt_format: a name in :data:`~pyterrier_utility.prompt_formats.PROMPT_FORMATS` or a
            :class:`~pyterrier_utility.prompt_formats.PromptFormat`.
        tokenizer: what measures prompts (a Hugging Face tokenizer); ``None``: prompts are not measured.
        max_prompt_tokens: the most prompt tokens (``None``: no limit).
        name: how warnings and errors name the prompter (a :class:`~pyterrier_utility.Reader` gives its own).

    Example::

        prompter = Prompter('authors')
        prompts = (dataset.bm25() % 3 >> prompter)(dataset.get_topics().head(2))
        print(prompts['prompt'].iloc[0])
    """

    def __init__(self, prompt_format: Union[str, PromptFormat] = 'plain', *, tokenizer: Any = None,
                 max_prompt_tokens: Optional[int] = None, name: Optional[str] = None):
        if max_prompt_tokens is not None:
            check_int('Prompter', 'max_prompt_tokens', max_prompt_tokens, 1)
        self.template = as_prompt_format(prompt_format)
        self.tokenizer = tokenizer
        self.max_prompt_tokens = max_prompt_tokens
        self.name = name or f'Prompter({self.template.name!r}, max_prompt_tokens={max_prompt_tokens})'
        self._warned_truncation = False

    def build_prompt(self, query: str, texts: Sequence[str] = ()) -> str:
        """The prompt for a query and its context texts (none: the 0-shot prompt), unfitted."""
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

    def fitted_prompts(self, contexts: Sequence[Tuple[object, str, Sequence[str]]]) -> List[str]:
        """The prompt of each ``(qid, query, texts)``, documents truncated evenly where the prompt would
        exceed ``max_prompt_tokens`` (instructions and question kept; warned once). Every prompt of a
        context goes through here: the k-shot ones, eRAG's single documents and LLM-retEval's gold
        contexts alike."""
        prompts, truncated = [], []
        for qid, query, texts in contexts:
            texts, cut = self._fit(query, list(texts))
            if cut:
                truncated.append(qid)
            prompts.append(self.build_prompt(query, texts))
        if truncated and not self._warned_truncation:
            self._warned_truncation = True
            warn_qids(f'{self.name}: prompts over {self.max_prompt_tokens} tokens; documents truncated evenly, '
                      'question kept (warned once)', truncated)
        return prompts

    def prompts(self, inp: pd.DataFrame, by: Union[str, Sequence[str]] = 'qid') -> Dict[object, str]:
        """The prompt of each group of rows (``by``: ``'qid'``, or several columns such as ``['system',
        'k', 'qid']``, giving tuple keys): k-shot from a result frame, documents in rank order, or
        0-shot from a query frame (or a group whose only row has no ``docno``)."""
        missing = inp.loc[inp['query'].isna(), 'qid']
        if len(missing):
            raise FrameError(f'{self.name}: no query text for qid {sorted(set(map(str, missing)))[:20]}')
        by = [by] if isinstance(by, str) else list(by)
        key = by[0] if len(by) == 1 else by
        if 'docno' not in inp.columns:
            first = inp.drop_duplicates(by)
            return {g: self.build_prompt(str(q)) for g, q in zip(first[key].itertuples(index=False, name=None)
                                                                  if len(by) > 1 else first[key], first['query'])}
        ordered = inp.sort_values(by + ['rank'], kind='stable') if 'rank' in inp.columns else inp
        found = ordered[ordered['docno'].notna()]
        nothing = ordered[ordered['docno'].isna()].drop_duplicates(by)
        warn_qids(f'{self.name}: no document retrieved; answered with the 0-shot prompt', nothing['qid'])
        dup = found.duplicated(by + ['docno'])
        warn_qids(f'{self.name}: duplicate docno in the ranking, given once at its first rank', found.loc[dup, 'qid'])
        found = found[~dup]
        blank = found['text'].isna() | (found['text'].astype(str).str.strip() == '')
        warn_qids(f'{self.name}: missing or empty document text, given as an empty context', found.loc[blank, 'qid'])
        prompts = {g: self.build_prompt(str(q)) for g, q in
                   zip(nothing[key].itertuples(index=False, name=None) if len(by) > 1 else nothing[key],
                       nothing['query'])}
        groups = [(g, g[by.index('qid')] if len(by) > 1 else g, str(rows['query'].iloc[0]),
                   ['' if pd.isna(t) else str(t) for t in rows['text']])
                  for g, rows in found.groupby(key, sort=False)]
        prompts.update(zip([g for g, _, _, _ in groups], self.fitted_prompts([c[1:] for c in groups])))
        return prompts

    def blame(self, error: BackendError, frames: Sequence[pd.DataFrame],
              by: Union[str, Sequence[str]] = 'qid') -> BackendError:
        """``error`` naming the group (``by``: the qid, or system, k and qid) and the docnos, in rank
        order, of the prompt at fault (``error.prompt``, a prompt longer than a server's context), when
        one of ``frames`` built it; else ``error`` itself."""
        if error.prompt is None:
            return error
        by = [by] if isinstance(by, str) else list(by)
        for frame in frames:
            with warnings.catch_warnings():  # said when the prompts were built
                warnings.simplefilter('ignore')
                built = self.prompts(frame, by)
            for group, prompt in built.items():
                if prompt == error.prompt:
                    values: Tuple[Any, ...] = group if isinstance(group, tuple) else (group,)
                    rows = frame[(frame[by].astype(str) == [str(v) for v in values]).all(axis=1)]
                    rows = rows.sort_values('rank', kind='stable') if 'rank' in rows.columns else rows
                    docnos = list(rows['docno'].dropna().astype(str)) if 'docno' in rows.columns else []
                    named = ', '.join(f'{c} {v}' for c, v in zip(by, values))
                    return BackendError(f'{named}, docnos {docnos or "none (0-shot)"}: {error}', error.completed,
                                        error.prompt)
        return error

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        """One row per query of ``inp``: ``qid``, ``query``, ``prompt``."""
        inp = checked_input(self.name, inp)
        prompts = self.prompts(inp)
        queries = inp.drop_duplicates('qid')[['qid', 'query']]
        return queries.assign(prompt=[prompts[q] for q in queries['qid']]).reset_index(drop=True)

    def __repr__(self):
        return self.name
