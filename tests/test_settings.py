"""Settings as values: Decoding, LabelSet and Placement validated once, cache keys derived from them,
one code path for P and U, the study config, and a package without import cycles."""
import ast
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyterrier_rag.backend import BackendOutput
from support.backends import CountingBackend

import pyterrier_utility as pu
from pyterrier_utility import Decoding, GenerationCache, LabelSet
from pyterrier_utility.errors import SettingError
from pyterrier_utility.settings import ONE_LINE_STOP, Placement
from pyterrier_utility.study import config as cfg
from pyterrier_utility.study.config_json import from_dict, to_dict
from pyterrier_utility.study.merge import resolve
from pyterrier_utility.study.presets import PRESETS

PACKAGE = Path(pu.__file__).parent


class DecodingCountingBackend(pu.backends._base.DecodingBackendBase, CountingBackend):
    """The counting backend holding a Decoding, as the backends of this package do: its answers
    depend on max_new_tokens and stop, so a cache that mixed them up would show it."""
    DECODING_FIELDS = frozenset({'temperature', 'max_new_tokens', 'stop', 'top_k'})

    def __init__(self, **decoding):
        CountingBackend.__init__(self)
        self._set_decoding(Decoding(**decoding))

    def _generate(self, inps, seeds, **options):
        self.calls.extend(inps)
        decoding = self.decoding
        return [BackendOutput(text=f'{p[:8]} seed {s} max {decoding.max_new_tokens} stop {list(decoding.stop)}')
                for p, s in zip(inps, seeds)]


def test_decoding_is_validated_once_and_names_the_setting():
    for bad, name in ((dict(temperature=-1), 'temperature'), (dict(top_k=-2), 'top_k'), (dict(top_p=0), 'top_p'),
                      (dict(min_p=1.5), 'min_p'), (dict(min_p=-0.1), 'min_p'), (dict(min_p=float('nan')), 'min_p'),
                      (dict(max_new_tokens=0), 'max_new_tokens'), (dict(repetition_penalty=0), 'repetition_penalty'),
                      (dict(repeat_last_n=0), 'repeat_last_n'), (dict(repeat_last_n=6.5), 'repeat_last_n'),
                      (dict(repeat_last_n=True), 'repeat_last_n'), (dict(stop=['STOP', '']), 'stop')):
        with pytest.raises(SettingError, match=name):
            Decoding(**bad)
    assert Decoding(min_p=0, repeat_last_n=64).min_p == 0.0 and Decoding(min_p=1).min_p == 1.0
    assert Decoding(stop='STOP').stop == ('STOP',)  # one string is one stop sequence
    with pytest.raises(SettingError, match='no setting'):
        Decoding().replace(beam_width=4)
    # A backend without min-p or a penalty window refuses them by name, when it is built.
    with pytest.raises(SettingError, match=r"cannot honour min_p=0.05; it honours"):
        DecodingCountingBackend(min_p=0.05)
    with pytest.raises(SettingError, match=r"cannot honour repetition_penalty=1.1, repeat_last_n=64"):
        DecodingCountingBackend(repetition_penalty=1.1, repeat_last_n=64)
    # A window without a penalty, or a penalty of 1, changes nothing: nothing to refuse.
    assert DecodingCountingBackend(repeat_last_n=64).decoding_notes == {}
    assert DecodingCountingBackend(repetition_penalty=1.0, repeat_last_n=64).decoding_notes == {}


def test_a_placement_is_validated_once_and_is_on_this_machine_unless_it_names_a_cluster():
    assert (Placement().ray, Placement().replicas, Placement().replica_gpus) == (None, None, 0)
    assert Placement(replicas=2).replicas == 2
    for bad, message in ((dict(ray='auto', replicas=0), 'replicas must be an integer >= 1, got 0'),
                         (dict(ray='auto', replicas=1.5), 'replicas must be an integer >= 1, got 1.5'),
                         (dict(replicas=True), 'replicas must be an integer >= 1, got True'),
                         (dict(ray='auto', replica_gpus=-1), 'replica_gpus must be a number >= 0, got -1'),
                         (dict(replica_gpus=1), 'replica_gpus are those of a Ray cluster: give ray too')):
        with pytest.raises(SettingError, match=f'^Placement: {re.escape(message)}$'):
            Placement(**bad)


