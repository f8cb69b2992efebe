"""vLLM in this process: one GPU node, all prompts of a call scheduled together by vLLM."""
from typing import List, Optional, Sequence

from .._util import check_int
from ..errors import BackendError
from ..settings import Decoding
from ._base import Answer, DecodingBackendBase, cut_at_stop, sampling_fields, split_decoding


class VLLMBackend(DecodingBackendBase):
    """Generates with an in-process ``vllm.LLM``: every prompt of a call goes to one ``LLM.generate``,
    each with its own ``SamplingParams(seed=...)``, so sample ``j`` of a prompt is reproducible.

    Prefix caching is on by default: the prompts of a k-sweep share their instructions and first
    contexts. ``vllm`` is imported when the backend is built, never before.

    Each answer is an :class:`~pyterrier_utility.backends.Answer`: ``truncated`` when vLLM stopped it
    at ``max_tokens`` (``finish_reason`` 'length'), with vLLM's ``cumulative_logprob`` of its tokens
    (asked for with ``logprobs=0``: the sampled token's log-probability, of the raw logits in vLLM's
    default ``logprobs_mode``) as ``logprob`` and their number as ``tokens``.

    Args:
        model: a Hugging Face model id or local folder.
        decoding: the :class:`~pyterrier_utility.settings.Decoding`, every field honoured (default:
            the authors' 0.3, top-k 50, 300 new tokens, stop at "STOP"); single fields may be given
            as keywords (``temperature=0``). ``top_k`` 0 or ``None`` means all tokens.
        chat_template: wrap each prompt as a user turn of the model's chat template.
        tensor_parallel_size: GPUs the model is split over.
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes.
        max_input_length: the most prompt tokens (default: the model's context length).
        dtype, gpu_memory_utilization, and any other keyword: passed to ``vllm.LLM``.

    Example::

        backend = VLLMBackend('meta-llama/Meta-Llama-3-8B-Instruct', chat_template=True)
        reader = pyterrier_utility.Reader(backend, n_samples=5)
    """
    # tensor_parallel_size and prefix caching change scheduling, not the answers' distribution.
    ENGINE_FIELDS = ('chat_template', 'max_input_length', 'llm_kwargs')

    def __init__(self, model: str, *, decoding: Optional[Decoding] = None, chat_template: bool = False,
                 tensor_parallel_size: int = 1, enable_prefix_caching: bool = True,
                 max_input_length: Optional[int] = None, batch_size: int = 1024, verbose: bool = False, **llm_kwargs):
        owner = f'VLLMBackend({model!r})'
        decoding = split_decoding(owner, decoding, Decoding(), llm_kwargs)
        check_int(owner, 'tensor_parallel_size', tensor_parallel_size, 1)
        check_int(owner, 'batch_size', batch_size, 1)
        try:
            import vllm
        except ImportError as e:
            raise ImportError(f'{owner} needs vllm on a GPU machine: pip install vllm') from e
        self.llm = vllm.LLM(model=model, tensor_parallel_size=tensor_parallel_size,
                            enable_prefix_caching=enable_prefix_caching, **llm_kwargs)
        self._sampling_params = vllm.SamplingParams
        self.tokenizer = self.llm.get_tokenizer()
        config = getattr(getattr(self.llm, 'llm_engine', None), 'model_config', None)
        limit = max_input_length or getattr(config, 'max_model_len', None) or 4096
        super().__init__(model, max_input_length=limit, max_new_tokens=decoding.max_new_tokens, verbose=verbose)
        self._set_decoding(decoding)
        self.chat_template = chat_template
        self.batch_size = batch_size
        self.llm_kwargs = {k: v for k, v in llm_kwargs.items() if isinstance(v, (str, int, float, bool, type(None)))}

    def sampling_params(self, seed: int, max_new_tokens: int, stop: Sequence[str]):
        """The ``vllm.SamplingParams`` of one prompt and seed."""
        fields = dict(sampling_fields(self.decoding), n=1, max_tokens=max_new_tokens, seed=int(seed), logprobs=0)
        fields.setdefault('top_k', -1)  # None: all tokens
        if stop:
            fields['stop'] = list(stop)
        return self._sampling_params(**fields)

    def _format(self, prompt: str) -> str:
        if not self.chat_template:
            return prompt
        return self.tokenizer.apply_chat_template([{'role': 'user', 'content': prompt}],
                                                  add_generation_prompt=True, tokenize=False)

    def generate(self, inps: List[str], *, seeds: Optional[Sequence[int]] = None,
                 return_logprobs: bool = False, max_new_tokens: Optional[int] = None,
                 stop_sequences: Optional[List[str]] = None, num_responses: int = 1) -> List[Answer]:
        seeds, max_new_tokens, stop = self._call(inps, seeds, return_logprobs, num_responses, max_new_tokens,
                                                 stop_sequences)
        params = [self.sampling_params(s, max_new_tokens, stop) for s in seeds]
        outputs = self.llm.generate([self._format(p) for p in inps], params, use_tqdm=self.verbose)
        if len(outputs) != len(inps):
            raise BackendError(f'{self!r}: vLLM returned {len(outputs)} outputs for {len(inps)} prompts')
        return [_answer(o.outputs[0], stop) for o in outputs]

    def __repr__(self):
        return f'VLLMBackend({self.model_id!r}, temperature={self.decoding.temperature}, top_k={self.decoding.top_k})'


def _answer(output, stop: Sequence[str]) -> Answer:
    """A vLLM ``CompletionOutput`` as an :class:`Answer` (no log-probability where vLLM gives none)."""
    logprob = getattr(output, 'cumulative_logprob', None)
    tokens = getattr(output, 'token_ids', None)
    reason = getattr(output, 'finish_reason', None)
    return Answer(text=cut_at_stop(output.text, stop), truncated=None if reason is None else reason == 'length',
                  logprob=None if logprob is None else float(logprob),
                  tokens=None if logprob is None or tokens is None else len(tokens))
