"""Drawing a token per row from that row's own seed (a Gumbel-max race over the top-k candidates),
top-p and min-p, and the repetition penalty."""
from typing import Optional, Sequence

import torch

from .exact_ops import exp, log
from .invariant import row_logsumexp


def _signed(value: int) -> int:
    return value - 2**64 if value >= 2**63 else value


_GOLDEN, _MIX1, _MIX2 = (_signed(c) for c in (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB))


def _shr(x: torch.Tensor, bits: int) -> torch.Tensor:
    """A logical right shift of int64 values (torch's ``>>`` keeps the sign)."""
    return (x >> bits) & ((1 << (64 - bits)) - 1)


def uniforms(seeds: torch.Tensor, step: int, tokens: torch.Tensor) -> torch.Tensor:
    """A uniform number in (0, 1) for each (seed, step, token): SplitMix64 of the three, so the
    number a token gets is its own, whatever other tokens or rows are drawn with it."""
    x = seeds[:, None] * _MIX1 + torch.tensor(step, dtype=torch.long) * _MIX2 + tokens * _GOLDEN
    for shift, mul in ((30, _MIX1), (27, _MIX2)):
        x = (x ^ _shr(x, shift)) * mul
    x = x ^ _shr(x, 31)
    return (_shr(x, 11).double() + 0.5) / 2.0**53


#: Tokens past the k-th that top-k sampling looks at for ties with it, before counting the whole row.
TIE_MARGIN = 64


class SeededSampling:
    """Samples each row from its own seed, so that the randomness of an answer belongs to its seed,
    not to the rows it is generated with.

    A token is drawn by the Gumbel-max race: the candidate with the highest score / temperature
    plus Gumbel noise, that noise a function of (seed, step, token id) (:func:`uniforms`). This is
    an exact draw from the softmax over the candidates; with top-k, the candidates are the tokens
    whose score reaches the k-th highest (ties included, as Hugging Face's top-k warper keeps them).
    As each token's noise is its own, a rounding change between batches or dtypes changes a draw
    only where it changes the winner of the race, and only 50 candidates get noise, not 262k tokens.

    Top-p and min-p then narrow the candidates as Hugging Face's ``TopPLogitsWarper`` and
    ``MinPLogitsWarper`` do after its temperature and top-k warpers: on the probabilities at the
    temperature, so temperature, top-k, top-p, min-p in that order (llama.cpp filters top-k, top-p
    and min-p at temperature 1 and divides by the temperature last).
    """
    #: How tokens are drawn: part of the generation cache key, since another way of drawing
    #: gives other answers for the same seeds.
    METHOD = ('Gumbel-max over the top-k candidates (ties kept), noise SplitMix64(seed, step, token), its logarithms '
              'from frexp and log1p')

    def __init__(self, seeds: Sequence[int], temperature: float, top_k: int, top_p: Optional[float] = None,
                 min_p: Optional[float] = None):
        self.seeds = torch.tensor([int(s) for s in seeds], dtype=torch.long)
        self.temperature = temperature
        self.top_k = top_k
        self.top_p = top_p
        self.min_p = min_p
        self.step = 0

    def candidates(self, scores: torch.Tensor):
        """``(values, tokens)``: each row's candidate scores divided by the temperature (``-inf``
        where a row has fewer candidates than the widest row, or where top-p or min-p drop one) and
        their token ids."""
        values, tokens = self._top_k(scores.float())
        values = values / self.temperature
        top_p = self.top_p if self.top_p is not None and self.top_p < 1 else None
        if top_p is None and not self.min_p:
            return values, tokens
        # Row by row over the row's own candidates (a prefix of its columns): a softmax's sum over the
        # batch's width (set by its widest row) would round a row's probabilities by its batch mates.
        rows = []
        for row in values:
            own = row[row > float('-inf')][None]
            if top_p is not None:
                own = _top_p(own, top_p)
            if self.min_p:
                own = _min_p(own, self.min_p)
            rows.append(torch.cat([own[0], row[own.shape[1]:]]))
        return torch.stack(rows), tokens

    def _top_k(self, scores: torch.Tensor):
        """Each row's top-k scores (``-inf`` past a row's own candidates) and their token ids."""
        if not self.top_k or self.top_k >= scores.shape[-1]:
            tokens = torch.arange(scores.shape[-1], device=scores.device).expand_as(scores)
            return scores, tokens
        # The k highest and a margin, to see the ties at the k-th score (bfloat16 logits tie often):
        # all of them are candidates. Only when the margin is all ties is the whole row counted.
        wide = min(self.top_k + TIE_MARGIN, scores.shape[-1])
        values, tokens = torch.topk(scores, wide, dim=-1)
        kth = values[:, self.top_k - 1:self.top_k]
        if wide < scores.shape[-1] and bool((values[:, -1:] >= kth).any()):
            widest = int((scores >= kth).sum(-1).max())
            values, tokens = torch.topk(scores, widest, dim=-1)
        return values.masked_fill(values < kth, float('-inf')), tokens

    def next_tokens(self, scores: torch.Tensor, rows: Optional[Sequence[int]] = None) -> torch.Tensor:
        """One token per row of ``scores`` at the next step; ``rows`` says whose seed each row
        uses (default: all, in order)."""
        seeds = self.seeds if rows is None else self.seeds[list(rows)]
        values, tokens = self.candidates(scores)
        values, tokens = values.cpu().double(), tokens.cpu()
        gumbel = -log(-log(uniforms(seeds, self.step, tokens)))
        self.step += 1
        return tokens.gather(1, (values + gumbel).argmax(-1, keepdim=True))[:, 0]


