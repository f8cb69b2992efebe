import os
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
import torch
from pyterrier_rag.backend import Backend, BackendOutput
from support.backends import CountingBackend

from pyterrier_utility import GenerationCache
from pyterrier_utility.backends import Answer
from pyterrier_utility.errors import BackendError, CacheError


def test_each_prompt_and_seed_generated_once(counting_backend):
    cache = GenerationCache(counting_backend)
    out = cache.generate(['a', 'b', 'a', 'a'], seeds=[0, 0, 0, 1])
    assert [o.text for o in out][0] == [o.text for o in out][2]
    assert counting_backend.calls == ['a', 'a', 'b']  # the seeds of a prompt are asked together
    cache.generate(['b', 'a'], seeds=[0, 1])
    assert cache.generated == 3


def test_persistent_cache_survives_reopen_and_holds_plain_text(counting_backend, tmp_path):
    path = tmp_path / 'g.sqlite'
    first = [o.text for o in GenerationCache(counting_backend, path).generate(['x', 'y'], seeds=[1, 2])]
    again = GenerationCache(counting_backend, path)
    second = [o.text for o in again.generate(['x', 'y'], seeds=[1, 2])]
    assert first == second and again.generated == 0 and len(again) == 2
    rows = sqlite3.connect(path).execute('SELECT answer FROM answers').fetchall()
    assert sorted(r[0] for r in rows) == sorted(first)


def test_what_the_backend_says_of_an_answer_survives_a_reopen(tmp_path):
    from support.backends import CountingBackend
    path = tmp_path / 'g.sqlite'
    first = GenerationCache(CountingBackend(logprobs=True), path).generate(['x', 'Context 1: y'], seeds=[1, 2])
    assert first == [Answer(text='no context (seed 1, 0 contexts)', truncated=True, logprob=-1.5, tokens=6),
                     Answer(text='y (seed 2, 1 contexts)', truncated=False, logprob=-3.75, tokens=5)]
    again = GenerationCache(CountingBackend(), path)
    assert again.generate(['x', 'Context 1: y'], seeds=[1, 2]) == first and again.generated == 0
    assert again.answer(['Context 1: y'], [2]) == [[first[1]]]
    assert first[1].text == 'y (seed 2, 1 contexts)'
    assert first[1].mean_logprob == -0.75


def test_an_answer_of_a_backend_that_says_nothing_of_it_has_unknown_info(tmp_path, counting_backend):
    path = tmp_path / 'g.sqlite'
    GenerationCache(counting_backend, path).generate(['x'])
    assert GenerationCache(counting_backend, path).generate(['x']) == [
        Answer(text='no context (seed 0, 0 contexts)', truncated=None, logprob=None, tokens=None)]
    assert sqlite3.connect(path).execute('SELECT COUNT(*) FROM answer_info').fetchone() == (0,)


def test_a_file_written_before_answer_info_keeps_its_answers_with_unknown_info(tmp_path):
    from support.backends import CountingBackend
    path = tmp_path / 'g.sqlite'
    GenerationCache(CountingBackend(logprobs=True), path).generate(['x'], seeds=[1])
    db = sqlite3.connect(path)
    db.execute('DROP TABLE answer_info')  # what the cache wrote before it recorded answer info
    db.commit()
    db.close()
    backend = CountingBackend(logprobs=True)
    cache = GenerationCache(backend, path)
    assert cache.generate(['x', 'z'], seeds=[1, 1]) == [
        Answer(text='no context (seed 1, 0 contexts)', truncated=None, logprob=None, tokens=None),
        Answer(text='no context (seed 1, 0 contexts)', truncated=True, logprob=-1.5, tokens=6)]
    assert backend.calls == ['z'] and len(cache) == 2
    assert sqlite3.connect(path).execute('SELECT key, logprob, tokens, truncated FROM answer_info').fetchall() == [
        (cache.key('z', 1, None, None), -1.5, 6, 1)]