def test_settings_added_to_decoding_leave_the_keys_of_answers_cached_before_them(tmp_path):
    """Unset, min_p and repeat_last_n are absent from the key: an answer cached before they existed,
    under the key of the six settings there were, is found; set, they make keys of their own."""
    from pyterrier_utility._files import stable_hash
    before = {'backend': 'DecodingCountingBackend', 'model': 'counting',
              'decoding': {'temperature': 0.3, 'top_k': 50, 'top_p': None, 'max_new_tokens': 32,
                           'repetition_penalty': None, 'stop': ['STOP']}}
    old_key = stable_hash(stable_hash(json.dumps(before, sort_keys=True)), 'q', 0)
    cache = GenerationCache(DecodingCountingBackend(max_new_tokens=32), tmp_path / 'a.sqlite')
    assert cache.key('q', 0, None, None) == old_key
    assert Decoding().as_dict() == {'temperature': 0.3, 'top_k': 50, 'top_p': None, 'max_new_tokens': 300,
                                    'repetition_penalty': None, 'stop': ['STOP']}
    keys = {old_key}
    for changes in (dict(min_p=0.05), dict(repeat_last_n=64), dict(min_p=0.05, repeat_last_n=64)):
        decoding = Decoding(max_new_tokens=32, **changes)
        assert decoding.as_dict() == dict(before['decoding'], **changes)
        definition = dict(before, decoding=decoding.as_dict())
        keys.add(stable_hash(stable_hash(json.dumps(definition, sort_keys=True)), 'q', 0))
        assert Decoding(**decoding.as_dict()) == decoding  # settings.json reads back
    assert len(keys) == 4


@pytest.mark.parametrize('spelling, expected', [
    (2, 'label>=2'), ('2', 'label>=2'), ('label>=2', 'label>=2'), ({2, 3}, 'label in {2,3}'),
    ('2,3', 'label in {2,3}'), ('label in {2,3}', 'label in {2,3}'), ([3], 'label in {3}'), ('3,', None)])
def test_labels_have_one_form_from_every_spelling(spelling, expected):
    if expected is None:
        with pytest.raises(SettingError, match='labels must be'):
            LabelSet.parse(spelling)
        return
    labels = LabelSet.parse(spelling)
    assert str(labels) == expected and LabelSet.parse(str(labels)) == labels


def test_a_labelset_gives_relevant_documents_answerable_topics_and_what_it_leaves_out():
    qrels = pd.DataFrame({'qid': ['1', '1', '2', '3'], 'docno': ['a', 'b', 'c', 'd'], 'label': [4, 2, 3, 0]})
    topics = pd.DataFrame({'qid': ['1', '2', '3'], 'query': ['x', 'y', 'z']})
    dl = LabelSet.parse('2,3')
    assert dl.relevant_docnos(qrels) == {'1': ['b'], '2': ['c']}
    assert list(dl.answerable(topics, qrels)['qid']) == ['1', '2']
    assert dl.excluded([0, 1, 2, 3, 4]) == [4]
    assert LabelSet.parse(2).excluded([0, 1, 2, 3, 4]) == []


