"""Prompt formats, the authors' checked against the strings their code builds."""
import pandas as pd
import pytest

from pyterrier_utility import PROMPT_FORMATS, PromptFormat, Reader
from pyterrier_utility.errors import SettingError
from pyterrier_utility.settings import BASE_MODEL_STOP

QUERY = 'definition of a sigmet'
TEXTS = ['Definition of SIGMET. plural.', 'sigmet SIGMET, or Significant.']


def test_authors_format_is_the_string_their_code_builds():
    # github.com/DanielTian97/rag-utility, tools/prompt_tools.py: compose_context joins
    # f'Context {num}: "{text}";\n', prompt_assembler(context, query, long_answer=True) returns
    # f'{preamble} \n{context}Question: "{query}"\nNow start your answer. \nAnswer: ' and
    # prompt_assembler_0 the same without the context; the preambles are used_preamble(_0)(True).
    fmt = PROMPT_FORMATS['authors']
    assert fmt.build(QUERY, TEXTS) == (
        'You are an expert at answering questions based on your own knowledge and related context. Please answer '
        'this question based on the given context. End your answer with STOP. \n'
        'Context 1: "Definition of SIGMET. plural.";\n'
        'Context 2: "sigmet SIGMET, or Significant.";\n'
        'Question: "definition of a sigmet"\n'
        'Now start your answer. \n'
        'Answer: ')
    assert fmt.build(QUERY) == (
        'You are an expert at answering questions based on your own knowledge. Please answer this question. '
        'End your answer with STOP. \n'
        'Question: "definition of a sigmet"\n'
        'Now start your answer. \n'
        'Answer: ')


def test_authors_short_format_and_its_extraction():
    # The same file with long_answer=False (their NQ runs); tools/llama_tools.py stops at '</answer>'.
    fmt = PROMPT_FORMATS['authors-short']
    assert fmt.build(QUERY, TEXTS[:1]) == (
        'You are an expert at answering questions based on your own knowledge and related context. Please answer '
        'this question based on the given context within 5 words. You should put your answer inside <answer> and '
        '</answer>.  \n'
        'Context 1: "Definition of SIGMET. plural.";\n'
        'Question: "definition of a sigmet"\n'
        'Now start your answer. \n'
        'Answer: <answer>')
    assert fmt.build(QUERY) == (
        'You are an expert at answering questions based on your own knowledge. Please answer this question within '
        '5 words. You should put your answer inside <answer> and </answer>.  \n'
        'Question: "definition of a sigmet"\n'
        'Now start your answer. \n'
        'Answer: <answer>')
    assert fmt.stop == ('</answer>',)
    assert fmt.extract(' a weather warning</answer>\nQuestion: x') == 'a weather warning'
    assert fmt.extract('<answer> aviation advisory </answer>') == 'aviation advisory'
    assert fmt.extract('no closing tag') == 'no closing tag'


def test_plain_format_is_the_projects_earlier_layout():
    assert PROMPT_FORMATS['plain'].build(QUERY, TEXTS) == (
        'You are an expert at answering questions based on your own knowledge and related context. Please answer '
        'this question based on the given context. End your answer with STOP.\n'
        'Context 1: Definition of SIGMET. plural.\n'
        'Context 2: sigmet SIGMET, or Significant.\n'
        'Question: definition of a sigmet\n'
        'Now start your answer. Answer:')


