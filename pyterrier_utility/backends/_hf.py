"""A seeded, batched Hugging Face causal LM in this process.

Adds what the study needs to a plain ``generate``: per-prompt seeds (the same prompt and seed give
the same answer whatever else is in the batch), explicit sampling parameters, and left padding so
batched prompts generate correctly.
"""
import copy
import warnings
from typing import Dict, List, Optional, Sequence

import torch
from pyterrier_rag.backend import Backend, BackendOutput

from .._util import check_int, check_sampling
from ._base import DecodingSettings


class _SeededSampling:
    """Samples each row with its own ``torch.Generator`` and returns logits that force that token.

    Running ``generate`` greedily over these logits gives sampling whose randomness belongs to the
    row (its seed), not to the batch, so answers do not depend on which prompts share a batch.
    """

    def __init__(self, seeds: Sequence[int], temperature: float, top_k: int):
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
        self.temperature = temperature
        self.top_k = top_k

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        scores = scores.float() / self.temperature
        if self.top_k and self.top_k < scores.shape[-1]:
            kth = torch.topk(scores, self.top_k, dim=-1).values[:, -1:]
            scores = scores.masked_fill(scores < kth, float('-inf'))
        probs = torch.softmax(scores, dim=-1)
        forced = torch.full_like(scores, float('-inf'))
        for row, generator in enumerate(self.generators):
            token = torch.multinomial(probs[row], 1, generator=generator)
            forced[row, token] = 0.0
        return forced


class CausalLMBackend(DecodingSettings, Backend):
    """Generates answers with a Hugging Face causal LM: left-padded batches, per-prompt seeds.

    Args:
        model: a loaded ``AutoModelForCausalLM``.
        tokenizer: its tokenizer.
        model_id: a name for the model, part of every generation cache key.
        temperature: sampling temperature; ``0`` decodes greedily (seeds are then irrelevant).
            The defaults (0.3, top-k 50, 300 new tokens) are the paper's.
        top_k: sample among the ``top_k`` most likely tokens (``0``: all).
        max_new_tokens: the most tokens generated per answer.
        repetition_penalty: Hugging Face's repetition penalty (``1.0``: none).
        batch_size: prompts generated together.
        chat_template: wrap each prompt as a user turn of the tokenizer's chat template.
        max_input_length: the most prompt tokens (defaults to the model's context size).

    Example::

        backend = CausalLMBackend.from_pretrained('google/gemma-3-1b-it', chat_template=True)
        reader = pyterrier_utility.Reader(backend)
    """
    supports_seeds = True

    def __init__(self, model, tokenizer, *, model_id: str, temperature: float = 0.3, top_k: int = 50,
                 max_new_tokens: int = 300, repetition_penalty: float = 1.0, batch_size: int = 8,
                 chat_template: bool = False, max_input_length: Optional[int] = None,
                 verbose: bool = False):
        check_sampling(f'CausalLMBackend({model_id!r})', temperature=temperature, top_k=top_k,
                       max_new_tokens=max_new_tokens, repetition_penalty=repetition_penalty)
        check_int(f'CausalLMBackend({model_id!r})', 'batch_size', batch_size, 1)
        model_limit = getattr(model.config, 'max_position_embeddings', None) or 2048
        super().__init__(model_id, max_new_tokens=max_new_tokens, verbose=verbose,
                         max_input_length=max_input_length or model_limit)
        self.model = model.eval()
        # A copy: padding and truncation sides are set for this backend, not for the caller's tokenizer.
        self.tokenizer = copy.copy(tokenizer)
        self.tokenizer.padding_side = 'left'
        # A last resort after the Reader's even truncation of documents: the question is at the end.
        self.tokenizer.truncation_side = 'left'
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.temperature = float(temperature)
        self.top_k = int(top_k)
        self.repetition_penalty = float(repetition_penalty)
        self.batch_size = batch_size
        self.chat_template = chat_template
        self.generated_tokens = 0

    @classmethod
    def from_pretrained(cls, model_id: str, *, trust_remote_code: bool = False,
                        device: Optional[str] = None, **kwargs) -> 'CausalLMBackend':
        """Loads any Hugging Face causal LM by id or path (remote code only when opted in)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(model_id, trust_remote_code=trust_remote_code)
        model = AutoModelForCausalLM.from_pretrained(model_id, trust_remote_code=trust_remote_code)
        if device:
            model = model.to(device)
        return cls(model, tokenizer, model_id=model_id, **kwargs)

    @property
    def generation_key(self) -> Dict[str, object]:
        """Everything besides prompt and seed that determines an answer."""
        return {'backend': type(self).__name__, 'model': self.model_id,
                'temperature': self.temperature, 'top_k': self.top_k,
                'repetition_penalty': self.repetition_penalty, 'chat_template': self.chat_template,
                'max_input_length': self.max_input_length}

    def _format(self, prompt: str) -> str:
        if not self.chat_template:
            return prompt
        return self.tokenizer.apply_chat_template([{'role': 'user', 'content': prompt}],
                                                  add_generation_prompt=True, tokenize=False)

    @torch.no_grad()
    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1) -> List[BackendOutput]:
        seeds, _ = self._call(inps, seeds, return_logprobs, num_responses, stop_sequences)
        order = sorted(range(len(inps)), key=lambda i: len(inps[i]))
        texts = [None] * len(inps)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            answers = self._generate_batch([inps[i] for i in batch], [seeds[i] for i in batch],
                                           max_new_tokens or self.max_new_tokens, stop_sequences)
            for i, answer in zip(batch, answers):
                texts[i] = answer
        return [BackendOutput(text=t) for t in texts]

    def _generate_batch(self, prompts, seeds, max_new_tokens, stop_sequences):
        from transformers import LogitsProcessorList
        enc = self.tokenizer([self._format(p) for p in prompts], return_tensors='pt', padding=True,
                             truncation=True, max_length=self.max_input_length,
                             add_special_tokens=not self.chat_template)
        enc = {k: v.to(self.model.device) for k, v in enc.items()}
        kwargs = dict(max_new_tokens=max_new_tokens, do_sample=False, num_beams=1,
                      pad_token_id=self.tokenizer.pad_token_id,
                      repetition_penalty=self.repetition_penalty)
        if not self.deterministic:
            kwargs['logits_processor'] = LogitsProcessorList(
                [_SeededSampling(seeds, self.temperature, self.top_k)])
        if stop_sequences:
            kwargs.update(stop_strings=list(stop_sequences), tokenizer=self.tokenizer)
        with warnings.catch_warnings():
            warnings.filterwarnings('ignore', message='.*generation flags are not valid.*')
            out = self.model.generate(**enc, **kwargs)
        new_tokens = out[:, enc['input_ids'].shape[1]:]
        self.generated_tokens += int((new_tokens != self.tokenizer.pad_token_id).sum())
        texts = self.tokenizer.batch_decode(new_tokens, skip_special_tokens=True)
        return [cut_at_stop(t, stop_sequences) for t in texts]

    def __repr__(self):
        return f'CausalLMBackend({self.model_id!r}, temperature={self.temperature}, top_k={self.top_k})'


def cut_at_stop(text: str, stop_sequences: Optional[Sequence[str]]) -> str:
    """The text before the first stop sequence, stripped."""
    for stop in stop_sequences or ():
        text = text.split(stop, 1)[0]
    return text.strip()
