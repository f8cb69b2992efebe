"""What a test collection gives the study: topics, graded qrels, document texts and BM25 (:class:`Dataset`),
and the topics it averages over (:func:`answerable_topics`)."""
import os
import re
from functools import cached_property
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Tuple, Union

import pandas as pd
import pyterrier as pt

from .._files import built_once, cache_dir
from .._messages import native_output_silenced
from ..errors import SettingError
from ..settings import LabelSet
from .pisa import PisaBM25
from .texts import TextLoader


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
                           'dpr-w100/natural-questions/dev, topics with a gold_answer or answers column, or a '
                           'collection folder holding answers.tsv)')

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

def answerable_topics(topics: pd.DataFrame, qrels: pd.DataFrame, labels=2) -> pd.DataFrame:
    """The topics that have at least one relevant document (``labels``: a minimum or a set).

    Answer quality is undefined for the others, so the study averages over these.
    """
    return LabelSet.parse(labels).answerable(topics, qrels)
