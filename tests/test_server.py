"""The server path against real servers: ``transformers serve`` with the offline Gemma on 127.0.0.1.

``transformers serve`` decodes greedily whatever ``temperature`` and ``seed`` say and rejects
``top_k``: the study runs here at temperature 0 with ``top_k=None`` (not sent).
"""
import json
import sqlite3
import threading
import time

import pandas as pd
import pytest
from pandas.testing import assert_frame_equal
from support.servers import ServedModel

import pyterrier_utility as pu
from pyterrier_utility import study as ex
from pyterrier_utility.errors import BackendError

pytestmark = [pytest.mark.server, pytest.mark.slow]


@pytest.fixture(scope='module')
def servers(tmp_path_factory):
    model = pu.backends.gemma3_270m_path()
    logs = tmp_path_factory.mktemp('servers')
    pool = [ServedModel(model, logs / f'server{i}.log').start() for i in range(2)]
    try:
        yield [s.wait_ready() for s in pool]
    finally:
        for s in pool:
            s.kill()


def backend(server, **kw):
    kw = dict(dict(top_k=None, temperature=0, max_new_tokens=8, concurrency=1, max_retries=2, backoff=0.2), **kw)
    return pu.backends.OpenAICompatibleBackend(server.model, server.url, **kw)


def cache_rows(path):
    with sqlite3.connect(path) as db:
        return dict(db.execute('SELECT key, answer FROM answers'))


def stored(path) -> int:
    """Answers in the cache file at ``path`` so far (none before it exists)."""
    try:
        return len(cache_rows(path))
    except sqlite3.OperationalError:
        return 0


def small_study(reader, cranfield):
    qrels = cranfield.get_qrels()
    topics = pu.datasets.answerable_topics(cranfield.get_topics(), qrels, 2).head(2)
    systems = {'Rel': pu.OracleSampler(qrels, cranfield.texts, labels=2),
               'NRel': pu.OracleSampler(qrels, cranfield.texts, relevant=False, fill_unjudged=True)}
    return ex.run_study(topics, qrels, systems, reader, cranfield.texts, ks=[1], label_sets=[2],
                        bertscore='minilm', verbose=False)


def test_a_rejected_field_stops_the_first_request_naming_it_and_stores_nothing(servers, tmp_path):
    cache = pu.GenerationCache(backend(servers[0], top_k=50), tmp_path / 'g.sqlite')
    with pytest.raises(BackendError, match=r"HTTP 422.*top_k.*the server rejected \['top_k'\]") as e:
        pu.Reader(cache)(pd.DataFrame({'qid': ['1'], 'query': ['what is lift?']}))
    assert servers[0].url in str(e.value)
    assert len(cache) == 0


def test_a_server_that_ignores_the_request_for_log_probabilities_answers_with_none(servers):
    # transformers serve accepts the field and answers without log-probabilities (it logs that it ignores it).
    prompt = 'Question: what is lift?\nAnswer:'
    asked = backend(servers[0], logprobs=True).generate([prompt])[0]
    assert (asked.logprob, asked.tokens, asked.mean_logprob) == (None, None, None)
    assert asked.text == backend(servers[0]).generate([prompt])[0].text != ''


def test_killed_server_stops_the_run_keeps_real_answers_and_the_rerun_generates_only_the_rest(
        servers, tmp_path, cranfield):
    server = servers[0]
    whole_cache = tmp_path / 'whole.sqlite'
    whole = small_study(pu.Reader(pu.GenerationCache(backend(server), whole_cache)), cranfield)
    total = whole.generated
    assert total == len(cache_rows(whole_cache)) >= 5

    killed_cache = tmp_path / 'killed.sqlite'
    failure = []

    def run():
        try:
            small_study(pu.Reader(pu.GenerationCache(backend(server), killed_cache)), cranfield)
        except BaseException as e:  # the test inspects it
            failure.append(e)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.time() + 120
    # Two answers stored, not only answered: the server logs its 200 before the client has the body.
    while stored(killed_cache) < 2 and time.time() < deadline and thread.is_alive():
        time.sleep(0.05)
    assert thread.is_alive(), 'the study finished before the server could be killed'
    server.kill()
    try:
        thread.join(timeout=120)
        assert not thread.is_alive()
        assert len(failure) == 1 and isinstance(failure[0], BackendError)
        assert server.url in str(failure[0]) and 'after 2 retries' in str(failure[0])
        kept = cache_rows(killed_cache)
        assert 2 <= len(kept) < total
        # Only real answers: each is the server's answer to that prompt, as the uninterrupted run got it.
        assert kept.items() <= cache_rows(whole_cache).items()
    finally:
        server.start().wait_ready()  # the module's other tests use it
    reader = pu.Reader(pu.GenerationCache(backend(server), killed_cache))
    before = server.answered()
    resumed = small_study(reader, cranfield)
    assert resumed.generated == server.answered() - before == total - len(kept)
    assert_frame_equal(resumed.per_query, whole.per_query)
    assert_frame_equal(resumed.answers, whole.answers)


def test_cli_study_over_a_pool_of_two_servers_writes_the_settings_asked_for(servers, tmp_path, capsys):
    from pyterrier_utility import cli
    before = [s.answered() for s in servers]
    out = tmp_path / 'study'
    code = cli.main(['study', '--reader', f'openai:{servers[0].model}', '--base-url', servers[0].url, servers[1].url,
                     '--concurrency', '2', '--temperature', '0', '--top-k', 'none', '--max-new-tokens', '6',
                     '--seed', '3', '--samples', '1', '--systems', 'Rel', 'NRel', '--queries', '2', '-k', '1',
                     '--labels', '2',
                     '--out', str(out)])
    assert code == 0
    settings = json.loads((out / 'settings.json').read_text())
    decoding = settings['decoding']
    assert ((decoding['temperature'], decoding['top_k'], decoding['max_new_tokens'], settings['seeds'])
            == (0, None, 6, [3]))
    assert settings['base_urls'] == [servers[0].url, servers[1].url]
    built = settings['backends'][f'openai:{servers[0].model}']['decoding']
    assert built['temperature'] == 0 and built['top_k'] is None
    assert decoding['repetition_penalty'] is None and decoding['stop'] == ['STOP']  # no offline conveniences
    answered = [s.answered() - b for s, b in zip(servers, before)]
    assert min(answered) >= 1  # the pool spread the requests
    cached = cache_rows(out / 'generations.sqlite')
    assert len(cached) == sum(answered)  # every stored answer came from a server's 200 response
    answers = pd.read_csv(out / 'answers.csv', keep_default_na=False)
    assert set(answers['qanswer']) <= set(cached.values())
    assert 'pyterrier-utility study: ' in capsys.readouterr().err  # progress lines on stderr, with the bars