class TokenBackend(Backend):
    """Answers with each token's log-probability, as CausalLMBackend, vLLM and servers report them."""
    supports_seeds = True

    def __init__(self):
        super().__init__('tokens')
        self.calls = []

    def generate(self, inps, *, seeds=None, max_new_tokens=None, stop_sequences=None, **kw):
        self.calls.extend(inps)
        return [Answer(text=f'{p} {s}', truncated=False, logprob=-0.1 - 0.2 - 1 / 3, tokens=3,
                       token_logprobs=(-0.1, -0.2, -1 / 3)) for p, s in zip(inps, seeds or [0] * len(inps))]


def test_token_log_probabilities_survive_a_reopen_and_an_older_file_gains_their_column(tmp_path):
    path = tmp_path / 'g.sqlite'
    from support.backends import CountingBackend
    GenerationCache(CountingBackend(logprobs=True), path).generate(['old'], seeds=[1])
    db = sqlite3.connect(path)  # answer_info as written before it held token log-probabilities
    db.execute('CREATE TABLE info_before AS SELECT key, logprob, tokens, truncated FROM answer_info')
    db.execute('DROP TABLE answer_info')
    db.execute('ALTER TABLE info_before RENAME TO answer_info')
    db.commit()
    db.close()
    first = GenerationCache(TokenBackend(), path).generate(['new'], seeds=[1])[0]
    assert first.token_logprobs == (-0.1, -0.2, -1 / 3)
    backend = TokenBackend()
    again = GenerationCache(backend, path)
    assert again.generate(['new'], seeds=[1]) == [first] and backend.calls == []
    assert sum(again.generate(['new'], seeds=[1])[0].token_logprobs) == first.logprob
    counting = CountingBackend()
    old = GenerationCache(counting, path).generate(['old'], seeds=[1])[0]
    assert (old.logprob, old.tokens, old.token_logprobs) == (-1.5, 6, None) and counting.calls == []


def test_settings_are_part_of_the_key(counting_backend):
    cache = GenerationCache(counting_backend)
    cache.generate(['x'], seeds=[0], max_new_tokens=10)
    cache.generate(['x'], seeds=[0], max_new_tokens=20)
    cache.generate(['x'], seeds=[0], max_new_tokens=20, stop_sequences=['\n'])
    assert cache.generated == 3


class Scripted(Backend):
    """Returns what it is told to, whatever the prompts: a broken or misbehaving backend."""
    supports_seeds = True

    def __init__(self, outputs):
        super().__init__('scripted')
        self.outputs = outputs

    def generate(self, inps, **kw):
        return self.outputs(inps) if callable(self.outputs) else self.outputs


@pytest.mark.parametrize('outputs,message', [
    (lambda inps: [BackendOutput(text='x')] * (len(inps) + 1), r'returned 3 outputs for 2 prompts'),
    (lambda inps: [BackendOutput(text='x')], r'returned 1 outputs for 2 prompts'),
    (lambda inps: [BackendOutput(text=None)] * len(inps), r'returned NoneType as the answer to prompt 0'),
    (lambda inps: [BackendOutput(text='ERROR::other')] * len(inps), r"error marker 'ERROR::other'"),
    (None, r'returned NoneType for 2 prompts'),
])
def test_what_a_backend_returns_is_checked_and_nothing_false_is_stored(outputs, message, tmp_path, counting_backend):
    cache = GenerationCache(Scripted(outputs), tmp_path / 'g.sqlite')
    with pytest.raises(BackendError, match=message):
        cache.generate(['a', 'b'], seeds=[0, 0])
    assert len(cache) == 0 and cache.store.memory == {}
    cache.backend = counting_backend  # the same settings key: a working backend now generates both
    assert [o.text for o in cache.generate(['a', 'b'], seeds=[0, 0])] == ['no context (seed 0, 0 contexts)'] * 2
    assert counting_backend.calls == ['a', 'b']


def test_pyterrier_rag_error_markers_from_an_unseeded_backend_are_errors():
    class OldStyle(Backend):
        def generate(self, inps, **kw):
            return [BackendOutput(text='ERROR::reduce_length') for _ in inps]

    with pytest.raises(BackendError, match='ERROR::reduce_length'):
        GenerationCache(OldStyle('old')).generate(['p'])