def test_the_cache_key_holds_every_decoding_setting(tmp_path):
    path = tmp_path / 'answers.sqlite'
    backend = DecodingCountingBackend(max_new_tokens=32, stop=['STOP'])
    first = GenerationCache(backend, path).generate(['q'], seeds=[0])[0].text
    assert first == 'q seed 0 max 32 stop [\'STOP\']'
    # The same backend built with other settings: every answer generated afresh ...
    for changes in (dict(max_new_tokens=300), dict(stop=['STOP', '\nQuestion:']), dict(temperature=0.5)):
        other = DecodingCountingBackend(**dict(dict(max_new_tokens=32, stop=['STOP']), **changes))
        cache = GenerationCache(other, path)
        assert cache.generate(['q'], seeds=[0])[0].text != first or changes == dict(temperature=0.5)
        assert other.calls == ['q']
    # ... and the first answers remain, and the file says which settings it holds.
    again = DecodingCountingBackend(max_new_tokens=32, stop=['STOP'])
    assert GenerationCache(again, path).generate(['q'], seeds=[0])[0].text == first and again.calls == []
    held = GenerationCache(again, path).settings()
    assert sorted(d['decoding']['max_new_tokens'] for d in held) == [32, 32, 32, 300]
    # The backend's decoding is what counts: a call giving another length is refused, by the cache and the
    # backend alike, and the decoding's own is taken.
    backend = DecodingCountingBackend(max_new_tokens=300, stop=['STOP'])
    for answering in (GenerationCache(backend, path), backend):
        with pytest.raises(SettingError, match=r"max_new_tokens=300\), not by settings given with a call "
                                               r"\(max_new_tokens=32\): answer with backend.with_settings"):
            answering.generate(['q'], seeds=[0], max_new_tokens=32)
    assert backend.calls == [] and backend.generate(['q'], seeds=[0], max_new_tokens=300, stop_sequences=['STOP'])
    assert GenerationCache(backend.with_settings(max_new_tokens=32), path).generate(['q'], seeds=[0])[0].text == first



def test_the_reader_applies_its_length_and_stops_to_the_decoding_once_and_the_keys_stay(tmp_path):
    """The reader owns the call-time settings: its backend (behind the cache) holds them in its decoding,
    and neither the cache nor the backend is given them with a call; the key is the one of the backend
    built with them, so answers cached that way are found."""
    path = tmp_path / 'answers.sqlite'
    earlier = GenerationCache(DecodingCountingBackend(max_new_tokens=7, stop=['STOP', '\nQ']), path)
    asked = earlier.generate(['Question: q'], seeds=[0])[0]
    assert asked.text == "Question seed 0 max 7 stop ['STOP', '\\nQ']" and earlier.generated == 1
    backend = DecodingCountingBackend(max_new_tokens=32, stop=['STOP'])
    cache = GenerationCache(backend, path)
    reader = pu.Reader(cache, max_new_tokens=7, stop=['STOP', '\nQ'], verbose=False)
    assert reader.cache.backend.decoding == backend.decoding.replace(max_new_tokens=7, stop=('STOP', '\nQ'))
    assert reader.backend is backend and backend.decoding.max_new_tokens == 32  # the given one unchanged
    assert reader.answer(['Question: q'])[0][0].text == asked.text and backend.calls == []  # found: same key
    assert reader.answer(['Question: r'])[0][0].text == "Question seed 0 max 7 stop ['STOP', '\\nQ']"
    assert backend.calls == ['Question: r']
    assert cache.generated == reader.cache.generated == 1  # the reader's cache is the one given, over a copy
    # The reader checks its length as a Decoding does, when it is made.
    with pytest.raises(SettingError, match='Decoding: max_new_tokens must be an integer >= 1, got 0'):
        pu.Reader(backend, max_new_tokens=0)


class RequestRecording(pu.backends.OpenAICompatibleBackend):
    """The OpenAI-compatible backend with no server behind it: it records each request's body and answers
    with the body's length, and counts its copies (``with_settings``)."""
    copies = 0

    def _request(self, body, stop, cancel):
        self.requests_sent.append(body)
        return pu.backends.Answer(text=f"{body['prompt']} max {body['max_tokens']}")

    def with_settings(self, **changes):
        type(self).copies += 1
        return super().with_settings(**changes)


def recording(decoding, fields=()):
    """A recording backend honouring its engine's fields and ``fields``, with no copy counted yet."""
    backend = type('Recording', (RequestRecording,), {
        'DECODING_FIELDS': RequestRecording.DECODING_FIELDS | set(fields)})('m', decoding=decoding)
    backend.requests_sent, type(backend).copies = [], 0
    return backend


