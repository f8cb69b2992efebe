"""Gold answers of QA collections, read from a mapping or a frame."""
import math
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

import pandas as pd

from .._frames import validate_columns

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
