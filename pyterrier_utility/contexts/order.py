"""Which of each query's ranked documents the reader sees, and in which order: the "-r" systems of the
study, lost in the middle, any permutation, and windows of deeper ranks."""
import itertools
from typing import Dict, List, Sequence

import numpy as np
import pandas as pd
import pyterrier as pt

from .._checks import check, check_int, check_k
from .._frames import validate_columns
from ..settings import is_int


class Ordering(pt.Transformer):
    """Rearranges each query's ranking: :meth:`positions` says which ranks the reader sees, in order.

    ``rank`` is renumbered from 0 in the new order, rows come out in that order, and ``score``
    becomes ``m - rank`` (``m`` documents kept for the query), so measures that rank by score, such
    as nDCG@k in ``pt.Experiment``, evaluate the ranking the reader sees. The input is ordered by
    ``rank``, or by ``score`` when it has no ``rank``. Subclasses define :meth:`positions`.

    Example::

        class BestLast(Ordering):
            def positions(self, n):
                return list(range(1, n)) + [0]
    """

    def __init__(self):
        super().__init__()

    def positions(self, n: int) -> Sequence[int]:
        """The 0-based ranks of a query's ``n`` documents in the order the reader sees them; ranks
        left out are dropped."""
        raise NotImplementedError

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        validate_columns(self, inp, ['qid', 'docno', 'rank' if 'rank' in inp.columns else 'score'])
        if inp.empty:
            return inp
        frame = inp if 'rank' in inp.columns else pt.model.add_ranks(inp.copy())
        frame = frame.sort_values(['qid', 'rank'], kind='stable')
        place = frame.groupby('qid', sort=False).cumcount().to_numpy()
        size = frame.groupby('qid', sort=False)['qid'].transform('size').to_numpy()
        # new_rank[n][i]: where a query of n documents puts its rank i (-1: dropped).
        new_rank, kept = {}, {}
        for n in np.unique(size):
            order = [int(p) for p in self.positions(int(n))]
            new_rank[n] = np.full(n, -1)
            new_rank[n][order] = np.arange(len(order))
            kept[n] = len(order)
        rank = np.array([new_rank[n][i] for n, i in zip(size, place)], dtype=np.int64)
        count = np.array([kept[n] for n in size], dtype=float)
        frame = frame.assign(score=count - rank, rank=rank)[rank >= 0]
        return frame.sort_values(['qid', 'rank'], kind='stable').reset_index(drop=True)


class ReverseOrder(Ordering):
    """Reverses each query's ranking: the top-ranked document becomes the last context.

    ``(bm25 % k) >> ReverseOrder()`` is BM25-r. Ranks and scores follow the new order (see :class:`Ordering`).

    Example::

        bm25_r = dataset.bm25() % 5 >> ReverseOrder() >> reader
    """

    def positions(self, n: int) -> Sequence[int]:
        return range(n - 1, -1, -1)

    def __repr__(self):
        return 'ReverseOrder()'


class LostInTheMiddle(Ordering):
    """The best documents at both ends of the context, the worst in the middle.

    Of ``n`` documents ranked 1..n, the reader sees the odd ranks from the front and the even ranks
    from the back: 1, 3, 5, ..., then ..., 4, 2. Five documents: 1 3 5 4 2; four: 1 3 4 2. The best
    document always comes first. LangChain's ``LongContextReorder``, which cites Liu et al. ("Lost in
    the Middle", TACL 2024; the paper itself defines no reordering), gives the same order for odd
    ``n`` and its mirror image for even ``n`` (2 4 3 1: the best document last).

    With ``reverse=True`` the worst documents are at both ends and the best in the middle (five: 5 3 1
    2 4), which is ``ReverseOrder() >> LostInTheMiddle()``: the placement Liu et al. find hardest
    for a reader. Ranks and scores follow the new order (see :class:`Ordering`).

    With ``authors=True``, the orientation the authors of the paper ran (``simple_shuffling`` in
    their ``tools/permutation_generator.py``, github.com/DanielTian97/rag-utility): it starts from
    the document that ends up in the middle and alternates after and before it, so for odd ``n`` it
    is the mirror image of the above (five: 2 4 5 3 1, the best document last; reversed, 4 2 1 3 5)
    and for even ``n`` the same (four: 1 3 4 2).

    Args:
        reverse: put the best documents in the middle instead.
        authors: the authors' orientation (mirrored for odd ``n``).

    Example::

        bm25_lim = dataset.bm25() % 5 >> LostInTheMiddle() >> reader
        bm25_their_lim = dataset.bm25() % 5 >> LostInTheMiddle(authors=True) >> reader
    """

    def __init__(self, reverse: bool = False, authors: bool = False):
        super().__init__()
        self.reverse = bool(reverse)
        self.authors = bool(authors)

    def positions(self, n: int) -> Sequence[int]:
        order = list(range(0, n, 2)) + list(range(1, n, 2))[::-1]
        if self.authors and n % 2:
            order = order[::-1]
        return [n - 1 - p for p in order] if self.reverse else order

    def __repr__(self):
        return f'LostInTheMiddle(reverse={self.reverse}' + (', authors=True)' if self.authors else ')')


