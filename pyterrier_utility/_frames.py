"""Frames checked and normalised at the boundary: the columns a transformer needs, texts it can
encode, ``qid`` and ``docno`` as strings and ``rank`` numeric."""
from typing import Iterable, Sequence

import pandas as pd

from ._text import encodable
from .errors import FrameError


def validate_columns(owner, frame, includes: Iterable[str]) -> None:
    """Checks ``frame`` has the columns ``includes``; the error names the missing columns and ``owner``
    (a transformer, or a string such as ``'run_study topics'``)."""
    import pyterrier_alpha as pta
    from pyterrier.validate import InputValidationError
    includes = list(includes)
    try:
        pta.validate.columns(frame, includes=includes)
    except InputValidationError as e:
        missing = ', '.join(repr(c) for c in includes if c not in frame.columns)
        name = owner if isinstance(owner, str) else repr(owner)
        raise InputValidationError(f'{name}: input has no column {missing} (needs {includes}, '
                                   f'has {list(frame.columns)})', e.modes) from None


def check_encodable(owner: str, frame: pd.DataFrame, columns: Sequence[str] = ('query', 'text')) -> None:
    """Raises :class:`FrameError` naming the qid (and docno, for a document) of each text in
    ``columns`` that cannot be encoded as UTF-8 (a lone surrogate): no tokenizer, server or file
    could take it."""
    for column in columns:
        if column not in frame.columns:
            continue
        rows = frame[frame[column].map(lambda t: isinstance(t, str) and not encodable(t))]
        if len(rows):
            names = 'qid ' + rows['qid'].astype(str)
            if column != 'query' and 'docno' in rows.columns:
                names = names + ' docno ' + rows['docno'].astype(str)
            names = list(dict.fromkeys(names))
            more = f' ... ({len(names)} in all)' if len(names) > 10 else ''
            raise FrameError(f"{owner}: {column} cannot be encoded as UTF-8 (a lone surrogate such as '\\ud800') "
                             f"for {', '.join(names[:10])}{more}")


def _as_strings(owner: str, frame: pd.DataFrame, column: str, allow_missing: bool = False) -> pd.Series:
    values = frame[column]
    missing = values.isna()
    if missing.any() and not allow_missing:
        rows = list(frame.index[missing][:10])
        raise FrameError(f'{owner}: missing {column} in rows {rows}' + (' ...' if missing.sum() > 10 else ''))
    if pd.api.types.is_float_dtype(values) and (values.dropna() % 1 == 0).all():
        # 3.0 read from a file with gaps means the id 3, as the other frames spell it.
        return values.astype('Int64').astype(str).where(~missing, None)
    return values.astype(str).where(~missing, None)


def normalise_frame(owner: str, frame: pd.DataFrame, *, missing_docno_ok: bool = False,
                    one_query_per_qid: bool = True) -> pd.DataFrame:
    """The frame with ``qid`` and ``docno`` as strings and ``rank`` numeric, checked at the boundary.

    Raises :class:`FrameError` naming the rows or qids for a missing qid (or docno, unless
    ``missing_docno_ok``: the placeholder of a query with no document), a rank that is not a
    number, or one qid with two different queries.
    """
    out = frame
    if 'qid' in out.columns:
        out = out.assign(qid=_as_strings(owner, out, 'qid'))
    if 'docno' in out.columns:
        out = out.assign(docno=_as_strings(owner, out, 'docno', allow_missing=missing_docno_ok))
        if missing_docno_ok and 'qid' in out.columns:
            mixed = out.groupby('qid', sort=False)['docno'].agg(lambda d: d.isna().any() and d.notna().any())
            if mixed.any():
                raise FrameError(f'{owner}: rows without a docno next to documents for qid '
                                 f'{sorted(mixed.index[mixed])[:10]}; a row without a docno may only stand for a '
                                 'query that retrieved nothing')
    if 'rank' in out.columns and not pd.api.types.is_numeric_dtype(out['rank']):
        rank = pd.to_numeric(out['rank'], errors='coerce')
        bad = rank.isna() & out['rank'].notna()
        if bad.any():
            raise FrameError(f'{owner}: rank is not a number for qid {sorted(set(out.loc[bad, "qid"]))[:10]} '
                             f'(e.g. {out.loc[bad, "rank"].iloc[0]!r})')
        out = out.assign(rank=rank)
    if one_query_per_qid and {'qid', 'query'} <= set(out.columns):
        queries = out[['qid', 'query']].drop_duplicates()
        clash = queries['qid'][queries['qid'].duplicated()]
        if len(clash):
            raise FrameError(f'{owner}: one qid with different queries: qid {sorted(set(clash))[:10]}')
    return out
