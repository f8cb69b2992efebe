"""Each engine is described once (pyterrier_utility/engines.py), holding its backend class (which registers
itself with its description and reads what it honours there), and everything that needs an engine's facts
reads that description: adding an engine is its backend's module and its description, listed in
ENGINES_BY_NAME."""
import ast
import re
import sys
import textwrap
from pathlib import Path

import pytest

import pyterrier_utility as pu
from pyterrier_utility import _options, cli, engines
from pyterrier_utility.errors import SettingError
from pyterrier_utility.study import config as cfg
from pyterrier_utility.study.config_json import from_dict, to_dict
from pyterrier_utility.study.merge import resolve

#: A toy engine: its description and its backend class, which registers itself and reads what it honours.
TOY_ENGINE = textwrap.dedent('''
    from support.backends import CountingBackend

    from pyterrier_utility.engines import Engine
    from pyterrier_utility.settings import FIELDS

    TOY = Engine('toy', options=('concurrency',), reproducibility='always the same',
                 honours=frozenset(FIELDS) - {'top_p', 'repeat_last_n'},
                 own_way={'repeat_last_n': 'ignored by the toy'})


    @TOY.register
    class ToyBackend(CountingBackend):
        """A toy engine's backend: what the factory gave it is kept."""
        DECODING_FIELDS = TOY.honours
        DECODING_OWN_WAY = dict(TOY.own_way)

        def __init__(self, model, **options):
            super().__init__()
            self.model, self.options = model, options

        @classmethod
        def for_reader(cls, model, **options):
            return cls(model, **options)
''')


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy engine's module, imported, and its one line in ENGINES_BY_NAME."""
    (tmp_path / 'toy_engine.py').write_text(TOY_ENGINE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, 'toy_engine', raising=False)
    import toy_engine
    monkeypatch.setitem(engines.ENGINES_BY_NAME, 'toy', toy_engine.TOY)
    return toy_engine.TOY


def test_an_engine_added_by_its_module_and_its_description_is_built_checked_and_named_everywhere(toy):
    assert 'toy:MODEL' in engines.reader_names() and engines.engine_of('toy:tiny') is toy
    backend = pu.backends.get_backend('toy:tiny', temperature=0)
    assert type(backend) is toy.backend and backend.model == 'tiny' and backend.options == {'temperature': 0}
    assert toy.backend.DECODING_FIELDS == toy.honours  # the class reads its description
    # The study takes the options the description names, and refuses the others naming them.
    config = resolve(cfg.StudyConfig(), {'readers': ('toy:tiny',), 'concurrency': 3})
    assert config.backend_options('toy:tiny') == {'decoding': config.decoding, 'concurrency': 3}
    assert config.prompt_format == 'plain' and config.decoding.stop == ('STOP',)  # a named model's kind
    with pytest.raises(SettingError, match=r"the reader 'toy:tiny' cannot honour tensor_parallel_size"):
        cfg.StudyConfig(readers=('toy:tiny',), tensor_parallel_size=2)
    # A decoding field it does not honour is refused; one it applies its own way is said.
    with pytest.raises(SettingError, match=r"'toy:tiny'.*top_p"):
        cfg.StudyConfig(readers=('toy:tiny',), decoding=pu.Decoding(top_p=0.9))
    windowed = pu.Decoding(repetition_penalty=1.2, repeat_last_n=8)
    assert cfg.StudyConfig(readers=('toy:tiny',), decoding=windowed).decoding_notes() == {
        'toy:tiny': {'repeat_last_n': 'ignored by the toy'}}
    assert pu.Reader('toy:tiny').backend.model == 'tiny'
    # The command line's help says which readers take an option from the descriptions.
    assert _options.readers_taking('concurrency') == 'openai, llamacpp and toy readers'
    assert _options.readers_taking('tensor_parallel_size') == 'vllm readers'


def test_no_engine_is_named_by_a_string_outside_its_description():
    package = Path(pu.__file__).parent
    found = []
    for path in package.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            # ENGINES_BY_NAME['vllm'], or a 'module:attribute' string naming a backend.
            if (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                    and 'ENGINES_BY_NAME' in ast.unparse(node.value)):
                found.append(f'{path.name}: {ast.unparse(node)}')
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and node.value.startswith('pyterrier_utility.backends') and ':' in node.value):
                found.append(f'{path.name}: {node.value}')
    assert found == []
    import pyterrier_utility.backends  # noqa: F401  # every engine's module, registering its class
    for engine in engines.ENGINES_BY_NAME.values():
        assert isinstance(engine.backend, type) and engine.reproducibility


