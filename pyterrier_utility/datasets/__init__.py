"""Test collections, each a :class:`Dataset` (:mod:`.collection`): the embedded Cranfield default
(:mod:`.embedded`), a folder of files (:mod:`.local`, read by :mod:`.records`) and any PyTerrier /
ir_datasets dataset (:mod:`.external`); :func:`get_dataset` gives one by name.

All give topics (``qid``, ``query``), graded qrels (``qid``, ``docno``, ``label``, larger is more
relevant), document texts by docno (:mod:`.texts`) and a BM25 retriever (:mod:`.pisa`), so the study
runs on any of them unchanged; QA collections give gold answers too (:mod:`.gold`).
"""
import os
from typing import Optional

from ..errors import SettingError
from .collection import Dataset, answerable_topics
from .embedded import CRANFIELD_LABELS, Cranfield, UtilityDatasetProvider, cranfield
from .external import PyTerrierDataset
from .gold import GOLD_COLUMNS, GoldLike, gold_answers
from .local import LocalDataset
from .pisa import PisaBM25
from .records import read_qrels, read_records
from .texts import LazyTexts, TextLoader, texts_of

__all__ = ['CRANFIELD_LABELS', 'Cranfield', 'Dataset', 'GOLD_COLUMNS', 'GoldLike', 'LazyTexts', 'LocalDataset',
           'PisaBM25', 'PyTerrierDataset', 'TextLoader', 'UtilityDatasetProvider', 'answerable_topics', 'cranfield',
           'get_dataset', 'gold_answers', 'read_qrels', 'read_records', 'texts_of']


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
