"""Any dataset PyTerrier knows (``irds:...`` ids among them), downloaded on first use; an ir_datasets
corpus's texts fetched from its docstore as asked."""
from functools import cached_property
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

import pandas as pd
import pyterrier as pt

from ..errors import SettingError
from .collection import Dataset
from .gold import GOLD_COLUMNS, gold_answers
from .texts import LazyTexts


def _nearest_dataset(name: str) -> str:
    """`` (did you mean ...?)`` with the ir_datasets id nearest to a mistyped ``irds:`` one, else ``''``."""
    import difflib

    import ir_datasets
    known = ['irds:' + n for n in ir_datasets.registry] if name.startswith('irds:') else ['cranfield']
    near = difflib.get_close_matches(name, known, n=1)
    return f' (did you mean {near[0]!r}?)' if near else ''


class PyTerrierDataset(Dataset):
    """Any dataset :func:`pyterrier.get_dataset` knows, e.g. ``irds:msmarco-passage/trec-dl-2019/judged``.

    Needs the network on first use (the data is downloaded by ir_datasets / PyTerrier).

    Args:
        name: the PyTerrier dataset id.
        variant: topics/qrels variant for datasets that have several (e.g. ``'test'``).
    """

    def __init__(self, name: str, variant: Optional[str] = None):
        self.name = name
        self.variant = variant
        try:
            self._dataset = pt.get_dataset(name)
        except KeyError:
            raise SettingError(f'unknown dataset {name!r}{_nearest_dataset(name)}: give cranfield (embedded), a '
                               'folder with docs.tsv, topics.tsv and qrels (--dataset DIR), or a PyTerrier / '
                               'ir_datasets id such as irds:msmarco-passage/trec-dl-2019/judged') from None

    @property
    def _irds(self):
        return self._dataset.irds_ref() if self.name.startswith('irds:') else None

    @property
    def corpus_name(self) -> str:
        if self._irds is not None:
            import ir_datasets
            return 'irds:' + ir_datasets.docs_parent_id(self.name[len('irds:'):])
        return self.name

    @cached_property
    def texts(self) -> Mapping[str, str]:
        """docno -> text; for ir_datasets collections fetched lazily from the docstore."""
        irds = self._irds
        if irds is None:
            return super().texts
        store = irds.docs_store()

        def fetch(docnos: List[str]) -> Dict[str, str]:
            return {d.doc_id: _doc_text(d) for d in store.get_many_iter(docnos)}
        return LazyTexts(fetch, docnos=lambda: (d.doc_id for d in irds.docs_iter()), count=irds.docs_count,
                         docno_at=lambda i: iter(store)[i].doc_id)

    @cached_property
    def _topics(self) -> pd.DataFrame:
        topics = self._dataset.get_topics(self.variant) if self.variant else self._dataset.get_topics()
        if 'query' not in topics.columns and 'text' in topics.columns:
            # ir_datasets queries with fields besides their text (dpr-w100's answers) keep the names.
            topics = topics.rename(columns={'text': 'query'})
        return topics

    def get_topics(self, variant: Optional[str] = None) -> pd.DataFrame:
        if variant not in (None, self.variant):
            return PyTerrierDataset(self.name, variant).get_topics()
        return self._topics[['qid', 'query']].copy()

    def gold_answers(self) -> Dict[str, Tuple[str, ...]]:
        """qid -> gold answers: the dataset's ``get_answers()`` where it has one (pyterrier-rag's
        RAGDataset interface), else the topics' ``gold_answer`` or ``answers`` column (ir_datasets'
        QA queries, e.g. dpr-w100/natural-questions)."""
        get_answers = getattr(self._dataset, 'get_answers', None)  # declared by pyterrier-rag's RAGDataset
        source = (get_answers(self.variant) if self.variant else get_answers()) if get_answers else self._topics
        if not isinstance(source, pd.DataFrame) or not set(GOLD_COLUMNS) & set(source.columns):
            return super().gold_answers()
        return gold_answers(source)

    def get_qrels(self, variant: Optional[str] = None) -> pd.DataFrame:
        if variant not in (None, self.variant):
            return PyTerrierDataset(self.name, variant).get_qrels()
        qrels = self._dataset.get_qrels(self.variant) if self.variant else self._dataset.get_qrels()
        return qrels[['qid', 'docno', 'label']].astype({'label': int})

    def get_corpus_iter(self, verbose: bool = False) -> Iterator[Dict[str, str]]:
        if self._irds is not None:
            for doc in self._irds.docs_iter():
                yield {'docno': doc.doc_id, 'text': _doc_text(doc)}
            return
        for doc in self._dataset.get_corpus_iter():
            yield {'docno': doc['docno'], 'text': doc.get('text', '')}

def _doc_text(doc) -> str:
    text = getattr(doc, 'text', None)
    return text if isinstance(text, str) else doc.default_text()
