"""A judge's grade read from its reply independently of :func:`pyterrier_utility.scoring.judge.parse_grade`."""
import re

import numpy as np


def independent_grade(reply: str) -> float:
    """The grade a reply gives, read here: one [[N]] after the prompt's [[, or N alone, N of 1..10."""
    marked = re.findall(r'\[\[ *(\d+) *\]\]', '[[' + reply)
    number = marked[0] if len(marked) == 1 else reply.strip() if not marked and reply.strip().isdigit() else None
    return float(number) if number is not None and 1 <= int(number) <= 10 else np.nan