def test_a_field_added_to_decoding_reaches_the_request_and_the_cache_key(tmp_path):
    """Adding a setting is one edit to Decoding (here, a subclass adding it): the reader, the cache key and
    the engine's request carry it without a change elsewhere."""
    import dataclasses
    from typing import Optional
    Wider = dataclasses.make_dataclass('Decoding', [('presence_penalty', Optional[float], None)], bases=(Decoding,),
                                       frozen=True)
    backend = recording(Wider(presence_penalty=0.5), fields=['presence_penalty'])
    reader = pu.Reader(GenerationCache(backend, tmp_path / 'answers.sqlite'), max_new_tokens=7, verbose=False)
    assert [a[0].text for a in reader.answer(['Question: q'])] == ['Question: q max 7']
    [body] = backend.requests_sent
    assert body['presence_penalty'] == 0.5 and body['max_tokens'] == 7
    [held] = reader.cache.settings()
    assert held['decoding']['presence_penalty'] == 0.5 and held['decoding']['max_new_tokens'] == 7
    other = GenerationCache(backend.with_settings(presence_penalty=0.25, max_new_tokens=7))
    assert other.key('Question: q', 0) != reader.cache.key('Question: q', 0)
    # A backend that does not honour the new setting refuses it when built, by name.
    with pytest.raises(SettingError, match='cannot honour presence_penalty=0.5'):
        recording(Wider(presence_penalty=0.5))


def test_the_decoding_is_applied_once_and_no_backend_reenters_its_generate(tmp_path):
    """The reader makes one copy of the backend with its length and stops; the cache keys that copy's
    decoding and the engine applies it, no layer making another; and every backend's ``generate`` is
    the base class's, which hands the engine prompts and seeds."""
    backend = recording(Decoding(max_new_tokens=32, stop=['STOP']))
    reader = pu.Reader(GenerationCache(backend), n_samples=2, max_new_tokens=7, stop=['STOP', '\n'], verbose=False)
    assert RequestRecording.copies == 0 and type(backend).copies == 1
    reader.answer(['Question: a', 'Question: b', 'Question: c'])
    assert type(backend).copies == 1 and len(backend.requests_sent) == 6
    assert {(b['max_tokens'], tuple(b['stop'])) for b in backend.requests_sent} == {(7, ('STOP', '\n'))}
    base = pu.backends._base.DecodingBackendBase
    engines = [pu.backends.CausalLMBackend, pu.backends.VLLMBackend, pu.backends.OpenAICompatibleBackend,
               pu.backends.LlamaCppServerBackend, pu.backends.ProcessBackend, pu.backends.ThreadBackend,
               pu.backends.RayBackend]
    assert [cls.__name__ for cls in engines if not issubclass(cls, base) or cls.generate is not base.generate] == []


@pytest.mark.slow
def test_a_second_study_into_the_same_folder_with_other_decoding_generates_afresh(tmp_path, monkeypatch, capsys):
    from pyterrier_utility import cli
    backends = []

    def build(spec, decoding, **kw):
        backends.append(DecodingCountingBackend(max_new_tokens=decoding.max_new_tokens, stop=decoding.stop))
        return backends[-1]
    monkeypatch.setattr(pu.backends, 'get_backend', build)
    argv = ['study', '--queries', '2', '-k', '1', '--systems', 'Rel', '--samples', '1', '--out', str(tmp_path)]
    for extra in ([], ['--max-new-tokens', '300'], ['--stop', 'STOP', '\nQ']):
        assert cli.main(argv + extra) == 0
        assert len(backends[-1].calls) == 4  # 2 queries x (0-shot + Rel at k=1)
        settings = json.loads((tmp_path / 'settings.json').read_text())
        assert settings['decoding']['max_new_tokens'] == (300 if '300' in extra else
                                                          pu.study.StudyConfig().decoding.max_new_tokens)
        answers = pd.read_csv(tmp_path / 'answers.csv')
        assert answers['qanswer'].str.contains(f"max {settings['decoding']['max_new_tokens']} ").all()
    assert cli.main(argv) == 0 and backends[-1].calls == []  # the first settings again: all cached