def _softmax(values: torch.Tensor) -> torch.Tensor:
    """The softmax of each row, its sum in an order that does not depend on threads (a whole
    vocabulary's row is otherwise summed on several), its exponentials in float64 by the same code on every
    CPU (:func:`~.exact_ops.exp`)."""
    return exp((values - row_logsumexp(values)[:, None]).double()).to(values.dtype)


def _top_p(values: torch.Tensor, top_p: float) -> torch.Tensor:
    """``values`` with ``-inf`` for the tokens outside each row's nucleus: counting up from the least
    likely, those whose cumulative probability is at most ``1 - top_p`` (the most likely always stays)."""
    ascending, order = torch.sort(values, dim=-1)
    outside = _softmax(ascending).cumsum(-1) <= 1 - top_p
    outside[:, -1] = False
    return values.masked_fill(outside.scatter(1, order, outside), float('-inf'))


def _min_p(values: torch.Tensor, min_p: float) -> torch.Tensor:
    """``values`` with ``-inf`` for the tokens less likely than ``min_p`` times each row's most likely."""
    probs = _softmax(values)
    return values.masked_fill(probs < min_p * probs.amax(-1, keepdim=True), float('-inf'))


class Penalty:
    """Hugging Face's repetition penalty (``RepetitionPenaltyLogitsProcessor``), the same values:
    a token in a row's history has its score divided by the penalty when positive, multiplied when
    negative. Hugging Face pads every row of the scores by one column first (for ids past the
    vocabulary), an unaligned copy of the whole (rows, vocabulary) tensor; here the scores are
    scattered into once (the saving is measured in the docs' Performance page); only a history
    with ids past the vocabulary goes to Hugging Face's processor.

    With ``last_n``, only a row's last ``last_n`` tokens of prompt and answer count, as llama.cpp's
    ``penalty_last_n`` (llama-cpp-python 0.2.75 passes the last ``last_n_tokens_size`` = 64 of the
    tokens evaluated so far). A left-padded row's padding repeats its first prompt token, which its
    window holds whenever it reaches the padding, so the window counts the same tokens padded or not."""

    def __init__(self, penalty: float, last_n: Optional[int] = None):
        from transformers import RepetitionPenaltyLogitsProcessor
        self.penalty = penalty
        self.last_n = last_n
        self.hf = RepetitionPenaltyLogitsProcessor(penalty)

    def in_place(self, history: torch.Tensor, scores: torch.Tensor):
        """``scores`` penalised, in place where it can (the same values as calling the penalty), and a
        function putting back the scores it changed, exactly: ``(penalised, restore)``. A history with ids
        past the vocabulary gives Hugging Face's copy, and ``scores`` are left as they were."""
        if self.last_n is not None:
            history = history[:, -self.last_n:]
        if int(history.max()) >= scores.shape[-1]:
            return self.hf(history, scores), lambda: None
        score = scores.gather(1, history)
        scores.scatter_(1, history, torch.where(score < 0, score * self.penalty, score / self.penalty))
        return scores, lambda: scores.scatter_(1, history, score)

    def __call__(self, history: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.last_n is not None:
            history = history[:, -self.last_n:]
        if int(history.max()) >= scores.shape[-1]:
            return self.hf(history, scores)
        score = scores.gather(1, history)
        score = torch.where(score < 0, score * self.penalty, score / self.penalty)
        return scores.scatter(1, history, score)
