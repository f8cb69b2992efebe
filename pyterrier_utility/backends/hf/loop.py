"""The decode loop: every row of a batch one token a step, from its own seed, until it ends (an end of
text, a stop sequence) or reaches ``max_new_tokens``; finished rows leave the batch when that pays."""
from typing import List, Optional, Sequence, Set, cast

import torch

from ...settings import Decoding
from .invariant import row_logsumexp
from .layers import float_rows
from .sampling import Penalty, SeededSampling

#: Finished rows leave a decode batch when (finished rows) x (steps left) exceeds this many times the
#: live rows: copying a live row's KV cache costs about as much as a few steps of a row's attention.
COMPACT_AFTER = 4


def decode(model, tokenizer, eos_token_ids: Set[int], decoding: Decoding, row_seeds: Sequence[int], state: tuple,
           max_new_tokens: int, stop_sequences: Optional[Sequence[str]]):
    """The tokens of each row decoded from ``state`` (the merged batch: KV cache, attention mask,
    token history, next positions and the first step's scores), whether each was cut at
    ``max_new_tokens``, and the sum and count of the log-softmax of the raw logits at each chosen
    token (end of text included), with each of them."""
    cache, mask, history, positions, scores = state
    d = decoding
    sampler = None if d.greedy else SeededSampling(row_seeds, d.temperature, d.top_k or 0, d.top_p, d.min_p)
    penalty = Penalty(cast(float, d.repetition_penalty), d.repeat_last_n) if d.penalised else None
    tokens: List[List[int]] = [[] for _ in row_seeds]
    cut = [False] * len(row_seeds)
    logprob, counted = [0.0] * len(row_seeds), [0] * len(row_seeds)
    each: List[List[float]] = [[] for _ in row_seeds]
    active = list(range(len(row_seeds)))  # the row of each position of the batch
    live = [True] * len(active)  # finished rows stay in the batch until dropping them pays
    buffer = None  # each step's float32 logits, written over (a new (rows, vocabulary) tensor a step otherwise)
    for step in range(max_new_tokens):
        # The model's own logits: their normaliser first; the penalty changes them in place and puts them back
        # once the token is drawn (temperature and top-k read them).
        raw, normaliser, restore = scores, row_logsumexp(scores), None
        if penalty is not None:
            scores, restore = penalty.in_place(history, scores)
        chosen = scores.argmax(-1).cpu() if sampler is None else sampler.next_tokens(scores, active)
        if restore is not None:
            restore()
        keep = []
        # log-softmax at the chosen tokens only: a whole (rows, vocabulary) one allocates.
        chosen_logprob = (raw.gather(1, chosen.to(raw.device)[:, None])[:, 0] - normaliser).tolist()
        for j, (row, token) in enumerate(zip(active, chosen.tolist())):
            if not live[j]:
                continue
            logprob[row] += chosen_logprob[j]
            counted[row] += 1
            each[row].append(chosen_logprob[j])
            if token in eos_token_ids:
                continue
            tokens[row].append(token)
            tail = tokenizer.decode(tokens[row][-64:]) if stop_sequences else ''
            if not any(s in tail for s in stop_sequences or ()):
                keep.append(j)
        if not keep or step == max_new_tokens - 1:
            for j in keep:
                cut[active[j]] = True
            break
        live = [False] * len(active)
        for j in keep:
            live[j] = True
        # Dropping finished rows copies the live rows' KV cache; keeping them costs their
        # attention at every step left: drop them when that would cost more.
        if (len(active) - len(keep)) * (max_new_tokens - 1 - step) > COMPACT_AFTER * len(keep):
            index = torch.tensor(keep, device=mask.device)
            cache.batch_select_indices(index)
            mask, history, positions = mask[index], history[index], positions[index]
            active, chosen, live = [active[j] for j in keep], chosen[keep], [True] * len(keep)
        chosen = chosen.to(mask.device)[:, None]
        history = torch.cat([history, chosen], dim=1)
        mask = torch.cat([mask, torch.ones_like(chosen)], dim=1)
        out = model(input_ids=chosen, attention_mask=mask, position_ids=positions[:, None],
                         past_key_values=cache, use_cache=True)
        positions = positions + 1
        if buffer is None and out.logits.device.type == 'cpu':
            buffer = torch.empty(len(active), out.logits.shape[-1], dtype=torch.float32)
        cache, scores = out.past_key_values, float_rows(out.logits, buffer)
        del out
    return tokens, cut, logprob, counted, each