class Permutation(Ordering):
    """An explicit order of the top ranks: ``order[i]`` is the rank (from 1) the reader sees at
    position i + 1.

    ``Permutation([2, 1, 3])`` swaps the first two documents. A query with fewer documents than the
    permutation keeps the ranks it has in the permutation's order; ranks below ``len(order)`` follow
    in their own order. Ranks and scores follow the new order (see :class:`Ordering`).

    Args:
        order: a permutation of 1..len(order).

    Example::

        bm25_213 = dataset.bm25() % 3 >> Permutation([2, 1, 3]) >> reader
    """

    def __init__(self, order: Sequence[int]):
        super().__init__()
        self.order = tuple(int(r) for r in order)
        check(len(self.order) > 0 and sorted(self.order) == list(range(1, len(self.order) + 1)), 'Permutation',
              f'order must be a permutation of 1..{len(self.order)}, got {list(order)}')

    def positions(self, n: int) -> Sequence[int]:
        return [r - 1 for r in self.order if r <= n] + list(range(len(self.order), n))

    def __repr__(self):
        return f'Permutation({list(self.order)})'


def permutations(k: int) -> Dict[str, Permutation]:
    """Every order of k contexts as a family of systems, named by the ranks in the order the reader
    sees them (``'132'``: ranks 1, 3, 2), the identity first; k! systems, so k is at most 9.

    Example::

        systems = {f'BM25-{name}': dataset.bm25() % 3 >> p for name, p in permutations(3).items()}
    """
    check_k('permutations', k)
    check(k <= 9, 'permutations', f'names are the ranks as digits, so k is at most 9 (and k! systems), got {k}')
    return {''.join(map(str, p)): Permutation(p) for p in itertools.permutations(range(1, k + 1))}


class Window(Ordering):
    """Ranks [start, start + k) of each query's ranking (from 1), in their order: the contexts a
    reader sees from deeper in the ranking.

    ``Window(1, k)`` is the top k; ``Window(6, 5)`` is ranks 6 to 10, which the retriever must
    return (``dataset.bm25() % 10 >> Window(6, 5)``). A query with fewer documents keeps what it has
    in the window, possibly none. Ranks are renumbered from 0 and scores follow (see :class:`Ordering`),
    so nDCG@k evaluates the window as the ranking the reader sees.

    Args:
        start: the first rank of the window, from 1.
        k: the window's size.

    Example::

        deeper = dataset.bm25() % 10 >> Window(6, 5) >> reader
    """

    def __init__(self, start: int, k: int):
        super().__init__()
        self.start = check_int('Window', 'start', start, 1)
        self.k = check_k('Window', k)

    def positions(self, n: int) -> Sequence[int]:
        return range(self.start - 1, min(self.start - 1 + self.k, n))

    def __repr__(self):
        return f'Window(start={self.start}, k={self.k})'


def window_starts(n: int, k: int, step: int = 1) -> List[int]:
    """The start ranks (from 1) of the windows of ``k`` documents, one every ``step`` ranks from the
    top, that fit in a ranking of ``n`` (none when ``n < k``): the grid the authors' ``compose_context``
    (``tools/prompt_tools.py``) samples windows from.

    Example::

        window_starts(20, 5, 5)   # [1, 6, 11, 16]
    """
    return list(range(1, n - k + 2, step))


class GridWindow(Ordering):
    """The ``index``-th window of ``k`` documents on the grid of :func:`window_starts`: from the top
    (1: the top k, 2: ranks 1 + step .. k + step, ...) or, for a negative ``index``, from the tail
    (-1: the last window that fits on the grid, -2: the one before), in rank order.

    The authors sample contexts this way (``compose_context(..., step, tops, tails)`` in their
    ``tools/prompt_tools.py``: the first ``tops`` and the last ``tails`` windows of the grid, over the
    whole retrieved list), so the tail windows depend on how deep each query's ranking goes. A query
    whose grid has no such window gets no documents (where ``Window`` keeps a window's part that
    fits). One difference: asked for more tail windows than the grid has, their code's slice wraps
    round and returns fewer; here each index past the grid is simply empty. Ranks and scores follow
    the new order (see :class:`Ordering`).

    Args:
        index: which window: 1, 2, ... from the top; -1, -2, ... from the tail.
        k: the window's size.
        step: ranks between the starts of consecutive windows.

    Example::

        last = dataset.bm25() % 100 >> GridWindow(-1, 5, step=5) >> reader   # ranks 96 to 100
    """

    def __init__(self, index: int, k: int, step: int = 1):
        super().__init__()
        check(is_int(index) and index != 0, 'GridWindow', f'index must be a non-zero integer, got {index!r}')
        self.index = int(index)
        self.k = check_k('GridWindow', k)
        self.step = check_int('GridWindow', 'step', step, 1)

    def positions(self, n: int) -> Sequence[int]:
        starts = window_starts(n, self.k, self.step)
        if self.index > len(starts) or -self.index > len(starts):
            return []
        start = starts[self.index - 1 if self.index > 0 else self.index]
        return range(start - 1, start - 1 + self.k)

    def __repr__(self):
        return f'GridWindow(index={self.index}, k={self.k}, step={self.step})'