def test_the_help_of_the_engine_options_names_the_readers_their_descriptions_take():
    help_text = ' '.join(cli.parser().format_help().split() + cli.parser()._subparsers._group_actions[0]
                         .choices['study'].format_help().split())
    assert "'huggingface:MODEL', 'vllm:MODEL', 'openai:MODEL' or 'llamacpp:MODEL' (with --base-url)" in help_text
    for flag, option in (('--concurrency N', 'concurrency'), ('--chat-template', 'chat_template'),
                         ('--reproducible', 'reproducible')):
        assert f'{flag} {_options.readers_taking(option)}:' in help_text
    assert _options.readers_taking('reproducible') == 'openai, vllm and llamacpp readers'


def test_the_descriptions_are_what_the_backends_declare():
    from pyterrier_utility.backends import CausalLMBackend, LlamaCppServerBackend, OpenAICompatibleBackend, VLLMBackend
    from pyterrier_utility.backends._offline import OfflineModels
    for name, backend in (('huggingface', CausalLMBackend), ('openai', OpenAICompatibleBackend),
                          ('vllm', VLLMBackend), ('llamacpp', LlamaCppServerBackend)):
        engine = engines.ENGINES_BY_NAME[name]
        assert engine.backend is backend and engines.engine_of(f'{name}:m') is engine
        assert backend.DECODING_FIELDS == engine.honours and dict(backend.DECODING_OWN_WAY) == dict(engine.own_way)
        assert engine.server == (name in ('openai', 'llamacpp')) and engine.decoding == pu.Decoding()
    assert 'repeat_last_n' not in VLLMBackend.DECODING_FIELDS and 'repeat_last_n' in VLLMBackend.DECODING_OWN_WAY
    offline = engines.OFFLINE
    assert offline.backend is OfflineModels and sorted(OfflineModels.BUILDERS) == sorted(offline.readers)
    assert engines.engine_of('smollm2-135m') is offline and offline.offline and not engines.VLLM.offline
    assert (offline.prompt_format, cfg.StudyConfig().prompt_format) == ('example', 'example')
    assert cfg.StudyConfig().decoding == offline.decoding == engines.OFFLINE_DECODING
    assert engines.OFFLINE_DECODING.as_dict() == {
        'temperature': 0.3, 'top_k': 50, 'top_p': None, 'max_new_tokens': 96, 'repetition_penalty': 1.2,
        'repeat_last_n': 64, 'stop': ['STOP', '\n']}


def test_a_mistyped_reader_name_is_answered_with_the_nearest():
    with pytest.raises(SettingError, match=r"unknown reader 'smollm-135m' \(did you mean 'smollm2-135m'\?\)"):
        engines.engine_of('smollm-135m')
    with pytest.raises(SettingError, match=r"unknown reader 'vllm:'; choose from gemma3-270m, smollm2-135m, "):
        engines.engine_of('vllm:')


def test_an_option_set_is_refused_by_the_engines_not_taking_it_and_reproducible_by_none():
    options = engines.EngineOptions(concurrency=3, tensor_parallel_size=2, reproducible=True)
    assert options.refused_by(engines.engine_of('gemma3-270m')) == ('concurrency', 'tensor_parallel_size')
    assert options.refused_by(engines.engine_of('openai:m')) == ('tensor_parallel_size',)
    assert options.refused_by(engines.engine_of('vllm:m')) == ('concurrency',)
    assert engines.EngineOptions().refused_by(engines.engine_of('gemma3-270m')) == ()