def test_generation_args_of_pyterrier_rag_backends_are_in_the_key():
    from pyterrier_utility.cache.keys import backend_key

    class LikeVLLM(Backend):
        def __init__(self, temperature):
            super().__init__('m')
            self.generation_args = {'temperature': temperature}

        def generate(self, inps, **kw):
            return []

    assert backend_key(LikeVLLM(0.3)) != backend_key(LikeVLLM(1.0))


@pytest.mark.parametrize('damage', ['garbage', 'truncated', 'foreign'])
def test_an_unusable_cache_file_is_named_and_never_replaced(damage, tmp_path, counting_backend):
    path = tmp_path / 'g.sqlite'
    with GenerationCache(counting_backend, path) as cache:
        cache.generate(['a'], seeds=[0])
    if damage == 'garbage':
        path.write_bytes(b'not a database at all' * 100)
    elif damage == 'truncated':
        path.write_bytes(path.read_bytes()[:700])
    else:
        path.unlink()
        with sqlite3.connect(path) as db:
            db.execute('CREATE TABLE answers (id INTEGER, text TEXT)')
    before = path.read_bytes()
    with pytest.raises(CacheError, match=f'generation cache {path}: .*move it aside'):
        GenerationCache(counting_backend, path).generate(['a'], seeds=[0])
    assert path.read_bytes() == before


@pytest.mark.skipif(hasattr(os, 'geteuid') and os.geteuid() == 0, reason='root writes read-only files')
def test_a_read_only_cache_is_named(tmp_path, counting_backend):
    path = tmp_path / 'g.sqlite'
    GenerationCache(counting_backend, path).generate(['a'], seeds=[0])
    path.chmod(0o444)
    with pytest.raises(CacheError, match='read-only'):
        GenerationCache(counting_backend, path).generate(['b'], seeds=[0])


def test_cache_pickles_closes_and_reopens(tmp_path, counting_backend):
    import pickle
    with GenerationCache(counting_backend, tmp_path / 'g.sqlite') as cache:
        cache.generate(['a'], seeds=[0])
    clone = pickle.loads(pickle.dumps(cache))
    assert len(clone) == 1 and clone.generate(['a'], seeds=[0])[0].text == 'no context (seed 0, 0 contexts)'
    assert counting_backend.calls == ['a']


def test_samples_of_a_prompt_are_never_split_across_backend_calls(counting_backend):
    from pyterrier_utility import Reader
    calls = []
    generate = counting_backend.generate
    counting_backend.generate = lambda inps, **kw: calls.append(list(inps)) or generate(inps, **kw)
    Reader(GenerationCache(counting_backend), n_samples=3).answer(['a', 'bb', 'ccc'])
    # batch_size 4 holds one prompt's 3 samples, not two prompts' 6
    assert calls == [['a'] * 3, ['bb'] * 3, ['ccc'] * 3]


def test_text_sqlite_cannot_write_leaves_no_transaction_open_and_the_cache_usable(tmp_path, counting_backend):
    cache = GenerationCache(counting_backend, tmp_path / 'g.sqlite')
    with pytest.raises(UnicodeEncodeError):
        cache.store.put({'a': Answer(text='fine'), 'b': Answer(text='bad \ud800')})
    assert not cache.store.connect().in_transaction
    assert len(cache.generate(['p'])) == 1 and len(cache) == 1


def test_an_answer_that_cannot_be_encoded_is_an_error_and_nothing_is_stored(tmp_path):
    from support.backends import CountingBackend

    class Surrogates(CountingBackend):
        def generate(self, inps, **kw):
            return [BackendOutput(text=o.text + ' \ud800') for o in super().generate(inps, **kw)]

    cache = GenerationCache(Surrogates(), tmp_path / 'g.sqlite')
    with pytest.raises(BackendError, match=r'answer to prompt 0 of 1 that cannot be encoded as UTF-8'):
        cache.generate(['p'])
    assert len(cache) == 0


