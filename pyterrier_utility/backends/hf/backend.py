"""A seeded Hugging Face causal LM in this process, prefilling each prompt once.

Adds what the study needs to a plain forward pass: per-prompt seeds (each answer sampled with its own
seed's generator), explicit sampling parameters, bfloat16 on CPUs with bf16 matrix instructions, one
prefill shared by all samples of a prompt, and the KV cache of prefixes reused across prompts.
"""
import copy
import ctypes
from typing import Dict, List, Optional, Sequence, Union

import torch
from pyterrier_rag.backend import BackendOutput

from ..._checks import check, check_int
from ..._messages import warn
from ...engines import HUGGINGFACE
from ...settings import Decoding
from .._base import Answer, DecodingBackendBase, cut_at_stop, split_decoding, work_batches
from . import exact_ops
from .dtype import EXACT, resolve_dtype, run_dtype
from .exact import ExactBatch, exact_model, supports_exact
from .invariant import batch_invariant, row_logsumexp, threads_text, tiled
from .kv import buffer_kind, buffered, shared
from .layers import float_rows
from .loop import decode
from .prefix import PrefixCache, line_chunks
from .sampling import SeededSampling


def _final(model, logits: torch.Tensor) -> torch.Tensor:
    """``logits`` as the model's forward returns them: capped where its config caps them (Gemma 2), by
    :func:`~.exact_ops.tanh`, the same bytes on every CPU."""
    cap = getattr(model.config.get_text_config(), 'final_logit_softcapping', None)
    return exact_ops.tanh(logits / cap) * cap if cap else logits


#: How an invariant backend batches: part of the generation cache key.
INVARIANT_BATCHING = ('batch-invariant (each row attends over its prompt\'s keys, held once, and its own; '
                      'products in whole row tiles)')
#: How an exact backend batches: part of the generation cache key.
EXACT_BATCHING = ('batch-invariant by construction (integer products; each row attends over its prompt\'s keys, '
                  'held once, and its own)')
#: How an invariant backend batches where no row tile holds on the CPU (see ``rows_alone``).
ROWS_ALONE_BATCHING = 'batch-invariant (each answer decoded alone)'


def _released() -> None:
    """Hands the memory a batch freed back to the system (glibc's ``malloc_trim``; elsewhere nothing):
    a batch's KV buffers and logits are freed in pieces that the allocator would otherwise keep, and
    the next batch's would be allocated beside them."""
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


