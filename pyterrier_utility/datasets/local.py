"""A test collection from files in a folder."""
import os
from functools import cached_property
from typing import Dict, Iterable, Iterator, Optional, Tuple, Union

import pandas as pd

from .._files import stable_hash
from .._messages import warn, warn_qids
from ..errors import SettingError
from .collection import Dataset
from .records import read_qrels, read_records


class LocalDataset(Dataset):
    """A test collection from files in a folder, found by their conventional names:

    - ``docs.tsv`` (``docno<TAB>text`` per line) or ``docs.jsonl`` (``{"docno": ..., "text": ...}``
      per line);
    - ``topics.tsv`` (``qid<TAB>query`` per line);
    - ``qrels`` or ``qrels.txt`` in TREC format (``qid 0 docno label``, larger is more relevant);
    - optionally ``answers.tsv``, the gold answers (``qid<TAB>answer`` per line, a line per answer, several
      per query allowed), which answer quality against gold answers reads (:meth:`gold_answers`).

    The files are UTF-8 (a byte order mark is allowed); ``.tsv`` lines end in LF or CR LF, have no
    quoting, and the first may be a header (``docno  text``, ``qid  query``). Texts are read whole,
    whatever their length, and keep every character (NUL, a lone CR, right-to-left marks, emoji; tabs
    and line breaks in ``docs.jsonl``). The documents are read once, when texts, the corpus or the
    qrels are first asked for, so every fault below is found before any generation:

    - refused with a :class:`SettingError` naming the file, the line and the docno (or qid) where it
      can be read: bytes that are not UTF-8, a lone UTF-16 surrogate (the JSON escape ``"\\ud800"``),
      a line without its fields (a ``.tsv`` line without its tab), an empty docno, a docno or qid
      holding white space (the BM25 index and TREC runs and qrels cut it there), a docno given two
      different texts (an identical repeat is read once);
    - in the qrels, refused naming the file and the line: a line of more or fewer than four fields,
      a label that is not an integer, a comment line (``#``: TREC qrels have none); blank lines, in
      any file, are skipped;
    - topics whose query is empty or blank are skipped, named in a warning;
    - in ``answers.tsv``, refused naming the file, the line and the qid: an empty or blank answer, a qid
      that ``topics.tsv`` does not hold;
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
    ANSWERS = 'answers.tsv'

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
        qrels = read_qrels(self.qrels_path)
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

    def gold_answers(self) -> Dict[str, Tuple[str, ...]]:
        """qid -> its distinct gold answers, in file order, from the folder's ``answers.tsv``, every line
        checked (see the class); a :class:`SettingError` where the folder has none."""
        return dict(self._answers)

    @cached_property
    def _answers(self) -> Dict[str, Tuple[str, ...]]:
        path = os.path.join(self.folder, self.ANSWERS)
        if not os.path.isfile(path):
            raise SettingError(f'{self.folder} has no gold answers: answer quality against gold answers reads them '
                               f'from {self.ANSWERS} in the collection folder (qid<TAB>answer per line, a line per '
                               'answer)')
        asked = {r['qid'] for _, r in read_records(self.topics_path, ('qid', 'query'))}
        answers: Dict[str, Dict[str, None]] = {}
        for number, record in read_records(path, ('qid', 'answer')):
            qid, answer = record['qid'], record['answer']
            if not answer.strip():
                raise SettingError(f'{path} line {number}, qid {qid}: an empty answer')
            if qid not in asked:
                raise SettingError(f'{path} line {number}: qid {qid} is not in {self.topics_path}')
            answers.setdefault(qid, {})[answer] = None
        if not answers:
            raise SettingError(f'{path} holds no answers (qid<TAB>answer per line)')
        return {qid: tuple(found) for qid, found in answers.items()}

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
