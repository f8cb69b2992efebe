"""The collection shipped in the package, Cranfield, read from its SMART files, and the provider
that makes it a PyTerrier dataset (``utility:cranfield``)."""
import gzip
import re
from functools import cached_property
from importlib import resources
from typing import Dict, Iterable, Iterator, Optional

import pandas as pd
import pyterrier as pt

from .collection import Dataset

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

def cranfield() -> Cranfield:
    """The embedded Cranfield collection: the offline default.

    Example::

        d = pyterrier_utility.datasets.cranfield()
        d.get_topics()   # 225 queries
        d.get_qrels()    # qid, docno, label in 0..4
    """
    return Cranfield()

class UtilityDatasetProvider(pt.datasets.DatasetProvider):
    """Makes the embedded collections PyTerrier datasets: ``pt.get_dataset('utility:cranfield')``
    (registered as a ``pyterrier.dataset_provider`` entry point)."""

    def get_dataset(self, name: str) -> Dataset:
        if name != 'cranfield':
            raise KeyError(f'pyterrier_utility provides utility:cranfield, not utility:{name}')
        return cranfield()

    def list_dataset_names(self) -> Iterable[str]:
        return ['cranfield']