def test_run_study_and_the_pipeline_give_identical_p_and_u(cranfield, minilm):
    """One code path: the study's P_k, P_0, U per query equal those of system % k >> reader >> evaluator."""
    qrels = cranfield.get_qrels()
    topics = pu.datasets.answerable_topics(cranfield.get_topics(), qrels, 2).head(3)
    rel = pu.OracleSampler(qrels, cranfield.texts, labels=2)
    reader = pu.Reader(CountingBackend(), n_samples=2)
    results = pu.study.run_study(topics, qrels, {'Rel': rel}, reader, cranfield.texts, ks=[2],
                                      label_sets=[3], bertscore=minilm, verbose=False)
    scorer = pu.FBertScorer(qrels, cranfield.texts, labels=3, model_type=minilm)
    piped = (rel % 2 >> reader >> pu.UtilityEvaluator(reader, scorer))(topics).drop_duplicates('qid')
    study = results.per_query.set_index('qid')
    for column in ('quality', 'quality_0shot', 'utility'):
        np.testing.assert_array_equal(study.loc[piped['qid'], column].values, piped[column].values)
    # The recorded contexts are the documents the pipeline gave the reader, in order.
    given = (rel % 2)(topics)
    shown = results.contexts
    assert list(zip(shown['qid'], shown['docno'])) == list(zip(given['qid'], given['docno']))
    assert results.prompt(reader, 'Rel', 2, topics['qid'][0]) == reader.prompter.prompts(given)[topics['qid'][0]]


def test_preset_and_command_line_resolve_to_one_config():
    paper = PRESETS['paper']
    assert paper.bm25 == 'terrier' and paper.decoding == pu.settings.AUTHORS_DECODING
    offline = resolve(paper, {'readers': ('gemma3-270m',), 'max_new_tokens': 32})
    assert offline.decoding == pu.settings.AUTHORS_DECODING.replace(max_new_tokens=32, repetition_penalty=1.2,
                                                                    stop=ONE_LINE_STOP)
    named = resolve(cfg.StudyConfig(), {'readers': ('openai:m',)})
    assert named.decoding.stop == ('STOP',) and named.decoding.repetition_penalty is None
    assert from_dict(json.loads(json.dumps(to_dict(paper)))) == paper
    # vLLM has no penalty window: accepted, and said how it applies the penalty instead.
    windowed = Decoding(repetition_penalty=1.1, repeat_last_n=64, min_p=0.05, top_p=0.9)
    assert cfg.StudyConfig(decoding=windowed).decoding_notes() == {}
    notes = cfg.StudyConfig(readers=('vllm:m', 'huggingface:m'), decoding=windowed).decoding_notes()
    assert list(notes) == ['vllm:m'] and 'counts every prompt and output token' in notes['vllm:m']['repeat_last_n']
    with pytest.raises(SettingError, match='correction must be one of'):
        cfg.StudyConfig(correction='nonsense')


def _imports(path: Path):
    """The package modules ``path`` imports, at module level or in functions."""
    module = '.'.join(path.relative_to(PACKAGE.parent).with_suffix('').parts)
    package = module if path.name == '__init__.py' else module.rsplit('.', 1)[0]
    if path.name == '__init__.py':
        module = module.rsplit('.', 0)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package.split('.')[:len(package.split('.')) - (node.level - 1)] if node.level else []
            target = '.'.join(base + ([node.module] if node.module else [])) if node.level else node.module
            if not target or not target.startswith('pyterrier_utility'):
                continue
            for alias in node.names:
                sub = f'{target}.{alias.name}'
                found.add(sub if (PACKAGE.parent / sub.replace('.', '/')).with_suffix('.py').exists()
                          or (PACKAGE.parent / sub.replace('.', '/')).is_dir() else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith('pyterrier_utility')}
    return module, found


def test_no_import_cycle_among_the_package_modules():
    graph = dict(_imports(p) for p in PACKAGE.rglob('*.py'))
    # A package's own __init__ gathers its modules: an import of the package from one of them is
    # an import of the module it names, so only edges between modules count.
    def node(name):
        return name if name in graph else name + '.__init__' if name + '.__init__' in graph else name
    edges = {m: {node(t) for t in ts if node(t) in graph and not node(t).endswith('__init__')}
             for m, ts in graph.items() if not m.endswith('__init__')}
    state, cycle = {}, []

    def visit(m, path):
        state[m] = 'open'
        for t in sorted(edges.get(m, ())):
            if state.get(t) == 'open':
                cycle.append(path + [t])
            elif t not in state:
                visit(t, path + [t])
        state[m] = 'done'
    for m in sorted(edges):
        if m not in state:
            visit(m, [m])
    assert cycle == []


