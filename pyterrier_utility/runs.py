"""A saved run as a system: the utility of a retriever's results without running the retriever."""
from pathlib import Path
from typing import Mapping, Union

import pandas as pd
import pyterrier as pt

from ._util import normalise_frame, validate_columns, warn_qids
from .datasets import texts_of
from .errors import FrameError, SettingError


def read_run(path: Union[str, Path]) -> pd.DataFrame:
    """A run file as a result frame (``qid``, ``docno``, ``score``, ``rank``): TREC's six columns
    (``qid Q0 docno rank score tag``), or a PyTerrier result frame saved as CSV or parquet."""
    path = Path(path)
    if not path.is_file():
        raise SettingError(f'run file {path} does not exist')
    if path.suffix == '.parquet':
        frame = pd.read_parquet(path)
    elif path.suffix == '.csv':
        frame = pd.read_csv(path, dtype={'qid': str, 'docno': str})
    else:
        try:
            frame = pt.io.read_results(str(path))
        except Exception as e:  # a malformed line: say which file
            raise FrameError(f'run file {path} is not a TREC run (qid Q0 docno rank score tag): {e}') from None
    validate_columns(f'run file {path}', frame, ['qid', 'docno'])
    if 'score' not in frame.columns and 'rank' not in frame.columns:
        raise FrameError(f'run file {path}: needs a score or a rank column')
    frame = normalise_frame(f'run file {path}', frame)
    if 'score' not in frame.columns:
        frame = frame.assign(score=-frame['rank'].astype(float))
    # Ranks follow the scores, as trec_eval reads a run (ties in file order).
    frame = frame.sort_values(['qid', 'score'], ascending=[True, False], kind='stable')
    return frame.assign(rank=frame.groupby('qid').cumcount())[['qid', 'docno', 'score', 'rank']].reset_index(drop=True)


class RunFile(pt.Transformer):
    """Retrieves from a saved run: each query's documents as the run ranked them, with ``text``.

    Queries absent from the run retrieve nothing (named in a warning). ``RunFile(...) % k`` keeps
    the top k; in a study it is a system like BM25, reversible with the others.

    Args:
        path: a TREC run (six columns) or a PyTerrier result frame as CSV or parquet.
        texts: docno -> text of the collection.

    Example::

        systems = {'myrun': RunFile('runs/bm25+rm3.txt', dataset.texts)}
    """

    def __init__(self, path: Union[str, Path], texts: Mapping[str, str]):
        self.path = Path(path)
        self.texts = texts
        self.run = read_run(self.path)

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'query'])
        topics = normalise_frame(repr(self), inp[['qid', 'query']].drop_duplicates())
        out = topics.merge(self.run, on='qid', how='inner')
        warn_qids(f'{self!r}: the run has no documents', set(topics['qid']) - set(out['qid']))
        texts = texts_of(self.texts, out['docno'])
        missing = sorted(set(out['docno']) - set(texts))
        if missing:
            raise FrameError(f'{self!r}: docno {missing[:10]} not in the collection')
        return out.assign(text=out['docno'].map(texts))[['qid', 'query', 'docno', 'text', 'score', 'rank']]

    def qids(self) -> set:
        """The queries the run ranks documents for."""
        return set(self.run['qid'])

    def __repr__(self):
        return f'RunFile({str(self.path)!r})'
