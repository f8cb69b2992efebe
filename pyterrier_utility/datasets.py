"""Test collections: the embedded Cranfield default and any PyTerrier / ir_datasets dataset.

Both give topics (``qid``, ``query``), graded qrels (``qid``, ``docno``, ``label``, larger is more
relevant), document texts by docno and a BM25 retriever, so the study runs on either unchanged.
"""
import codecs
import gzip
import json
import math
import os
import re
from collections import OrderedDict
from collections.abc import Mapping as MappingABC
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import pandas as pd
import pyterrier as pt

from ._files import built_once, cache_dir, stable_hash
from ._frames import validate_columns
from ._messages import native_output_silenced, warn, warn_qids
from ._text import encodable
from .errors import SettingError
from .protocols import BatchTexts
from .settings import LabelSet

#: Cleverdon's relevance codes (1 = complete answer ... 4 = minimum interest, -1 = no interest)
#: mapped to labels where larger is more relevant, as nDCG and the relevance thresholds expect.
CRANFIELD_LABELS = {1: 4, 2: 3, 3: 2, 4: 1, -1: 0}


def _clean(text: str) -> str:
    return re.sub(r'\s+', ' ', text).strip()


def _read_embedded(name: str) -> str:
    ref = resources.files('pyterrier_utility') / 'data' / 'cranfield' / (name + '.gz')
    return gzip.decompress(ref.read_bytes()).decode('utf8')


def _split_records(raw: str) -> Iterator[Dict[str, str]]:
    """Parses the SMART format: records open with ``.I n``; fields open with ``.X`` on a line."""
    for record in re.split(r'^\.I ', raw, flags=re.M)[1:]:
        number, _, body = record.partition('\n')
        fields = {'I': number.strip()}
        for match in re.finditer(r'^\.([A-Z])\n(.*?)(?=^\.[A-Z]\n|\Z)', body, flags=re.M | re.S):
            fields[match.group(1)] = match.group(2)
        yield fields


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


#: The topic columns gold answers are read from, the first present.
GOLD_COLUMNS = ('gold_answer', 'answers')
GoldLike = Union[pd.DataFrame, Mapping[str, Union[str, Iterable[str]]]]


def _strings(value) -> List[str]:
    if isinstance(value, str):
        return [value]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return []
    return [str(v) for v in value]


def gold_answers(source: GoldLike, column: Optional[str] = None) -> Dict[str, Tuple[str, ...]]:
    """qid -> its distinct non-blank gold answers, from a mapping (qid -> an answer or a list of
    them) or a frame with ``qid`` and a ``column`` (default: the first of :data:`GOLD_COLUMNS`
    present) holding an answer or a list per row, as pyterrier-rag's ``get_answers()`` (one row per
    answer) and ir_datasets' topics with ``answers`` give them.

    Example::

        gold_answers(pd.DataFrame({'qid': ['1', '1'], 'gold_answer': ['Paris', 'paris, France']}))
    """
    if isinstance(source, pd.DataFrame):
        found = [c for c in GOLD_COLUMNS if c in source.columns]
        column = column or (found[0] if found else GOLD_COLUMNS[0])
        validate_columns('gold answers', source, ['qid', column])
        pairs: Iterable[Tuple[str, object]] = zip(source['qid'].astype(str), source[column])
    else:
        pairs = ((str(q), a) for q, a in source.items())
    out: Dict[str, Dict[str, None]] = {}
    for qid, value in pairs:
        out.setdefault(qid, {}).update(dict.fromkeys(a for a in _strings(value) if a.strip()))
    return {qid: tuple(answers) for qid, answers in out.items() if answers}


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


class PisaBM25(pt.Transformer):
    """BM25 over a built PISA index (pyterrier-pisa's), picklable: PISA's native retrieval context is
    opened when first needed, and again after unpickling.

    Args:
        index: the index folder.
        num_results: documents per query.

    Example::

        bm25 = PisaBM25(str(dataset.pisa_index().path), num_results=100)
    """

    def __init__(self, index: str, num_results: int = 100, verbose: bool = False):
        self.index = str(index)
        self.num_results = num_results
        self.verbose = verbose
        self._retriever: Optional[pt.Transformer] = None

    def __getstate__(self):
        return dict(self.__dict__, _retriever=None)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        if self._retriever is None:
            from pyterrier_pisa import PisaIndex
            # The first retriever over an index compresses its scores: a flood of progress lines.
            with native_output_silenced(not self.verbose):
                self._retriever = PisaIndex(self.index).bm25(num_results=self.num_results)
        return self._retriever(inp)

    def fuse_rank_cutoff(self, k: int) -> 'PisaBM25':
        return self if k >= self.num_results else PisaBM25(self.index, num_results=k, verbose=self.verbose)

    def __repr__(self):
        return f'PisaBM25({self.index!r}, num_results={self.num_results})'