def test_readers_of_both_kinds_need_their_shared_decoding_given():
    with pytest.raises(SettingError, match='give --repetition-penalty, --stop and --prompt-format'):
        resolve(cfg.StudyConfig(), {'readers': ('gemma3-270m', 'openai:m')})
    with pytest.raises(SettingError, match='give --repetition-penalty, --stop and --prompt-format'):
        resolve(cfg.StudyConfig(), {'readers': ('gemma3-270m', 'openai:m'), 'repetition_penalty': 1.1,
                                        'stop': ('STOP',)})
    both = resolve(cfg.StudyConfig(), {'readers': ('gemma3-270m', 'openai:m'), 'repetition_penalty': 1.1,
                                           'stop': ('STOP',), 'prompt_format': 'plain'})
    assert both.decoding.repetition_penalty == 1.1 and both.readers == ('gemma3-270m', 'openai:m')
    assert both.prompt_format == 'plain'


def test_each_kind_of_reader_gets_its_prompt_format_unless_given():
    assert cfg.StudyConfig().prompt_format == 'example'
    named = resolve(cfg.StudyConfig(), {'readers': ('openai:m',)})
    assert named.prompt_format == 'plain' and named.decoding.repeat_last_n is None
    assert resolve(cfg.StudyConfig(), {'readers': ('openai:m',), 'prompt_format': 'authors'}).prompt_format == \
        'authors'
    offline = resolve(PRESETS['paper'], {'readers': ('gemma3-270m',)})
    assert offline.prompt_format == 'example' and offline.decoding.repeat_last_n == 64
    # The same kind of reader as the base keeps the base's format (the paper's, the authors').
    assert resolve(PRESETS['paper'], {'readers': ('vllm:m',)}).prompt_format == 'authors'


def test_the_paper_preset_fixes_what_the_paper_and_its_authors_ran(tmp_path, monkeypatch, capsys):
    from pyterrier_utility import cli
    paper = to_dict(PRESETS['paper'])
    assert paper['datasets'] == ['irds:msmarco-passage/trec-dl-2019/judged', 'irds:msmarco-passage/trec-dl-2020/judged',
                                 'irds:msmarco-passage/dev/small']
    # dev_small's binary labels: studied under {1} without the oracles, as the paper does.
    dev, note = PRESETS['paper'].for_collection('irds:msmarco-passage/dev/small', [1])
    assert [str(x) for x in dev.label_sets] == ['label in {1}'] and dev.systems == ('BM25', 'Neural')
    assert note.startswith('irds:msmarco-passage/dev/small is judged in two grades (labels [1])')
    assert PRESETS['paper'].for_collection('dl', [0, 1, 2, 3]) == (PRESETS['paper'], None)
    assert (paper['bm25'], paper['prompt_format'], paper['oracle'], paper['neural']) == \
        ('terrier', 'authors', 'authors', 'monot5')
    assert paper['label_sets'] == ['label in {2,3}', 'label in {3}'] and paper['ks'] == [2, 5, 10, 15]
    # Figures 3 and 5 over "a wider range" of k, every k from 1 to 15; Table 1's four among them.
    assert paper['figure_ks'] == list(range(1, 16)) and PRESETS['paper'].all_ks == tuple(range(1, 16))
    # What llama-cpp-python 0.2.75 (their rag-utility.yml) applied: their code's settings, its defaults
    # for the rest (create_completion's top_p, min_p, repeat_penalty; Llama's last_n_tokens_size).
    assert paper['decoding'] == {'temperature': 0.3, 'top_k': 50, 'top_p': 0.95, 'min_p': 0.05,
                                 'max_new_tokens': 300, 'repetition_penalty': 1.1, 'repeat_last_n': 64,
                                 'stop': ['STOP']}

    def no_model(*a, **kw):
        raise AssertionError('a reader was loaded before the settings were checked')
    monkeypatch.setattr(pu.backends, 'get_backend', no_model)
    # DL's label sets on Cranfield leave out its top label (4, "complete answer"), which Rel draws from.
    with pytest.raises(SystemExit):
        cli.main(['study', '--preset', 'paper', '--dataset', 'cranfield', '--bm25', 'pisa', '--out', str(tmp_path)])
    assert 'label set label in {2,3} leaves out label [4] of cranfield' in capsys.readouterr().err


