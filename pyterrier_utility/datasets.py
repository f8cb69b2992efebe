"""Test collections: the embedded Cranfield default and any PyTerrier / ir_datasets dataset.

Both give topics (``qid``, ``query``), graded qrels (``qid``, ``docno``, ``label``, larger is more
relevant), document texts by docno and a BM25 retriever, so the study runs on either unchanged.
"""
import gzip
import re
from functools import cached_property
from importlib import resources
from typing import Dict, Iterator, Mapping, Optional

import pandas as pd
import pyterrier as pt

from ._util import cache_dir

#: Cleverdon's relevance codes (1 = complete answer ... 4 = minimum interest, -1 = no interest)
#: mapped to labels where larger is more relevant, as nDCG and the relevance thresholds expect.
CRANFIELD_LABELS = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}


def _clean(text: str) -> str:
    return re.sub(r'\s+', ' ', text).strip()


def _read_embedded(name: str) -> str:
    ref = resources.files('pyterrier_utility').joinpath('data', 'cranfield', name + '.gz')
    return gzip.decompress(ref.read_bytes()).decode('utf8')


def _split_records(raw: str) -> Iterator[Dict[str, str]]:
    """Parses the SMART format: records open with ``.I n``; fields open with ``.X`` on a line."""
    for record in re.split(r'^\.I ', raw, flags=re.M)[1:]:
        number, _, body = record.partition('\n')
        fields = {'I': number.strip()}
        for match in re.finditer(r'^\.([A-Z])\n(.*?)(?=^\.[A-Z]\n|\Z)', body, flags=re.M | re.S):
            fields[match.group(1)] = match.group(2)
        yield fields


class TextLoader(pt.Transformer):
    """Adds document fields (default ``text``) to a result frame from a docno-keyed mapping.

    Args:
        texts: docno -> text.
        field: the column to fill.

    Example::

        pipeline = dataset.bm25() >> dataset.text_loader()
    """

    def __init__(self, texts: Mapping[str, str], field: str = 'text'):
        self.texts = texts
        self.field = field

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        pt.validate.columns(inp, includes=['qid', 'docno'])
        missing = sorted({d for d in inp['docno'] if d not in self.texts})
        if missing:
            raise KeyError(f'{self!r}: no {self.field} for docno {missing[:10]}')
        out = inp.assign(**{self.field: inp['docno'].map(self.texts.__getitem__)})
        return out

    def __repr__(self):
        return f'TextLoader(field={self.field!r})'


class Dataset:
    """A test collection with graded qrels, document texts and a BM25 retriever."""

    name: str

    def get_topics(self) -> pd.DataFrame:
        raise NotImplementedError

    def get_qrels(self) -> pd.DataFrame:
        raise NotImplementedError

    def get_corpus_iter(self) -> Iterator[Dict[str, str]]:
        raise NotImplementedError

    @cached_property
    def texts(self) -> Dict[str, str]:
        """docno -> document text."""
        return {doc['docno']: doc['text'] for doc in self.get_corpus_iter()}

    def text_loader(self) -> pt.Transformer:
        """A transformer adding ``text`` to a result frame."""
        return TextLoader(self.texts)

    def pisa_index(self):
        """A PISA index of the corpus in the cache folder, built on first use."""
        from pyterrier_pisa import PisaIndex
        path = cache_dir() / 'indices' / (re.sub(r'[^\w.-]+', '_', self.name) + '.pisa')
        index = PisaIndex(str(path), text_field='text', stemmer='porter2', threads=1)
        if not index.built():
            index.index(self.get_corpus_iter())
        return index

    def bm25(self, num_results: int = 100) -> pt.Transformer:
        """BM25 (PISA, Porter2 stemming) returning ``num_results`` documents with their text."""
        return self.pisa_index().bm25(num_results=num_results) >> self.text_loader()

    def __repr__(self):
        return f'{type(self).__name__}({self.name!r})'


class Cranfield(Dataset):
    """The Cranfield collection (1400 aerodynamics abstracts, 225 queries), shipped in the package.

    Queries are numbered 1..225 in file order (the ``.I`` numbers of the query file are not the
    qrels' ids). Cleverdon's codes become labels by :data:`CRANFIELD_LABELS`: 1 (complete answer)
    -> 4, 2 -> 3, 3 -> 2, 4 (minimum interest) -> 1, -1 (no interest) -> 0. As is customary,
    unjudged documents count as non-relevant.
    """

    name = 'cranfield'

    @cached_property
    def _topics(self) -> pd.DataFrame:
        records = _split_records(_read_embedded('cran.qry'))
        rows = [{'qid': str(i), 'query': _clean(r.get('W', ''))} for i, r in enumerate(records, 1)]
        return pd.DataFrame(rows, columns=['qid', 'query'])

    @cached_property
    def _qrels(self) -> pd.DataFrame:
        rows = [line.split() for line in _read_embedded('cranqrel').splitlines() if line.strip()]
        qrels = pd.DataFrame(rows, columns=['qid', 'docno', 'code'])
        qrels['label'] = qrels['code'].astype(int).map(CRANFIELD_LABELS).astype(int)
        return qrels[['qid', 'docno', 'label']]

    @cached_property
    def _docs(self):
        return [{'docno': r['I'], 'title': _clean(r.get('T', '')), 'text': _clean(r.get('W', ''))}
                for r in _split_records(_read_embedded('cran.all.1400'))]

    def get_topics(self, variant: Optional[str] = None) -> pd.DataFrame:
        return self._topics.copy()

    def get_qrels(self, variant: Optional[str] = None) -> pd.DataFrame:
        return self._qrels.copy()

    def get_corpus_iter(self, verbose: bool = False) -> Iterator[Dict[str, str]]:
        return iter([dict(d) for d in self._docs])


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
        self._dataset = pt.get_dataset(name)

    def get_topics(self) -> pd.DataFrame:
        topics = self._dataset.get_topics(self.variant) if self.variant else self._dataset.get_topics()
        return topics[['qid', 'query']]

    def get_qrels(self) -> pd.DataFrame:
        qrels = self._dataset.get_qrels(self.variant) if self.variant else self._dataset.get_qrels()
        return qrels[['qid', 'docno', 'label']].astype({'label': int})

    def get_corpus_iter(self) -> Iterator[Dict[str, str]]:
        for doc in self._dataset.get_corpus_iter():
            yield {'docno': doc['docno'], 'text': doc.get('text', '')}

    def text_loader(self) -> pt.Transformer:
        if self.name.startswith('irds:'):
            return pt.text.get_text(self._dataset, 'text')
        return super().text_loader()


def answerable_topics(topics: pd.DataFrame, qrels: pd.DataFrame, labels=2) -> pd.DataFrame:
    """The topics that have at least one relevant document (``labels``: a minimum or a set).

    Answer quality is undefined for the others, so the study averages over these.
    """
    from .fbert import relevant_docnos
    keep = set(relevant_docnos(qrels, labels))
    return topics[topics['qid'].astype(str).isin(keep)].reset_index(drop=True)


def cranfield() -> Cranfield:
    """The embedded Cranfield collection: the offline default.

    Example::

        d = pyterrier_utility.datasets.cranfield()
        d.get_topics()   # 225 queries
        d.get_qrels()    # qid, docno, label in 0..4
    """
    return Cranfield()


def get_dataset(name: str, variant: Optional[str] = None) -> Dataset:
    """``'cranfield'`` for the embedded default, else any PyTerrier / ir_datasets id."""
    if name == 'cranfield':
        return cranfield()
    return PyTerrierDataset(name, variant)