class Dataset(pt.datasets.Dataset):
    """A test collection with graded qrels, document texts and a BM25 retriever (a PyTerrier dataset)."""

    name: str

    def get_topics(self, variant: Optional[str] = None) -> pd.DataFrame:
        raise NotImplementedError

    def get_qrels(self, variant: Optional[str] = None) -> pd.DataFrame:
        raise NotImplementedError

    def get_corpus_iter(self, verbose: bool = False) -> Iterator[Dict[str, str]]:
        raise NotImplementedError

    def gold_answers(self) -> Dict[str, Tuple[str, ...]]:
        """qid -> the gold answers of a QA collection (a :class:`SettingError` for the others)."""
        raise SettingError(f'{self.name} has no gold answers: answer quality against gold answers needs a QA '
                           "collection with qrels (an ir_datasets id whose queries have answers, such as "
                           'dpr-w100/natural-questions/dev, or topics with a gold_answer or answers column)')

    @cached_property
    def texts(self) -> Mapping[str, str]:
        """docno -> document text."""
        return {doc['docno']: doc['text'] for doc in self.get_corpus_iter()}

    def text_loader(self, fields: Union[str, List[str]] = '*', *, verbose: bool = False) -> pt.Transformer:
        """A transformer adding ``text`` to a result frame (``pt.text.get_text(dataset, 'text')`` works too)."""
        asked = [fields] if isinstance(fields, str) else list(fields)
        if any(f not in ('*', 'text') for f in asked):
            raise SettingError(f"{self!r} provides the field 'text', not {asked}")
        return TextLoader(self.texts)

    @property
    def corpus_name(self) -> str:
        """The name of the document collection (datasets sharing a corpus share its index)."""
        return self.name

    def pisa_index(self, path: Optional[str] = None, threads: Optional[int] = None, verbose: bool = False):
        """A PISA index of the corpus: ``path`` if given (built there if new or empty), else in the
        cache folder, built on first use with ``threads`` (default: every core) by one process while
        others wait (:func:`~pyterrier_utility._files.built_once`); PISA's log lines only when ``verbose``."""
        import pyterrier_pisa
        location = Path(path or cache_dir() / 'indices' / (re.sub(r'[^\w.-]+', '_', self.corpus_name) + '.pisa'))
        threads = threads or os.cpu_count() or 1

        def built(folder: Path) -> bool:
            return pyterrier_pisa.PisaIndex(str(folder)).built()

        if path is not None and location.is_dir() and any(location.iterdir()) and not built(location):
            raise SettingError(f'{location} is neither a PISA index nor an empty folder: give an index, or a new '
                               'or empty folder to build one in')

        def build(staging: Path) -> None:
            with native_output_silenced(not verbose):
                index = pyterrier_pisa.PisaIndex(str(staging), text_field='text', stemmer='porter2', threads=threads)
                index.index(self.get_corpus_iter())
                # PISA writes BM25's compressed index into the folder on the first retrieval: here,
                # before the folder is published, not by readers racing each other.
                index.bm25()

        built_once(location, build, f'the PISA index of {self.corpus_name}', done=built)
        return pyterrier_pisa.PisaIndex(str(location), text_field='text', stemmer='porter2', threads=threads)

    def bm25(self, num_results: int = 100, index: Optional[str] = None, engine: str = 'pisa',
             verbose: bool = False) -> pt.Transformer:
        """BM25 returning ``num_results`` documents with their text: over a PISA index (Porter2
        stemming; ``index`` an existing one, else built in the cache folder), or ``engine='terrier'``
        over a Terrier index (``index`` its path; needs Java), PyTerrier's own BM25 as the paper used.
        PISA's log and progress lines only when ``verbose``."""
        if engine == 'pisa':
            pisa = self.pisa_index(index, verbose=verbose)
            return PisaBM25(str(pisa.path), num_results=num_results, verbose=verbose) >> self.text_loader()
        if engine != 'terrier':
            raise SettingError(f"bm25: engine must be 'pisa' or 'terrier', got {engine!r}")
        if index is None:
            raise SettingError('bm25: Terrier BM25 needs the path of a Terrier index (--index)')
        try:
            retriever = pt.terrier.Retriever(str(index), wmodel='BM25', num_results=num_results)
        except Exception as e:  # no Java, no Terrier jar, or not a Terrier index
            raise SettingError(f'bm25: Terrier BM25 over {index} is not available here ({type(e).__name__}: {e}); '
                               "use engine 'pisa'") from None
        return retriever >> self.text_loader()

    def __repr__(self):
        return f'{type(self).__name__}({self.name!r})'