@HUGGINGFACE.register
class CausalLMBackend(DecodingBackendBase):
    """Generates answers with a Hugging Face causal LM: one prefill per prompt, per-prompt seeds.

    Each distinct prompt is prefilled once, in chunks that end at line boundaries; its samples
    decode together from that prefill, each with its own seed. The KV cache after each chunk is
    kept (``prefix_cache_mb``, least recently used evicted), so prompts that start with the same
    lines (the instructions; the contexts of a smaller k) skip them. Chunks depend only on the
    prompt, so an answer is the same whether its prefix was cached or not.

    Consecutive prompts (in :meth:`prompt_order`) decode together, up to ``batch_size`` answers,
    their caches padded on the left. With ``invariant`` (the default on a CPU) every forward pass is
    batch-invariant (:mod:`~pyterrier_utility.backends.hf.invariant`): an answer, its token
    log-probabilities and ``truncated`` are a function of the model, dtype, decoding, prompt and seed
    alone, bit for bit, whatever its batch mates, the number of samples, the order of prompts, the
    batch size, the prefix cache or the number of threads (so a Ray replica answers as this process
    does), on one CPU kind and torch build. Without it, a batch's padding and row count change the
    rounding of its products, and with it, at times, a token and the rest of the answer. The
    invariance is built for CPUs: on a GPU, cuBLAS's products and attention reduce in orders that the
    row tiles do not fix (on an H100, a Gemma 3 model's answers still change with their batch mates),
    so a model on an accelerator decodes padded batches and says so in :attr:`reproducibility`; vLLM's
    batch-invariant mode (``VLLM_BATCH_INVARIANT=1``, :class:`~pyterrier_utility.backends.VLLMBackend`
    with ``reproducible=True``) is the engine for that.

    Args:
        model: a loaded ``AutoModelForCausalLM``; when it is not in ``dtype``, a converted copy is
            used (the caller's model is left as it is).
        tokenizer: its tokenizer (a fast one gives line chunks; a slow one prefills whole prompts).
        model_id: a name for the model, part of every generation cache key.
        decoding: the :class:`~pyterrier_utility.settings.Decoding` (default: the authors' 0.3,
            top-k 50, 300 new tokens, stop at "STOP"); single fields may be given as keywords
            (``temperature=0``). Every field is honoured; ``top_k`` 0 or ``None`` samples among
            all tokens; the repetition penalty is Hugging Face's (over ``repeat_last_n`` tokens, as
            llama.cpp's, when given); temperature, top-k, top-p and min-p apply in Hugging Face's
            order (see :class:`~pyterrier_utility.backends.hf.sampling.SeededSampling`).
        batch_size: the most answers decoded together (and asked for at a time by the reader and
            the generation cache); the samples of a prompt are never split.
        chat_template: wrap each prompt as a user turn of the tokenizer's chat template.
        max_input_length: the most prompt tokens (defaults to the model's context size).
        dtype: ``'auto'`` (bfloat16 on CPUs with bf16 matrix instructions, float32 on other CPUs, the
            model's own dtype on an accelerator), ``'exact'`` (an architecture :mod:`~.exact` computes on a
            CPU: the products in integers, the float parts in a fixed order, so the same answers and
            log-probabilities on every CPU), ``'float32'``, ``'bfloat16'``, ``'float16'`` or a
            ``torch.dtype``. Part of the generation cache key.
        prefix_cache_mb: memory for the KV caches of prefixes (``0``: no reuse); 256 MiB serve the study's
            k-sweeps whatever their number of queries (``benchmarks/bench_prefix_memory.py``).
        min_chunk_tokens: the fewest tokens of a prefill chunk (a chunk ends at the first line
            boundary after them). Part of the generation cache key.
        invariant: batch-invariant forward passes (see above); ``False`` decodes padded batches as
            they come, for comparison (other answers: part of the generation cache key). The default,
            ``None``, is ``True`` for a model on a CPU and ``False`` on an accelerator, where ``True``
            is refused.

    Example::

        backend = CausalLMBackend.from_pretrained('google/gemma-3-1b-it', chat_template=True)
        reader = pyterrier_utility.Reader(backend)
    """
    DECODING_FIELDS = HUGGINGFACE.honours
    ENGINE_FIELDS = ('chat_template', 'max_input_length', 'dtype_name', 'prefill_chunks', 'sampler', 'batching')
    #: Answers cut at ``max_new_tokens`` so far (each output's ``truncated`` says which).
    truncated = 0
    #: Each answer decoded as a batch of one row (where no row tile holds on the CPU; set when built).
    rows_alone = False
    #: The number of threads the invariance holds at (set when built); ``None``: any.
    tile_threads: Optional[int] = None
    #: The products in integers, the float parts in a fixed order (set when built).
    exact = False

    def __init__(self, model, tokenizer, *, model_id: str, decoding: Optional[Decoding] = None,
                 batch_size: int = 32, chat_template: bool = False, max_input_length: Optional[int] = None,
                 dtype: Union[str, torch.dtype] = 'auto', prefix_cache_mb: int = 256,
                 min_chunk_tokens: int = 32, invariant: Optional[bool] = None, verbose: bool = False,
                 **decoding_fields):
        name = f'CausalLMBackend({model_id!r})'
        decoding = split_decoding(name, decoding, HUGGINGFACE.decoding, decoding_fields)
        check(not decoding_fields, name, f'unknown arguments {sorted(decoding_fields)}')
        check_int(name, 'batch_size', batch_size, 1)
        check_int(name, 'prefix_cache_mb', prefix_cache_mb, 0)
        check_int(name, 'min_chunk_tokens', min_chunk_tokens, 1)
        if max_input_length is not None:
            check_int(name, 'max_input_length', max_input_length, 1)
        model_limit = getattr(model.config, 'max_position_embeddings', None) or 2048
        super().__init__(model_id, verbose=verbose,
                         max_input_length=max_input_length or model_limit)
        self._set_decoding(decoding)
        on_cpu = model.device.type == 'cpu'
        if invariant is None:
            invariant = on_cpu
        check(on_cpu or not invariant, name, f'invariant=True is for a model on a CPU, not on {model.device}: '
              "there the products' reductions change with the batch (vLLM's --reproducible is batch-invariant on GPUs)")
        self.exact = dtype == EXACT
        check(not self.exact or (on_cpu and supports_exact(model)), name,
              f"dtype='exact' is for a model on a CPU of an architecture it computes, not "
              f"{getattr(model.config, 'model_type', None)!r} on {model.device}")
        check(not self.exact or invariant, name, "dtype='exact' is batch-invariant by construction: invariant=False "
              'asks for padded batches, which another dtype computes')
        tiling = None
        self.dtype: Union[str, torch.dtype]
        if self.exact:
            self.dtype = EXACT
            self.model = exact_model(model.eval())
        else:
            self.dtype = resolve_dtype(dtype, model.device) or model.dtype
            if model.dtype != self.dtype:
                model = copy.deepcopy(model).to(self.dtype)
            self.model = tiled(model.eval(), weight_major=self.dtype == torch.bfloat16 and on_cpu)
            tiling = batch_invariant(self.model, batch_size) if invariant else None
        #: The rows every matrix product is padded to a multiple of (1: not batch-invariant); ``None`` where
        #: no tile holds on this CPU: then each answer is decoded alone (:attr:`rows_alone`).
        self.row_tile: Optional[int] = 1 if self.exact or not invariant else tiling.tile if tiling else None
        #: The number of threads the invariance holds at, where no tile holds across thread counts on this
        #: CPU (another process must run as many to answer alike); ``None``: any.
        self.tile_threads: Optional[int] = tiling.threads if tiling else None
        self.invariant = bool(invariant)
        #: Each answer decoded as a batch of one row: batch-invariant at this process's number of threads
        #: where no row tile makes the products so (some CPUs' float32 or bfloat16 kernels).
        self.rows_alone = self.invariant and self.row_tile is None
        if self.rows_alone:
            warn(f'{name}: no row tile makes the matrix products batch-invariant on this CPU in {self.dtype} '
                 f'(torch {torch.__version__}): each answer is decoded alone, which is slower; its values are the same '
                 f'whatever is generated beside it, at {threads_text(torch.get_num_threads())}')
        # A copy: the padding token is set for this backend, not for the caller's tokenizer.
        self.tokenizer = copy.copy(tokenizer)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        eos = model.generation_config.eos_token_id
        self.eos_token_ids = set([eos] if isinstance(eos, int) else eos or [self.tokenizer.eos_token_id])
        self.batch_size = batch_size
        self.chat_template = chat_template
        self.min_chunk_tokens = min_chunk_tokens
        self.prefixes = PrefixCache(prefix_cache_mb * 2**20)
        self.generated_tokens = 0
        self.prompt_tokens = 0
        self.prefilled_tokens = 0

    @classmethod
    def from_pretrained(cls, path: str, *, trust_remote_code: bool = False, device: Optional[str] = None,
                        dtype: Union[str, torch.dtype] = 'auto', **kwargs) -> 'CausalLMBackend':
        """Loads any Hugging Face causal LM by id or path (remote code only when opted in), in the
        dtype it will run in; ``model_id`` defaults to ``path``."""
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
        dtype = run_dtype(dtype, device)
        model = AutoModelForCausalLM.from_pretrained(path, trust_remote_code=trust_remote_code,
                                                     dtype=torch.float32 if dtype == EXACT else dtype)
        if device:
            model = model.to(device)  # type: ignore[arg-type]  # transformers types its wrapped `to` wrongly
        kwargs.setdefault('model_id', path)
        return cls(model, tokenizer, dtype=dtype if dtype == EXACT else model.dtype, **kwargs)

    for_reader = from_pretrained  # type: ignore[assignment]  # how the engine builds a huggingface:MODEL reader

    def thread_replica(self) -> 'CausalLMBackend':
        """A copy that another thread answers with beside this one: the model, tokenizer, decoding and
        prefix cache shared (a prefix's answers are the same from the cache or not), its own counts (see
        :class:`~pyterrier_utility.backends.ThreadBackend`)."""
        clone = copy.copy(self)
        clone.truncated = clone.generated_tokens = clone.prompt_tokens = clone.prefilled_tokens = 0
        return clone

    @property
    def dtype_name(self) -> str:
        if self.exact:
            return ('exact (int8 products: 8-bit weights, 14-bit activations, 16-bit keys and values; float functions '
                    'from expm1, log1p and rsqrt)')
        return str(self.dtype).replace('torch.', '')

    @property
    def prefill_chunks(self) -> str:
        """How prompts are cut for prefilling (answers may differ by rounding with other cuts)."""
        return f'lines, >= {self.min_chunk_tokens} tokens'

    @property
    def batching(self) -> str:
        """Whether a row's values depend on its batch mates (answers differ with the other way)."""
        if self.exact:
            return EXACT_BATCHING
        if self.rows_alone:
            return ROWS_ALONE_BATCHING
        if self.invariant and self.tile_threads:
            return f'{INVARIANT_BATCHING} at {threads_text(self.tile_threads)}'
        return INVARIANT_BATCHING if self.invariant else 'padded batches (rows depend on their batch mates)'

    @property
    def sampler(self) -> str:
        """How tokens are drawn from the scores (answers differ with another method)."""
        return 'greedy' if self.decoding.greedy else SeededSampling.METHOD

    @staticmethod
    def prompt_order(prompt: str) -> str:
        """The order prompts are best answered in: alphabetical, so that prompts sharing a prefix
        come one after the other while its KV cache is at hand."""
        return prompt

    def _format(self, prompt: str) -> str:
        if not self.chat_template:
            return prompt
        return self.tokenizer.apply_chat_template([{'role': 'user', 'content': prompt}],
                                                  add_generation_prompt=True, tokenize=False)

    @torch.no_grad()
    def _generate(self, inps: List[str], seeds: List[int], **options) -> List[BackendOutput]:
        max_new_tokens, stop = self.decoding.max_new_tokens, list(self.decoding.stop)
        greedy = self.decoding.greedy
        rows: Dict[str, List[int]] = {}
        for i, prompt in enumerate(inps):
            rows.setdefault(prompt, []).append(i)
        # Decoded together: consecutive prompts (in prompt order) up to batch_size answers.
        prompts = list(rows)
        groups = [[prompts[i] for i in group] for group in
                  work_batches(self, prompts, [1 if greedy else len(rows[p]) for p in prompts])]
        texts: Dict[int, Answer] = {}
        for group in groups:
            answers = self._answer([(p, [seeds[i] for i in rows[p]]) for p in group], max_new_tokens, stop)
            for prompt, per_seed in zip(group, answers):
                for i, answer in zip(rows[prompt], per_seed):
                    texts[i] = answer
            del answers
            _released()
        self.truncated += sum(bool(a.truncated) for a in texts.values())
        return [texts[i] for i in range(len(inps))]

    @torch.no_grad()
    def next_token_logprobs(self, prompt: str) -> torch.Tensor:
        """The log-probabilities (float32, one per vocabulary entry) of the token that would follow
        ``prompt``, formatted and cut as for generating: one prefill (its prefixes' KV caches reused and
        kept), nothing generated."""
        ids, ends = self._tokenize(prompt)
        _, logits = self._prefill(ids, ends)
        return logits[0] - row_logsumexp(logits)[0]

    #: Positions whose logits are computed at a time by :meth:`text_logprobs` (bounds its memory).
    LOGPROB_POSITIONS = 64

    @torch.no_grad()
    def text_logprobs(self, text: str) -> torch.Tensor:
        """The log-probability (float32) of each token of ``text`` after those before it, the tokenizer's
        special tokens first (as a prompt starts; cut at ``max_input_length`` tokens): one forward pass
        of the decoder, then the output layer over :attr:`LOGPROB_POSITIONS` positions at a time, each
        chosen token's logit less the log-sum-exp of its position (no log-softmax over the vocabulary
        is kept). Empty when fewer than two tokens."""
        ids = self.tokenizer(text).input_ids[:self.max_input_length]
        if len(ids) < 2:
            return torch.empty(0)
        tokens = torch.tensor([ids], device=self.model.device)
        hidden = self.model.get_decoder()(input_ids=tokens).last_hidden_state[0, :-1]
        head, nexts, parts = self.model.get_output_embeddings(), tokens[0, 1:], []
        for start in range(0, len(hidden), self.LOGPROB_POSITIONS):
            logits = _final(self.model, head(hidden[None, start:start + self.LOGPROB_POSITIONS])[0]).float()
            chosen = nexts[start:start + self.LOGPROB_POSITIONS, None]
            parts.append(logits.gather(1, chosen)[:, 0] - row_logsumexp(logits))
        return torch.cat(parts).cpu()

    def _tokenize(self, prompt: str):
        """The prompt's token ids (cut from the left to ``max_input_length``) and its chunk ends."""
        text = self._format(prompt)
        fast = getattr(self.tokenizer, 'is_fast', False)
        enc = self.tokenizer(text, add_special_tokens=not self.chat_template, return_offsets_mapping=fast)
        ids = torch.tensor(enc['input_ids'][-self.max_input_length:], dtype=torch.long)
        check(len(ids) > 0, repr(self), f'the prompt {prompt!r} has no tokens')
        if not fast:
            return ids, [len(ids)]
        return ids, line_chunks(text, enc['offset_mapping'][-self.max_input_length:], self.min_chunk_tokens)

    def _prefill(self, ids: torch.Tensor, ends: List[int]):
        """The KV cache of the whole prompt and the logits after its last token."""
        start, cache = self.prefixes.longest(ids, ends)
        self.prefilled_tokens += len(ids) - start
        device = self.model.device
        for end in ends:
            if end <= start:
                continue
            chunk = ids[None, start:end].to(device)
            if end < len(ids):
                # The decoder alone: a chunk before the last needs no logits.
                out = self.model.get_decoder()(input_ids=chunk, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
                self.prefixes.put(ids, end, cache)
            else:
                out = self.model(input_ids=chunk, past_key_values=cache, use_cache=True, logits_to_keep=1)
                cache = out.past_key_values
            start = end
        return cache, float_rows(out.logits)

    def _merge(self, prefills, room: int):
        if self.exact:
            return self._merge_exact(prefills, room)
        return self._merge_padded(prefills, room)

    def _merge_exact(self, prefills, room: int):
        """One decode batch of an exact model from the prefills of several prompts (:class:`~.exact.ExactBatch`),
        with the positions and repetition-penalty history of each row (its own prompt's, left-padded with its
        first token to the longest, as :meth:`_merge_padded`'s) and a mask the model does not read."""
        longest = max(len(ids) for ids, _, _, _ in prefills)
        model = self.model
        batch = ExactBatch([cache for _, cache, _, _ in prefills], [n for _, _, _, n in prefills], room,
                           model.kv, model.dim)
        history, positions = [], []
        for ids, _, _, n in prefills:
            history += [torch.cat([ids[:1].repeat(longest - len(ids)), ids])] * n
            positions += [len(ids)] * n
        scores = torch.cat([logits.repeat(n, 1) for _, _, logits, n in prefills])
        return (batch, torch.ones(len(positions), 1, dtype=torch.long), torch.stack(history),
                torch.tensor(positions), scores)

    def _merge_padded(self, prefills, room: int):
        """One batch from the prefills of several prompts, each decoded by its rows: batch-invariant, each
        prompt's cache held once for its rows (:func:`~.kv.shared`, where every layer allows); else caches
        repeated for their rows and padded on the left (into buffers with ``room`` tokens to decode into,
        where the layers allow); with the attention mask, positions and repetition-penalty history of the
        padded batch (a prompt alone gets no padding)."""
        longest = max(len(ids) for ids, _, _, _ in prefills)
        caches = [cache for _, cache, _, _ in prefills]
        counts = [n for _, _, _, n in prefills]
        merged = caches[0]
        layers = []
        for parts in zip(*(c.layers for c in caches)):
            layer = parts[0]
            held = shared(layer, [(p.keys, p.values) for p in parts], counts, room, longest) if self.invariant else None
            if held is not None:
                layer = held
            elif buffer_kind(layer) is not None:
                layer = buffered(layer, room, [(p.keys, p.values, n) for p, n in zip(parts, counts)])
            else:
                for name in ('keys', 'values'):
                    tensors = [getattr(part, name).repeat_interleave(n, dim=0) for part, n in zip(parts, counts)]
                    size = max(t.shape[-2] for t in tensors)
                    setattr(layer, name, torch.cat([torch.nn.functional.pad(t, (0, 0, size - t.shape[-2], 0))
                                                    for t in tensors]))
            if hasattr(layer, 'cumulative_length') and held is None:
                layer.cumulative_length = longest
            layers.append(layer)
        merged.layers = layers
        device = self.model.device
        mask, history, positions = [], [], []
        for ids, _, _, n in prefills:
            pad = longest - len(ids)
            mask += [torch.cat([torch.zeros(pad, dtype=torch.long), torch.ones(len(ids), dtype=torch.long)])] * n
            # Padded with the prompt's own first token, which the penalty already counts.
            history += [torch.cat([ids[:1].repeat(pad), ids])] * n
            positions += [len(ids)] * n
        scores = torch.cat([logits.repeat(n, 1) for _, _, logits, n in prefills])
        return (merged, torch.stack(mask).to(device), torch.stack(history).to(device),
                torch.tensor(positions, device=device), scores)

    def _answer(self, items: List[tuple], max_new_tokens: int,
                stop_sequences: Optional[Sequence[str]]) -> List[List[Answer]]:
        """The answers to ``(prompt, seeds)`` items, one per seed: each prompt prefilled once, all
        rows decoded together (finished rows leave the batch); an answer is ``truncated`` when its
        row was still going (no end of text, no stop sequence) after ``max_new_tokens``, and its
        ``logprob`` sums the log-softmax of the raw logits of each chosen token, end of text included
        (``token_logprobs``: each of them)."""
        if self.rows_alone and len(self._rows(items)) > 1:
            return self._answer_alone(items, max_new_tokens, stop_sequences)
        prefills, row_seeds = [], []
        for prompt, seeds in items:
            ids, ends = self._tokenize(prompt)
            self.prompt_tokens += len(ids) * len(seeds)
            cache, logits = self._prefill(ids, ends)
            n = 1 if self.decoding.greedy else len(seeds)
            prefills.append((ids, cache, logits, n))
            row_seeds += seeds[:n]
        state = self._merge(prefills, max_new_tokens)
        counts = [n for _, _, _, n in prefills]
        del prefills  # the prompts' own caches, copied into the batch's: freed before it decodes
        tokens, cut, logprob, counted, each = decode(self.model, self.tokenizer, self.eos_token_ids, self.decoding,
                                                     row_seeds, state, max_new_tokens, stop_sequences)
        self.generated_tokens += sum(map(len, tokens))
        texts = [Answer(text=cut_at_stop(self.tokenizer.decode(t, skip_special_tokens=True), stop_sequences),
                        truncated=c, logprob=lp, tokens=n, token_logprobs=tuple(e))
                 for t, c, lp, n, e in zip(tokens, cut, logprob, counted, each)]
        answers, row = [], 0
        for (_, seeds), n in zip(items, counts):
            answers.append(texts[row:row + n] * (len(seeds) if n == 1 else 1))
            row += n
        return answers

    def _rows(self, items: List[tuple]) -> List[tuple]:
        """The decode rows of ``(prompt, seeds)`` items: one per seed, or one per prompt when greedy."""
        return [(prompt, seeds if self.decoding.greedy else [seed]) for prompt, seeds in items
                for seed in (seeds[:1] if self.decoding.greedy else seeds)]

    def _answer_alone(self, items: List[tuple], max_new_tokens: int,
                      stop_sequences: Optional[Sequence[str]]) -> List[List[Answer]]:
        """:meth:`_answer` with each row decoded as a batch of its own (:attr:`rows_alone`)."""
        answers: Dict[str, List[Answer]] = {}
        for prompt, seeds in self._rows(items):
            answers.setdefault(prompt, []).extend(self._answer([(prompt, seeds)], max_new_tokens, stop_sequences)[0])
        return [answers[prompt] for prompt, _ in items]

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives (see the docs' edge cases)."""
        if self.exact:
            return ('exact: an answer and its log-probabilities depend on the prompt, seed, model and decoding alone, '
                    'bit for bit, whatever is generated beside it (batch mates, samples, order, batch size, prefix '
                    'cache, threads, process or Ray replica) and on every CPU (its vector width, matrix '
                    f'instructions and threads), with torch {torch.__version__}: the products are integers')
        if self.rows_alone:
            return ('batch-invariant, each answer decoded alone: an answer and its log-probabilities depend on the '
                    'prompt, seed, model, dtype and decoding alone, whatever is generated beside it, bit for bit on '
                    f'this CPU kind, torch {torch.__version__} and {threads_text(torch.get_num_threads())} '
                    '(no row tile holds here)')
        if self.invariant and self.tile_threads:
            return ('batch-invariant at this number of threads: an answer and its log-probabilities depend on the '
                    'prompt, seed, model, dtype and decoding alone, whatever is generated beside it (batch mates, '
                    'samples, order, batch size, prefix cache, process or Ray replica running as many threads), bit '
                    f'for bit on this CPU kind, torch {torch.__version__} and {threads_text(self.tile_threads)} '
                    f'(products in tiles of {self.row_tile} rows; no tile holds across thread counts here)')
        if self.invariant:
            return ('batch-invariant: an answer and its log-probabilities depend on the prompt, seed, model, dtype and '
                    'decoding alone, whatever is generated beside it (batch mates, samples, order, batch size, '
                    f'prefix cache, threads, process or Ray replica), bit for bit on this CPU kind and torch '
                    f'{torch.__version__} (products in tiles of {self.row_tile} rows)')
        return ('fresh generation reproducible when batched the same way: the same prompts and seeds in the same '
                "batches give the same answers on the same machine and torch build; other batch mates can change them")

    def __repr__(self):
        return (f'CausalLMBackend({self.model_id!r}, temperature={self.decoding.temperature}, '
                f'top_k={self.decoding.top_k})')