def test_the_key_definition_is_recorded_and_describes_the_keys(tmp_path, counting_backend):
    import hashlib
    import json

    from pyterrier_utility.cache.keys import KEY_DEFINITION, settings_key
    path = tmp_path / 'g.sqlite'
    cache = GenerationCache(counting_backend, path)
    cache.generate(['a'], seeds=[3])
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'key'").fetchone() == (KEY_DEFINITION,)
    # The keys, computed from the definition alone: sha256 of the JSON list of the parts.
    settings = json.dumps(settings_key(counting_backend, None, None), sort_keys=True, default=str)
    settings_id = hashlib.sha256(json.dumps([settings]).encode()).hexdigest()
    assert db.execute('SELECT id, definition FROM settings').fetchall() == [(settings_id, settings)]
    answer_key = hashlib.sha256(json.dumps([settings_id, 'a', 3]).encode()).hexdigest()
    assert db.execute('SELECT key FROM answers').fetchall() == [(answer_key,)]


def test_a_file_keyed_otherwise_is_refused_and_one_without_a_definition_gains_it(tmp_path, counting_backend):
    from pyterrier_utility.cache.keys import KEY_DEFINITION
    path = tmp_path / 'g.sqlite'
    GenerationCache(counting_backend, path).generate(['a'], seeds=[0])
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM meta WHERE key = 'key'")  # a file written before the definition was recorded
    again = GenerationCache(counting_backend, path)
    assert again.generate(['a'], seeds=[0])[0].text == 'no context (seed 0, 0 contexts)' and again.generated == 0
    again.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT value FROM meta WHERE key = 'key'").fetchone() == (KEY_DEFINITION,)
        db.execute("UPDATE meta SET value = 'md5(prompt)' WHERE key = 'key'")
    before = path.read_bytes()
    with pytest.raises(CacheError, match=f'generation cache {path}: its answers are keyed as md5\\(prompt\\), '
                                         'this version keys them as .*none of them would be found'):
        GenerationCache(counting_backend, path).generate(['a'], seeds=[0])
    assert path.read_bytes() == before


@pytest.mark.slow
def test_a_cache_written_by_version_0_1_0_is_read_but_its_answers_of_another_attention_are_not_served(
        tmp_path, capsys, monkeypatch):
    """The study's cache file as version 0.1.0 wrote it with its batch-invariant reader (``study --queries
    1 -k 1 2 --samples 2 --systems BM25 Rel``, the offline reader, kept as SQL text with that run's
    answers.csv) opens and is written to, but its answers are not served: that reader attended over each
    row's copy of its prompt's keys, this one over the keys held once (another summing order, at times
    another answer), and the batching in every key says which. The same study generates its 12 answers
    again beside the old ones, rather than mixing answers of two arithmetics."""
    from pyterrier_utility import cli
    from pyterrier_utility.backends.hf import dtype, invariant
    # Written on a CPU without bf16 instructions, whose row tiles hold across thread counts: in float32, the
    # batching named without a thread count. Both are in the keys; the reader here resolves them so.
    monkeypatch.setattr(dtype, 'cpu_has_fast_bf16', lambda: False)
    holds = invariant._tile_holds
    monkeypatch.setattr(invariant, '_tile_holds', lambda *args, threads=None, **kwargs:
                        holds(*args, threads=[torch.get_num_threads()], **kwargs))
    monkeypatch.setattr(invariant, '_TILES', {})
    support = Path(__file__).parent / 'support'
    out = tmp_path / 'study'
    out.mkdir()
    db = sqlite3.connect(out / 'generations.sqlite')
    db.executescript((support / 'study_cache_v0.1.0.sql').read_text())
    db.close()
    assert cli.main(['study', '--queries', '1', '-k', '1', '2', '--samples', '2', '--systems', 'BM25', 'Rel',
                     '--out', str(out)]) == 0
    assert '; 12 answers generated' in capsys.readouterr().out
    assert len(pd.read_csv(out / 'answers.csv')) == len(pd.read_csv(support / 'study_cache_v0.1.0_answers.csv'))
    assert len(GenerationCache(CountingBackend(), out / 'generations.sqlite')) == 24
