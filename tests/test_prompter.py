"""The prompt side as a transformer of its own: the prompts a Reader answers, and answered as they are."""
import pandas as pd
import pytest

from pyterrier_utility import Prompter, Reader
from pyterrier_utility.errors import FrameError
from pyterrier_utility.reader import KSHOT_PROMPT, ZEROSHOT_PROMPT


def test_one_prompt_per_query_in_rank_order(results):
    out = Prompter()(results)
    assert list(out.columns) == ['qid', 'query', 'prompt']
    assert list(out['qid']) == ['q1', 'q2']
    contexts = 'Context 1: first doc\nContext 2: second doc\nContext 3: third doc'
    assert out['prompt'].iloc[0] == KSHOT_PROMPT.format(contexts=contexts, query='what is lift')
    zero = Prompter()(pd.DataFrame({'qid': ['q9'], 'query': ['what is drag']}))
    assert zero['prompt'].tolist() == [ZEROSHOT_PROMPT.format(query='what is drag')]


def test_a_reader_answers_a_prompters_frame_as_it_would_the_ranking(counting_backend, results):
    reader = Reader(counting_backend, n_samples=2)
    direct = reader(results).drop_duplicates(['qid', 'sample'])
    piped = (Prompter() >> reader)(results)
    assert piped[['qid', 'sample', 'qanswer']].values.tolist() == direct[['qid', 'sample', 'qanswer']].values.tolist()
    assert piped['sample'].tolist() == [0, 0, 1, 1]
    # Each prompt was generated once per seed, whichever way it came (the second way from memory).
    assert len(counting_backend.calls) == 4 and len(set(counting_backend.calls)) == 2


def test_prompts_are_fitted_to_the_limit_with_the_question_kept():
    class Words:
        """A tokenizer of one token per character."""
        def encode(self, text, add_special_tokens=False):
            return list(text)

        def decode(self, tokens):
            return ''.join(tokens)
    frame = pd.DataFrame({'qid': ['q1'] * 2, 'query': ['q'] * 2, 'docno': ['a', 'b'], 'rank': [0, 1],
                          'text': ['x' * 50, 'y' * 10]})
    room = len(Prompter().build_prompt('q', ['', ''])) + 30
    with pytest.warns(UserWarning, match=f'prompts over {room} tokens; documents truncated evenly.*qid q1'):
        out = Prompter(tokenizer=Words(), max_prompt_tokens=room)(frame)
    # 30 tokens for two documents: the short one whole (10), the long one the rest (20).
    assert out['prompt'].iloc[0] == Prompter().build_prompt('q', ['x' * 20, 'y' * 10])


def test_bad_input_names_the_prompter_and_the_qids():
    with pytest.raises(FrameError, match=r"Prompter\('plain'.*no query text for qid \['q2'\]"):
        Prompter()(pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['a', None]}))
    with pytest.raises(Exception, match="input has no column 'query'"):
        Prompter()(pd.DataFrame({'qid': ['q1']}))