def test_example_format_puts_one_worked_example_before_the_plain_layout():
    instruction = ('You are an expert at answering questions based on your own knowledge and related context. Please '
                   'answer this question based on the given context. End your answer with STOP.')
    example = ('Context 1: A honeybee that has found food returns to the hive and performs a waggle dance. The angle '
               'of the dance from the vertical shows the direction of the food relative to the sun, and the length of '
               'the waggle run shows how far away it is.\n'
               'Context 2: Honey is made from nectar, which worker bees store in wax cells until enough water has '
               'evaporated from it.\n'
               'Question: how do honeybees tell each other where food is\n'
               'Now start your answer. Answer: A bee that has found food performs a waggle dance in the hive: its '
               'angle gives the direction of the food relative to the sun and the length of its waggle run gives the '
               'distance. STOP\n\n')
    fmt = PROMPT_FORMATS['example']
    assert fmt.build(QUERY, TEXTS) == (instruction + '\n\n' + example + PROMPT_FORMATS['plain'].build(QUERY, TEXTS)
                                       .split('STOP.\n', 1)[1])
    zero = fmt.build(QUERY)
    assert zero.startswith('You are an expert at answering questions based on your own knowledge. Please answer this '
                           'question. End your answer with STOP.\n\nQuestion: how do honeybees tell each other where '
                           'food is\nNow start your answer. Answer: A bee that has found food')
    assert zero.endswith('distance. STOP\n\nQuestion: definition of a sigmet\nNow start your answer. Answer:')
    # Braces in the documents stay data; the example's own text is fixed, whatever the documents.
    assert fmt.build('q', ['{x}']).endswith('Context 1: {x}\nQuestion: q\nNow start your answer. Answer:')
    assert fmt.stop == BASE_MODEL_STOP


def test_reader_with_the_authors_format(counting_backend):
    results = pd.DataFrame({'qid': ['q1', 'q1'], 'query': [QUERY] * 2, 'docno': ['d1', 'd2'],
                            'text': TEXTS, 'rank': [0, 1]})
    reader = Reader(counting_backend, prompt_format='authors')
    reader(results)
    assert counting_backend.calls == [PROMPT_FORMATS['authors'].build(QUERY, TEXTS)]
    assert "prompt_format='authors'" in repr(reader)


def test_reader_with_the_short_format_stops_at_the_tag_and_extracts():
    from pyterrier_rag.backend import Backend, BackendOutput

    class Tagged(Backend):
        def generate(self, inps, **kw):
            return [BackendOutput(text=' SIGMET is a weather advisory</answer> and more') for _ in inps]

    reader = Reader(Tagged('tagged'), prompt_format='authors-short')
    assert reader.stop == ['</answer>']
    out = reader(pd.DataFrame({'qid': ['q1'], 'query': [QUERY]}))
    assert list(out['qanswer']) == ['SIGMET is a weather advisory']


def test_each_format_owns_the_stop_its_text_asks_for():
    for fmt in PROMPT_FORMATS.values():
        assert fmt.stop and all(fmt.stop[0] in text for text in (fmt.kshot, fmt.zero_shot)), fmt.name


@pytest.mark.parametrize('fmt,decoding_stop,expected', [
    ('plain', ('\n\n',), ['STOP', '\n\n']),  # the text asks for STOP: it stops there whatever the backend's
    ('plain', BASE_MODEL_STOP, list(BASE_MODEL_STOP)),  # a base model's stops added, STOP once
    ('authors', ('STOP',), ['STOP']),
    ('authors-short', BASE_MODEL_STOP, ['</answer>']),  # the authors' short answers stop at the tag alone
])
def test_reader_stops_where_the_format_asks_then_where_the_backend_does(fmt, decoding_stop, expected):
    from pyterrier_utility.backends import OpenAICompatibleBackend
    backend = OpenAICompatibleBackend('m', 'http://127.0.0.1:9/v1', stop=decoding_stop)
    assert Reader(backend, prompt_format=fmt).stop == expected
    assert Reader(backend, prompt_format=fmt, stop='END').stop == ['END']  # given: exactly that


def test_template_arguments_override_the_format(counting_backend):
    reader = Reader(counting_backend, prompt_format='authors', context_format='[{i}] {text}')
    assert reader.template.name == 'authors+custom'
    expected = PROMPT_FORMATS['authors'].kshot.format(contexts='[1] t', query='q')
    assert reader.prompter.build_prompt('q', ['t']) == expected
    assert reader.prompter.build_prompt('q') == PROMPT_FORMATS['authors'].build('q')


def test_unknown_or_broken_formats_are_refused(counting_backend):
    with pytest.raises(SettingError, match="one of \\['authors', 'authors-short', 'example', 'plain'\\]"):
        Reader(counting_backend, prompt_format='figure2')
    with pytest.raises(SettingError, match='kshot must be a string with {contexts}, {query}'):
        PromptFormat('broken', '{query}', '{query}', '{text}')