def test_reproducible_reaches_the_engines_that_need_asking_and_each_states_what_it_promises(monkeypatch):
    from pyterrier_utility.study.record import engine_record
    config = cfg.StudyConfig(readers=('openai:m', 'gemma3-270m'), reproducible=True)
    assert config.backend_options('openai:m')['reproducible'] is True
    assert 'reproducible' not in config.backend_options('gemma3-270m')  # reproducible without being asked
    assert from_dict(json.loads(json.dumps(to_dict(config)))).reproducible is True
    served = pu.backends.OpenAICompatibleBackend('m', reproducible=True)
    assert engine_record(served) == {'reproducibility': served.reproducibility}
    offline = pu.backends.CausalLMBackend.__new__(pu.backends.CausalLMBackend)
    offline.invariant, offline.row_tile = True, 4
    assert engine_record(offline)['reproducibility'].startswith('batch-invariant: an answer and its log-probabilities')
    assert engine_record(object())['reproducibility'].startswith('not stated by the backend')


def test_the_command_line_sets_and_unsets_min_p_and_the_penalty_window():
    from pyterrier_utility import cli

    def config(*argv):
        return cli.config_of(cli.parser().parse_args(['study', *argv]), cfg.StudyConfig())
    given = config('--min-p', '0.1', '--repetition-penalty', '1.1', '--repeat-last-n', '32', '--top-p', '0.9')
    assert (given.decoding.min_p, given.decoding.repeat_last_n, given.decoding.top_p) == (0.1, 32, 0.9)
    unset = cli.config_of(cli.parser().parse_args(['study', '--min-p', 'none', '--repeat-last-n', 'none',
                                                   '--top-p', 'none']), given)
    assert (unset.decoding.min_p, unset.decoding.repeat_last_n, unset.decoding.top_p) == (None, None, None)
    for bad in (['--min-p', '1.5'], ['--repeat-last-n', '0']):
        with pytest.raises(SystemExit):
            config(*bad)


def test_the_paper_presets_settings_print_every_decoding_value_with_its_source(tmp_path, capsys):
    from pyterrier_utility.study import record as recorded
    paper = PRESETS['paper']
    readers = {'vllm:m': pu.Reader(GenerationCache(DecodingCountingBackend()))}
    record = recorded.print_settings('study', paper, readers, tmp_path)
    err = capsys.readouterr().err
    for line in ("temperature=0.3: authors' code", "top_k=50: authors' code (tools/llama_tools.py: top_k=50)",
                 'top_p=0.95: llama-cpp-python 0.2.75 default', 'min_p=0.05: llama-cpp-python 0.2.75 default',
                 "max_new_tokens=300: authors' code (tools/llama_tools.py: max_tokens=300)",
                 'repetition_penalty=1.1: llama-cpp-python 0.2.75 default (their rag-utility.yml pins it): '
                 'create_completion(repeat_penalty=1.1)',
                 'repeat_last_n=64: llama-cpp-python 0.2.75 default (their rag-utility.yml pins it): '
                 'Llama(last_n_tokens_size=64)', "stop=('STOP',): authors' code"):
        assert line in err
    # The preset's reader is vLLM, whose penalty has no window: said with the settings.
    assert "vllm:meta-llama/Meta-Llama-3-8B-Instruct: repeat_last_n=64 not applied: vLLM's repetition penalty " \
           'counts every prompt and output token' in err
    assert set(record['decoding_sources']) == set(pu.settings.FIELDS) and record['decoding_notes']
    given = resolve(paper, {'readers': ('huggingface:m',), 'temperature': 0.7})
    assert recorded.decoding_sources(given)['temperature'] == 'this run (the preset has 0.3)'
    assert given.decoding_notes() == {} and recorded.decoding_sources(cfg.StudyConfig()) == {}
