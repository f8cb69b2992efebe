"""Document texts by docno: fetched from a document store as asked (:class:`LazyTexts`), and added
to a result frame (:class:`TextLoader`)."""
from collections import OrderedDict
from collections.abc import Mapping as MappingABC
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional

import pandas as pd
import pyterrier as pt

from ..errors import SettingError
from ..protocols import BatchTexts


class LazyTexts(MappingABC):
    """docno -> text, fetched from a document store when first asked and remembered (least recently
    used dropped beyond ``max_cached``): a study reads the texts of the documents it touches, never
    the whole corpus.

    Args:
        fetch: docnos -> {docno: text} for those found (e.g. an ir_datasets docstore's ``get_many``).
        docnos: iterates every docno of the corpus (the Mapping interface; the study never calls it).
        count: the number of documents.
        docno_at: the docno of the i-th document (0 <= i < count), for drawing unjudged documents
            by random index (``None``: the store cannot; :meth:`docno_at` then raises).
        max_cached: texts kept in memory.

    Example::

        texts = LazyTexts(lambda ids: {d.doc_id: d.text for d in store.get_many_iter(ids)},
                          docnos=lambda: (d.doc_id for d in corpus.docs_iter()), count=corpus.docs_count,
                          docno_at=lambda i: iter(store)[i].doc_id)
    """

    def __init__(self, fetch: Callable[[List[str]], Dict[str, str]], docnos: Callable[[], Iterator[str]],
                 count: Callable[[], int], docno_at: Optional[Callable[[int], str]] = None,
                 max_cached: int = 200_000):
        self._fetch = fetch
        self._docnos = docnos
        self._count = count
        self._docno_at = docno_at
        self.max_cached = max_cached
        self._cache: 'OrderedDict[str, str]' = OrderedDict()
        self.fetched = 0

    def get_many(self, docnos: Iterable[str]) -> Dict[str, str]:
        """The texts of the docnos found, fetched together for those not in memory."""
        docnos = [str(d) for d in dict.fromkeys(docnos)]
        todo = [d for d in docnos if d not in self._cache]
        if todo:
            found = self._fetch(todo)
            self.fetched += len(found)
            for docno, text in found.items():
                self._cache[docno] = text
            while len(self._cache) > self.max_cached:
                self._cache.popitem(last=False)
            out = {d: found[d] if d in found else self._cache[d] for d in docnos if d in found or d in self._cache}
        else:
            out = {d: self._cache[d] for d in docnos}
        for d in out:
            if d in self._cache:
                self._cache.move_to_end(d)
        return out

    def __getitem__(self, docno: str) -> str:
        found = self.get_many([docno])
        if str(docno) not in found:
            raise KeyError(docno)
        return found[str(docno)]

    def __iter__(self) -> Iterator[str]:
        return iter(self._docnos())

    def __len__(self) -> int:
        return self._count()

    def docno_at(self, i: int) -> str:
        """The docno of the i-th document of the corpus (its store's order)."""
        if self._docno_at is None:
            raise SettingError(f'{self!r}: this document store cannot name a document by its position')
        return str(self._docno_at(int(i)))

    def __repr__(self):
        return f'LazyTexts({len(self._cache)} in memory, {self.fetched} fetched)'

def texts_of(texts: Mapping[str, str], docnos: Iterable[str]) -> Dict[str, str]:
    """The texts of the docnos found in ``texts``, fetched together where the mapping can."""
    if isinstance(texts, BatchTexts):
        return dict(texts.get_many(docnos))
    return {d: texts[d] for d in dict.fromkeys(docnos) if d in texts}


class TextLoader(pt.Transformer):
    """Adds document fields (default ``text``) to a result frame from a docno-keyed mapping.

    Args:
        texts: docno -> text (a dict, or :class:`LazyTexts` fetching only the documents asked for).
        field: the column to fill.

    Example::

        pipeline = dataset.bm25() >> dataset.text_loader()
    """

    def __init__(self, texts: Mapping[str, str], field: str = 'text'):
        self.texts = texts
        self.field = field

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.columns(inp, includes=['qid', 'docno'])
        found = texts_of(self.texts, inp['docno'].astype(str))
        missing = sorted(set(inp['docno'].astype(str)) - set(found))
        if missing:
            raise KeyError(f'{self!r}: no {self.field} for docno {missing[:10]}')
        return inp.assign(**{self.field: inp['docno'].astype(str).map(found)})

    def fuse_rank_cutoff(self, k: int) -> pt.Transformer:
        """``loader % k`` cuts before loading, so texts are fetched for the k kept documents only."""
        return pt.RankCutoff(k) >> self

    def __repr__(self):
        return f'TextLoader(field={self.field!r})'
