import sqlite3

from pyterrier_utility import GenerationCache


def test_each_prompt_and_seed_generated_once(counting_backend):
    cache = GenerationCache(counting_backend)
    out = cache.generate(['a', 'b', 'a', 'a'], seeds=[0, 0, 0, 1])
    assert [o.text for o in out][0] == [o.text for o in out][2]
    assert counting_backend.calls == ['a', 'b', 'a']
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


def test_settings_are_part_of_the_key(counting_backend):
    cache = GenerationCache(counting_backend)
    cache.generate(['x'], seeds=[0], max_new_tokens=10)
    cache.generate(['x'], seeds=[0], max_new_tokens=20)
    cache.generate(['x'], seeds=[0], max_new_tokens=20, stop_sequences=['\n'])
    assert cache.generated == 3