def test_the_engine_options_are_one_value_of_the_config_given_and_read_one_by_one_as_before():
    from pyterrier_utility.engines import ENGINE_OPTION_NAMES, EngineOptions
    config = cfg.StudyConfig(readers=('openai:m',), concurrency=3, base_urls=['http://h:1/v1'])
    assert config.engine == EngineOptions(concurrency=3, base_urls=('http://h:1/v1',))
    assert (config.concurrency, config.base_urls, config.timeout) == (3, ('http://h:1/v1',), 600.0)
    assert config.replace(timeout=5).engine == config.engine.replace(timeout=5)
    assert config == cfg.StudyConfig(readers=('openai:m',), engine=config.engine)
    # settings.json holds them one by one, where the flat fields were; it reads back.
    written = to_dict(config)
    assert 'engine' not in written and [k for k in written if k in ENGINE_OPTION_NAMES] == list(ENGINE_OPTION_NAMES)
    keys = list(written)
    seed = keys.index('seed')
    assert keys[seed + 1:seed + 1 + len(ENGINE_OPTION_NAMES)] == list(ENGINE_OPTION_NAMES)
    assert written['base_urls'] == ['http://h:1/v1'] and from_dict(written) == config
    assert config.backend_options('openai:m') == {'decoding': config.decoding, 'base_urls': ['http://h:1/v1'],
                                                  'concurrency': 3, 'endpoint': 'completions', 'timeout': 600.0,
                                                  'max_retries': 5, 'retry_deadline': None, 'reproducible': False}
    with pytest.raises(SettingError, match='engine must be an EngineOptions, got 8'):
        cfg.StudyConfig(engine=8)
    with pytest.raises(SettingError, match='concurrency must be an integer >= 1, got 0'):
        cfg.StudyConfig(concurrency=0)
    with pytest.raises(AttributeError, match="no attribute 'concurency'"):
        config.concurency  # noqa: B018


def test_a_reader_keeps_its_own_decoding_where_none_is_given_for_every_reader():
    both = resolve(cfg.StudyConfig(), {'readers': ('gemma3-270m', 'smollm2-135m')})
    smollm2 = engines.OFFLINE.decoding_of('smollm2-135m')
    assert smollm2 == engines.OFFLINE_DECODING.replace(max_new_tokens=256)
    assert both.decoding_for('gemma3-270m') == both.decoding == engines.OFFLINE_DECODING
    assert both.decoding_for('smollm2-135m') == smollm2 == both.backend_options('smollm2-135m')['decoding']
    # Given on the command line, a field holds for every reader, even at the engine's own value.
    given = resolve(cfg.StudyConfig(), {'readers': ('gemma3-270m', 'smollm2-135m'), 'max_new_tokens': 96})
    assert given.decoding_given == ('max_new_tokens',) and given.decoding_for('smollm2-135m').max_new_tokens == 96
    other = resolve(cfg.StudyConfig(), {'readers': ('smollm2-135m',), 'temperature': 0.0})
    assert other.decoding_for('smollm2-135m') == smollm2.replace(temperature=0.0)
    # A decoding given whole in Python that changes the field holds too; settings.json keeps what was given.
    assert cfg.StudyConfig(readers=('smollm2-135m',), decoding=engines.OFFLINE_DECODING.replace(
        max_new_tokens=40)).decoding_for('smollm2-135m').max_new_tokens == 40
    assert from_dict(to_dict(given)) == given


@pytest.mark.parametrize('option, value, said', [
    ('concurrency', 0, 'concurrency must be an integer >= 1, got 0'),
    ('concurrency', True, 'concurrency must be an integer >= 1, got True'),
    ('tensor_parallel_size', 0, 'tensor_parallel_size must be an integer >= 1, got 0'),
    ('timeout', 0, 'timeout must be a number > 0, got 0'),
    ('max_retries', -1, 'max_retries must be an integer >= 0, got -1'),
    ('retry_deadline', 0.0, 'retry_deadline must be a number > 0, got 0.0'),
    ('endpoint', 'chats', "endpoint must be 'completions' or 'chat', got 'chats'"),
    ('base_urls', ('gpu1:8000',), "base_urls must be http(s) URLs, got ('gpu1:8000',)"),
])
def test_the_engine_options_check_themselves_with_the_rule_a_backend_given_them_applies(option, value, said):
    from pyterrier_utility.engines import EngineOptions
    with pytest.raises(SettingError, match=re.escape(f'EngineOptions: {said}')):
        EngineOptions(**{option: value})
    with pytest.raises(SettingError, match=re.escape(f'EngineOptions: {said}')):
        cfg.StudyConfig(**{option: value})
    if option not in ('tensor_parallel_size', 'base_urls'):  # a vLLM option; the backend's URLs are a list
        from pyterrier_utility.backends import OpenAICompatibleBackend
        with pytest.raises(SettingError, match=re.escape(f"OpenAICompatibleBackend('m'): {said}")):
            OpenAICompatibleBackend('m', **{option: value})
    if option == 'tensor_parallel_size':  # refused before vllm is imported
        from pyterrier_utility.backends import VLLMBackend
        with pytest.raises(SettingError, match=re.escape(f"VLLMBackend('m'): {said}")):
            VLLMBackend('m', **{option: value})