class Cranfield(Dataset):
    """The Cranfield collection (1400 aerodynamics abstracts, 225 queries), shipped in the package:
    a copy of ``irds:cranfield`` (the same documents, queries and qrels) that needs no download.

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


class LocalDataset(Dataset):
    """A test collection from files in a folder, found by their conventional names:

    - ``docs.tsv`` (``docno<TAB>text`` per line) or ``docs.jsonl`` (``{"docno": ..., "text": ...}``
      per line);
    - ``topics.tsv`` (``qid<TAB>query`` per line);
    - ``qrels`` or ``qrels.txt`` in TREC format (``qid 0 docno label``, larger is more relevant).

    The files are UTF-8 (a byte order mark is allowed); ``.tsv`` lines end in LF or CR LF, have no
    quoting, and the first may be a header (``docno  text``, ``qid  query``). Texts are read whole,
    whatever their length, and keep every character (NUL, a lone CR, right-to-left marks, emoji; tabs
    and line breaks in ``docs.jsonl``). The documents are read once, when texts, the corpus or the
    qrels are first asked for, so every fault below is found before any generation:

    - refused with a :class:`SettingError` naming the file, the line and the docno (or qid) where it
      can be read: bytes that are not UTF-8, a lone UTF-16 surrogate (the JSON escape ``"\\ud800"``),
      a line without its fields, an empty docno, a docno given two different texts (an identical
      repeat is read once);
    - topics whose query is empty or blank are skipped, named in a warning;
    - judgements of documents not in the collection are dropped from the qrels, named in a warning
      (TREC qrels often judge documents a distributed subset lacks), so no oracle gives them and no
      FBERT reference is missing; qrels that judge none of the documents are refused.

    The BM25 index is built in the cache folder on first use, under a name that changes when
    ``docs`` changes.

    Args:
        folder: the folder holding the files.

    Example::

        d = LocalDataset('my_collection')            # or get_dataset('my_collection'), --dataset my_collection
        d.get_topics(); d.get_qrels(); d.texts['D1']
    """

    DOCS = ('docs.tsv', 'docs.jsonl')
    TOPICS = ('topics.tsv',)
    QRELS = ('qrels', 'qrels.txt')

    def __init__(self, folder: Union[str, os.PathLike]):
        self.folder = os.path.abspath(folder)
        self.name = os.path.basename(self.folder.rstrip(os.sep))
        self.docs_path, self.topics_path, self.qrels_path = (self._find(names) for names in
                                                             (self.DOCS, self.TOPICS, self.QRELS))

    def _find(self, names) -> str:
        found = [n for n in names if os.path.isfile(os.path.join(self.folder, n))]
        if len(found) != 1:
            raise SettingError(f'{self.folder}: a local collection needs exactly one of {list(names)}, found '
                               f'{found or "none"} (the folder holds {sorted(os.listdir(self.folder))[:20]})')
        return os.path.join(self.folder, found[0])

    @cached_property
    def texts(self) -> Dict[str, str]:
        """docno -> text, in file order, every line checked (see the class)."""
        texts: Dict[str, str] = {}
        lines: Dict[str, int] = {}
        for number, doc in read_records(self.docs_path, ('docno', 'text')):
            docno, text = doc['docno'], doc['text']
            if docno in texts:
                if texts[docno] != text:
                    raise SettingError(f'{self.docs_path} line {number}: docno {docno} again, with a text different '
                                       f'from that of line {lines[docno]}')
                continue
            texts[docno], lines[docno] = text, number
        return texts

    @cached_property
    def _topics(self) -> pd.DataFrame:
        topics = pd.DataFrame([r for _, r in read_records(self.topics_path, ('qid', 'query'))],
                              columns=['qid', 'query'], dtype=str)
        blank = topics['query'].str.strip() == ''
        warn_qids(f'{self.topics_path}: topics with an empty query skipped', topics.loc[blank, 'qid'])
        return topics[~blank].reset_index(drop=True)

    @cached_property
    def _qrels(self) -> pd.DataFrame:
        qrels = pt.io.read_qrels(self.qrels_path)
        qrels = qrels[['qid', 'docno', 'label']].astype({'qid': str, 'docno': str, 'label': int})
        absent = ~qrels['docno'].map(self.texts.__contains__)
        judged = qrels['docno'].unique()
        if len(qrels) and absent.all():
            raise SettingError(f'{self.qrels_path}: none of its {len(judged)} judged documents is in {self.docs_path} '
                               f'(it judges docno {_some(judged)}; the collection has {_some(self.texts)}): do the '
                               'docnos match?')
        if absent.any():
            pairs = [f'qid {q} docno {d}' for q, d in zip(qrels.loc[absent, 'qid'], qrels.loc[absent, 'docno'])]
            warn(f'{self.qrels_path}: {len(pairs)} judgement{"s" * (len(pairs) != 1)} of documents not in '
                 f'{self.docs_path} dropped: {_some(pairs)}')
        return qrels[~absent].reset_index(drop=True)

    def get_topics(self, variant: Optional[str] = None) -> pd.DataFrame:
        return self._topics.copy()

    def get_qrels(self, variant: Optional[str] = None) -> pd.DataFrame:
        return self._qrels.copy()

    def get_corpus_iter(self, verbose: bool = False) -> Iterator[Dict[str, str]]:
        return ({'docno': docno, 'text': text} for docno, text in self.texts.items())

    @property
    def corpus_name(self) -> str:
        """The folder and a digest of the documents file's size and time, so an edited corpus gets a
        new index."""
        stat = os.stat(self.docs_path)
        return f'local-{self.name}-' + stable_hash(self.docs_path, stat.st_size, stat.st_mtime_ns)[:12]


def _some(names: Iterable[str], shown: int = 10) -> str:
    """The first ``shown`` names, and how many there are in all when there are more."""
    names = list(names)
    return ', '.join(names[:shown]) + (f' ... ({len(names)} in all)' if len(names) > shown else '')


def _printable(text: str) -> str:
    """``text`` with lone surrogates written as ``\\udXXX`` escapes, so a message can be printed."""
    return text.encode('utf-8', 'backslashreplace').decode('utf-8')


def _fields(path: str, number: int, line: str, columns: Sequence[str]) -> Dict[str, str]:
    """The record of one line of a ``.tsv`` or ``.jsonl`` file; a :class:`SettingError` naming the file and
    line when it does not hold ``columns`` as strings, or its first is empty."""
    if not path.endswith('.jsonl'):
        fields = line.split('\t')
        if len(fields) != len(columns):
            raise SettingError(f'{path} line {number}: {len(fields)} field{"s" * (len(fields) != 1)}, expected '
                               f'{len(columns)} ({"<TAB>".join(columns)})')
        record = dict(zip(columns, fields))
    else:
        try:
            parsed = json.loads(line)
        except json.JSONDecodeError as e:
            raise SettingError(f'{path} line {number}: not a JSON object ({e.msg}: column {e.colno})') from None
        if not isinstance(parsed, dict) or any(c not in parsed for c in columns):
            has = sorted(parsed) if isinstance(parsed, dict) else f'a JSON {type(parsed).__name__}'
            raise SettingError(f'{path} line {number}: a document needs {" and ".join(map(json.dumps, columns))}, '
                               f'has {has}')
        key = columns[0]
        if isinstance(parsed[key], int) and not isinstance(parsed[key], bool):
            parsed[key] = str(parsed[key])  # docno 12 is the docno '12' that qrels and runs spell
        for column in columns:
            if not isinstance(parsed[column], str):
                named = f', {key} {_printable(parsed[key])}' if column != key else ''
                raise SettingError(f'{path} line {number}{named}: {column} is {json.dumps(parsed[column])}, '
                                   'not a string')
        record = {c: parsed[c] for c in columns}
    if not record[columns[0]].strip():
        raise SettingError(f'{path} line {number}: empty {columns[0]}')
    return record


def read_records(path: str, columns: Sequence[str]) -> Iterator[Tuple[int, Dict[str, str]]]:
    """The records of a UTF-8 ``.tsv`` file (one per line, the fields ``columns`` separated by tabs,
    no quoting, an optional header line naming them) or ``.jsonl`` file (one JSON object per line
    holding ``columns``; the first may be an integer), with their line numbers. Blank lines are
    skipped; a line ends in LF or CR LF; a byte order mark opening the file is dropped.

    Raises :class:`SettingError` naming the file, the line and, where it can be read, the first
    column's value: bytes that are not UTF-8, a lone UTF-16 surrogate (``"\\ud800"`` in JSON), a
    line without its fields, a value that is not a string, an empty first column. Nothing is cut, at
    any length.

    Args:
        path: the file (``.jsonl`` read as JSON lines, anything else as tab-separated).
        columns: the fields of a record, the first its id (``docno``, ``qid``).

    Example::

        texts = {r['docno']: r['text'] for _, r in read_records('docs.tsv', ('docno', 'text'))}
    """
    key = columns[0]
    header = not path.endswith('.jsonl')
    with open(path, 'rb') as lines:
        for number, raw in enumerate(lines, 1):
            raw = raw[:-2] if raw.endswith(b'\r\n') else raw.removesuffix(b'\n')
            if number == 1:
                raw = raw.removeprefix(codecs.BOM_UTF8)
            try:
                line = raw.decode('utf-8')
            except UnicodeDecodeError as e:
                try:
                    named = f', {key} ' + _fields(path, number, raw.decode('utf-8', 'replace'), columns)[key]
                except SettingError:
                    named = ''
                raise SettingError(f'{path} line {number}{named}: bytes that are not UTF-8 (0x{raw[e.start]:02x} at '
                                   f'byte {e.start + 1}); save the file as UTF-8') from None
            if not line.strip():
                continue
            record = _fields(path, number, line, columns)
            if header:
                header = False
                if list(record) == list(record.values()):
                    continue
            for column, value in record.items():
                if not encodable(value):
                    surrogate = next(c for c in value if 0xD800 <= ord(c) <= 0xDFFF)
                    raise SettingError(f'{path} line {number}, {key} {_printable(record[key])}: {column} holds a lone '
                                       f'UTF-16 surrogate ({_printable(surrogate)}), which is not a character: no '
                                       'tokenizer, cache or file can take it')
            yield number, record


def _doc_text(doc) -> str:
    text = getattr(doc, 'text', None)
    return text if isinstance(text, str) else doc.default_text()


def answerable_topics(topics: pd.DataFrame, qrels: pd.DataFrame, labels=2) -> pd.DataFrame:
    """The topics that have at least one relevant document (``labels``: a minimum or a set).

    Answer quality is undefined for the others, so the study averages over these.
    """
    return LabelSet.parse(labels).answerable(topics, qrels)


class UtilityDatasetProvider(pt.datasets.DatasetProvider):
    """Makes the embedded collections PyTerrier datasets: ``pt.get_dataset('utility:cranfield')``
    (registered as a ``pyterrier.dataset_provider`` entry point)."""

    def get_dataset(self, name: str) -> Dataset:
        if name != 'cranfield':
            raise KeyError(f'pyterrier_utility provides utility:cranfield, not utility:{name}')
        return cranfield()

    def list_dataset_names(self) -> Iterable[str]:
        return ['cranfield']


def cranfield() -> Cranfield:
    """The embedded Cranfield collection: the offline default.

    Example::

        d = pyterrier_utility.datasets.cranfield()
        d.get_topics()   # 225 queries
        d.get_qrels()    # qid, docno, label in 0..4
    """
    return Cranfield()


def get_dataset(name: str, variant: Optional[str] = None) -> Dataset:
    """``'cranfield'`` for the embedded default, a folder of files for a :class:`LocalDataset`,
    else any PyTerrier / ir_datasets id (``irds:...``)."""
    if name == 'cranfield':
        return cranfield()
    if os.path.isdir(name):
        return LocalDataset(name)
    if name.startswith('rag:'):
        raise SettingError(f'{name}: pyterrier-rag\'s datasets give questions and gold answers, not graded '
                           'judgements of documents, so they cannot give the study its references or its Rel and '
                           'NRel systems; use an ir_datasets id with qrels (irds:...), a folder of files '
                           '(docs.tsv, topics.tsv, qrels) or cranfield')
    return PyTerrierDataset(name, variant)
