import pandas as pd
import pytest

from pyterrier_utility import GenerationCache, Reader
from pyterrier_utility.reader import KSHOT_PROMPT, ZEROSHOT_PROMPT


def test_kshot_prompt_follows_rank_not_score(counting_backend, results):
    Reader(counting_backend)(results)
    lift = [c for c in counting_backend.calls if 'what is lift' in c]
    assert lift == [(
        'You are an expert at answering questions based on your own knowledge and related context. '
        'Please answer this question based on the given context. End your answer with STOP.\n'
        'Context 1: first doc\nContext 2: second doc\nContext 3: third doc\n'
        'Question: what is lift\nNow start your answer. Answer:')]


def test_zero_shot_prompt_for_query_frame(counting_backend):
    out = Reader(counting_backend)(pd.DataFrame({'qid': ['q1'], 'query': ['what is lift']}))
    assert counting_backend.calls == [
        'You are an expert at answering questions based on your own knowledge. Please answer this '
        'question. End your answer with STOP.\nQuestion: what is lift\nNow start your answer. Answer:']
    assert list(out['qanswer']) == ['no context (seed 0, 0 contexts)']


def test_output_keeps_documents_and_adds_answer(counting_backend, results):
    out = Reader(counting_backend)(results)
    assert list(out.columns) == list(results.columns) + ['qanswer', 'logprob', 'mean_logprob', 'tokens', 'truncated']
    assert len(out) == len(results)
    assert set(out[out.qid == 'q1']['qanswer']) == {'first doc (seed 0, 3 contexts)'}
    assert set(out[out.qid == 'q2']['qanswer']) == {'drag doc (seed 0, 1 contexts)'}


def test_output_says_what_the_backend_says_of_each_answer(results):
    from support.backends import CountingBackend
    out = Reader(CountingBackend(logprobs=True), n_samples=2)(results)
    q2 = out[out.qid == 'q2'][['sample', 'qanswer', 'logprob', 'mean_logprob', 'truncated']].reset_index(drop=True)
    pd.testing.assert_frame_equal(q2, pd.DataFrame({
        'sample': [0, 1], 'qanswer': ['drag doc (seed 0, 1 contexts)', 'drag doc (seed 1, 1 contexts)'],
        'logprob': [-4.5, -4.5], 'mean_logprob': [-0.75, -0.75], 'truncated': [False, True]}))


def test_what_a_backend_does_not_say_is_missing(counting_backend, results):
    out = Reader(counting_backend)(results)
    assert out['logprob'].isna().all() and out['mean_logprob'].isna().all()
    assert out['truncated'].tolist() == [None] * len(results)


def test_samples_have_their_own_seeds_and_rows(counting_backend, results):
    out = Reader(counting_backend, n_samples=3, seed=10)(results)
    assert len(out) == 3 * len(results)
    q2 = out[out.qid == 'q2'].sort_values('sample')
    assert list(q2['sample']) == [0, 1, 2]
    assert list(q2['qanswer']) == [f'drag doc (seed {s}, 1 contexts)' for s in (10, 11, 12)]


def test_identical_prompts_generate_once(counting_backend, results):
    reader = Reader(counting_backend, n_samples=2)
    reader(results)
    reader(results)
    reader(pd.concat([results, results.assign(qid=results['qid'] + 'copy')]))
    assert len(counting_backend.calls) == 4  # two queries x two seeds


def test_greedy_backend_generates_once_for_all_samples(results):
    from support.backends import CountingBackend
    backend = CountingBackend(seeded=False)
    out = Reader(backend, n_samples=5)(results)
    assert len(backend.calls) == 2
    assert out.groupby('qid')['qanswer'].nunique().tolist() == [1, 1]


def test_stop_is_removed_for_backends_without_seeds(results):
    from pyterrier_rag.backend import Backend, BackendOutput

    class Plain(Backend):
        def generate(self, inps, **kw):
            return [BackendOutput(text=' the answer STOP and more') for _ in inps]

    out = Reader(Plain('plain'))(results)
    assert set(out['qanswer']) == {'the answer'}


def test_custom_prompts(counting_backend, results):
    reader = Reader(counting_backend, prompt='{contexts}|{query}', context_format='[{i}] {text}')
    reader(results[results.qid == 'q2'])
    assert counting_backend.calls == ['[1] drag doc|what is drag']
    assert reader.prompter.build_prompt('q') == ZEROSHOT_PROMPT.format(query='q')
    assert '{contexts}' in KSHOT_PROMPT


def test_missing_text_column_is_named(counting_backend, results):
    with pytest.raises(Exception, match='text'):
        Reader(counting_backend)(results.drop(columns=['text']))


def test_reader_shares_an_explicit_cache(counting_backend, results, tmp_path):
    cache = GenerationCache(counting_backend, tmp_path / 'answers.sqlite')
    Reader(cache)(results)
    Reader(GenerationCache(counting_backend, tmp_path / 'answers.sqlite'))(results)
    assert len(counting_backend.calls) == 2


def test_progress_counts_answers_with_rate_when_verbose_and_is_silent_otherwise(counting_backend, results, capsys):
    Reader(counting_backend, n_samples=2, verbose=True)(results)
    err = capsys.readouterr().err
    assert 'answers: 100%' in err and '4/4' in err and 'answer/s' in err
    Reader(counting_backend, n_samples=2, seed=7, verbose=False)(results)
    assert capsys.readouterr().err == ''


def test_progress_is_on_by_default_in_a_terminal_too(counting_backend, results, capsys):
    """A script that generates for minutes is never silent: the bar is PyTerrier's (text outside Jupyter)."""
    assert Reader(counting_backend).verbose is True and Reader(counting_backend, verbose=False).verbose is False
    Reader(counting_backend, seed=3)(results)
    assert 'answers: 100%' in capsys.readouterr().err
