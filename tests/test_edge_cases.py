"""Bad and unusual input: clear errors, defined behaviour, warnings naming the qids."""
import numpy as np
import pandas as pd
import pytest
from pyterrier.validate import InputValidationError
from support.backends import CountingBackend

from pyterrier_utility import FBertScorer, OracleSampler, Reader, ReverseOrder, UtilityEvaluator

QRELS = pd.DataFrame({'qid': ['q1', 'q2'], 'docno': ['d1', 'd2'], 'label': [2, 2]})
TEXTS = {'d1': 'lift is an upward force', 'd2': 'drag slows aircraft'}


def frame(rows, columns=('qid', 'query', 'docno', 'text', 'rank')):
    return pd.DataFrame(rows, columns=list(columns))


@pytest.mark.parametrize('make,columns,missing', [
    (lambda: Reader(CountingBackend()), ['qid', 'query', 'docno'], "'text'"),
    (lambda: Reader(CountingBackend()), ['qid', 'docno', 'text'], "'query'"),
    (lambda: ReverseOrder(), ['qid', 'score'], "'docno'"),
    (lambda: OracleSampler(QRELS, TEXTS), ['qid'], "'query'"),
])
def test_missing_column_names_column_and_transformer(make, columns, missing):
    transformer = make()
    with pytest.raises(InputValidationError) as e:
        transformer(pd.DataFrame({c: ['x'] for c in columns}))
    message = str(e.value)
    assert f'input has no column {missing}' in message
    assert repr(transformer) in message


def test_scorer_and_evaluator_name_missing_answer_column(minilm):
    scorer = FBertScorer(QRELS, TEXTS, model_type=minilm)
    with pytest.raises(InputValidationError, match=r"FBertScorer\(.*input has no column 'qanswer'"):
        scorer(pd.DataFrame({'qid': ['q1'], 'query': ['x']}))
    evaluate = UtilityEvaluator(Reader(CountingBackend()), scorer)
    with pytest.raises(InputValidationError, match=r"UtilityEvaluator\(.*input has no column 'qanswer'"):
        evaluate(pd.DataFrame({'qid': ['q1'], 'query': ['x']}))


def test_qrels_without_label_is_named():
    with pytest.raises(InputValidationError, match="OracleSampler qrels: input has no column 'label'"):
        OracleSampler(QRELS.drop(columns=['label']), TEXTS)


def test_query_without_documents_gets_zero_shot_prompt_and_warning():
    backend = CountingBackend()
    reader = Reader(backend)
    rows = frame([('q1', 'what is lift', 'd1', 'lift doc', 0), ('q2', 'what is drag', None, None, 0)])
    with pytest.warns(UserWarning, match='no document retrieved; answered with the 0-shot prompt: qid q2'):
        out = reader(rows)
    assert reader.prompter.build_prompt('what is drag') in backend.calls
    assert out.set_index('qid').loc['q2', 'qanswer'] == 'no context (seed 0, 0 contexts)'


def test_duplicate_docno_given_once_at_first_rank():
    backend = CountingBackend()
    rows = frame([('q1', 'lift', 'd1', 'one', 0), ('q1', 'lift', 'd2', 'two', 1), ('q1', 'lift', 'd1', 'one', 2)])
    with pytest.warns(UserWarning, match='duplicate docno in the ranking, given once at its first rank: qid q1'):
        Reader(backend)(rows)
    assert 'Context 1: one\nContext 2: two\nQuestion' in backend.calls[0]


def test_missing_and_empty_text_keep_numbering():
    backend = CountingBackend()
    rows = frame([('q1', 'lift', 'd1', None, 0), ('q1', 'lift', 'd2', '  ', 1), ('q1', 'lift', 'd3', 'three', 2)])
    with pytest.warns(UserWarning, match='missing or empty document text, given as an empty context: qid q1'):
        Reader(backend)(rows)
    assert 'Context 1: \nContext 2:   \nContext 3: three\nQuestion: lift' in backend.calls[0]


def test_non_string_query_is_converted_and_missing_query_named():
    backend = CountingBackend()
    Reader(backend)(pd.DataFrame({'qid': ['q1'], 'query': [1903]}))
    assert 'Question: 1903\n' in backend.calls[0]
    with pytest.raises(ValueError, match=r"no query text for qid \['q2'\]"):
        Reader(backend)(pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['lift', None]}))


def test_unicode_quotes_and_braces_in_text_are_data(tmp_path):
    from pyterrier_utility import GenerationCache
    text = 'Mach \u2265 5 \u2014 "shock" {query} {contexts} Context 9: \u6d41\u4f53 \U0001f680'
    backend = CountingBackend()
    reader = Reader(GenerationCache(backend, tmp_path / 'a.sqlite'))
    out = reader(frame([('q1', "what's \u00e9lan?", 'd1', text, 0)]))
    assert backend.calls[0].count(text) == 1
    assert "Question: what's \u00e9lan?\n" in backend.calls[0]
    again = Reader(GenerationCache(CountingBackend(), tmp_path / 'a.sqlite'))(
        frame([('q1', "what's \u00e9lan?", 'd1', text, 0)]))
    assert again['qanswer'].iloc[0] == out['qanswer'].iloc[0] == f'{text} (seed 0, 2 contexts)'


class WordTokenizer:
    """One token per whitespace-separated word."""

    def encode(self, text, add_special_tokens=False):
        return text.split(' ')

    def decode(self, tokens):
        return ' '.join(tokens)


def test_long_contexts_truncated_evenly_question_kept_warned_once():
    backend = CountingBackend()
    backend.tokenizer = WordTokenizer()
    reader = Reader(backend, prompt='{contexts}\nQ: {query}', context_format='C{i}: {text}', max_prompt_tokens=12)
    long, short = ' '.join(f'a{i}' for i in range(20)), 'b0 b1'
    rows = frame([('q1', 'why so', 'd1', long, 0), ('q1', 'why so', 'd2', short, 1), ('q1', 'why so', 'd3', long, 2)])
    with pytest.warns(UserWarning, match='prompts over 12 tokens; documents truncated evenly.*qid q1'):
        reader(rows)
    prompt = backend.calls[0]
    # Frame: 'C1:', 'C2:', 'C3:' with empty texts, 'Q:', 'why', 'so' plus joins = 6 tokens; room 6:
    # the short document keeps its 2, the long ones get 2 each.
    assert prompt == 'C1: a0 a1\nC2: b0 b1\nC3: a0 a1\nQ: why so'
    assert len(WordTokenizer().encode(prompt)) <= 12
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        reader(rows.assign(qid='q2'))  # warned once per reader


def test_oracle_with_fewer_documents_than_k_gives_all_it_has():
    out = (OracleSampler(QRELS, TEXTS) % 5)(pd.DataFrame({'qid': ['q1'], 'query': ['lift']}))
    assert list(out['docno']) == ['d1']


def test_models_load_without_remote_code_unless_opted_in(monkeypatch):
    import transformers

    from pyterrier_utility import backends
    seen = []

    class Stop(Exception):
        pass

    def record(name, **kwargs):
        seen.append(kwargs.get('trust_remote_code'))
        raise Stop

    monkeypatch.setattr(transformers.AutoTokenizer, 'from_pretrained', lambda name, **kw: record(name, **kw))
    with pytest.raises(Stop):
        backends.get_backend('huggingface:some/model')
    with pytest.raises(Stop):
        backends.CausalLMBackend.from_pretrained('some/model', trust_remote_code=True)
    assert seen == [False, True]


def test_caches_hold_plain_data(tmp_path, minilm):
    import sqlite3

    from pyterrier_utility import BertScore, GenerationCache
    GenerationCache(CountingBackend(), tmp_path / 'g.sqlite').generate(['a prompt'], seeds=[1])
    rows = sqlite3.connect(tmp_path / 'g.sqlite').execute('SELECT key, answer FROM answers').fetchall()
    assert [type(v) for v in rows[0]] == [str, str] and rows[0][1] == 'no context (seed 1, 0 contexts)'
    scorer = BertScore(minilm.model_type, minilm.num_layers, cache_path=tmp_path / 'e.sqlite')
    scorer.embed(['some text'])
    blobs = sqlite3.connect(tmp_path / 'e.sqlite').execute('SELECT ids, emb FROM embeddings').fetchone()
    emb = np.frombuffer(blobs[1], dtype=np.float32)  # raw float32, nothing to unpickle
    assert emb.size % 384 == 0 and emb.size > 0


# Regression cases: each once gave a silent wrong number, a false stored answer or an unrelated traceback.

def test_a_stop_string_is_one_stop_sequence_not_characters():
    backend = CountingBackend()
    reader = Reader(backend, stop='STOP')
    assert reader.stop == ['STOP']
    out = reader(pd.DataFrame({'qid': ['q1'], 'query': ['what is lift']}))
    assert out['qanswer'].iloc[0] == 'no context (seed 0, 0 contexts)'


@pytest.mark.parametrize('make', [
    lambda: Reader(CountingBackend(), n_samples=0),
    lambda: Reader(CountingBackend(), stop=['STOP', '']),
    lambda: Reader(CountingBackend(), prompt='{contexts} only'),
    lambda: OracleSampler(QRELS, TEXTS, num_results=-1),
    lambda: OracleSampler(QRELS, TEXTS, labels='two'),
])
def test_settings_out_of_range_are_refused_where_given(make):
    from pyterrier_utility.errors import SettingError
    with pytest.raises(SettingError):
        make()


def test_negative_temperature_is_refused(gemma):
    from pyterrier_utility import backends
    from pyterrier_utility.errors import SettingError
    with pytest.raises(SettingError, match='temperature must be a number >= 0'):
        backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='g', temperature=-1)
    with pytest.raises(SettingError, match='top_k'):
        backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='g', top_k=-5)


def test_one_qid_with_two_questions_is_an_error_naming_it():
    from pyterrier_utility.errors import FrameError
    topics = pd.DataFrame({'qid': ['q1', 'q1', 'q2'], 'query': ['what is lift', 'what is drag', 'x']})
    with pytest.raises(FrameError, match=r"one qid with different queries: qid \['q1'\]"):
        Reader(CountingBackend())(topics)
    from pyterrier_utility import study as ex
    with pytest.raises(FrameError, match=r"qid \['q1'\]"):
        ex.run_study(topics, QRELS, {}, Reader(CountingBackend()), TEXTS, bertscore=None)


def test_ranks_given_as_strings_order_numerically_or_are_named():
    from pyterrier_utility.errors import FrameError
    backend = CountingBackend()
    rows = frame([('q1', 'lift', 'd1', 'ten', '10'), ('q1', 'lift', 'd2', 'two', '2')])
    Reader(backend)(rows)
    assert 'Context 1: two\nContext 2: ten\n' in backend.calls[0]
    with pytest.raises(FrameError, match=r"rank is not a number for qid \['q1'\]"):
        Reader(backend)(rows.assign(rank=['first', 'second']))


def test_missing_ids_are_named_and_a_placeholder_row_stands_only_alone():
    from pyterrier_utility.errors import FrameError
    with pytest.raises(FrameError, match=r'missing qid in rows \[1\]'):
        Reader(CountingBackend())(frame([('q1', 'lift', 'd1', 'one', 0), (None, 'lift', 'd2', 'two', 1)]))
    with pytest.raises(FrameError, match=r"rows without a docno next to documents for qid \['q1'\]"):
        Reader(CountingBackend())(frame([('q1', 'lift', 'd1', 'one', 0), ('q1', 'lift', None, None, 1)]))


def test_int_and_str_qids_are_one_query(minilm):
    qrels = QRELS.assign(qid=[1, 2])  # ints here, strings in the topics
    reader = Reader(CountingBackend())
    scorer = FBertScorer(qrels, TEXTS, model_type=minilm)
    out = (OracleSampler(qrels, TEXTS) % 1 >> reader >> UtilityEvaluator(reader, scorer))(
        pd.DataFrame({'qid': ['1', '2'], 'query': ['what is lift', 'what is drag']}))
    assert list(out['qid']) == ['1', '2'] and out['utility'].notna().all()


def test_a_reference_text_none_is_not_the_word_none(minilm):
    with pytest.warns(UserWarning, match=r"relevant docno \['d1'\] have no text"):
        scorer = FBertScorer(QRELS, {'d1': None, 'd2': 'drag slows aircraft'}, model_type=minilm)
    assert scorer.ref_texts['d1'] == ''
    assert scorer.score(['q1'], ['None'])[0] == 0.0


def test_a_label_set_with_no_relevant_document_stops_the_study_first():
    from pyterrier_utility import study as ex
    from pyterrier_utility.errors import SettingError
    backend = CountingBackend()
    with pytest.raises(SettingError, match=r'no topic has a relevant document at label>=99 .*labels \[2\]'):
        ex.run_study(pd.DataFrame({'qid': ['q1'], 'query': ['lift']}), QRELS, {'Rel': OracleSampler(QRELS, TEXTS)},
                     Reader(backend), TEXTS, label_sets=[99], bertscore=None)
    assert backend.calls == []


@pytest.mark.parametrize('argv,message', [
    (['--queries', '-1'], "argument --queries: must be an integer >= 0, got '-1'"),
    (['--temperature', '-1'], "argument --temperature: must be a number >= 0, got '-1'"),
    (['-k', '0'], 'argument -k: k must be an integer >= 1, got 0'),
    (['--labels', '99'],
     'error: label set label>=99: no document of cranfield has such a label (its labels are [0, 1, 2, 3, 4])'),
    (['--labels', '2,3'], 'error: label set label in {2,3} leaves out label [4] of cranfield'),
    (['--reader', 'bogus'], "error: unknown reader 'bogus'; choose from gemma3-270m, smollm2-135m, huggingface:MODEL"),
    (['--scorer', 'bogus'], "error: --scorer 'bogus' cannot be loaded"),
    (['--reader', 'gemma3-270m', '--concurrency', '4'],
     "error: the reader 'gemma3-270m' cannot honour concurrency (--concurrency)"),
    (['--systems', 'BM25', 'Dense'],
     "error: argument --systems: system must be one of ['BM25', 'Neural', 'Rel', 'NRel', 'COSMix'], got 'Dense'"),
    (['--correction', 'nonsense'], "error: argument --correction: invalid choice: 'nonsense'"),
])
def test_cli_errors_are_one_line_and_come_before_any_model_loads(argv, message, tmp_path, monkeypatch, capsys):
    import pyterrier_utility as pu
    from pyterrier_utility import cli

    def no_model(*a, **kw):
        raise AssertionError('a reader was loaded before the settings were checked')

    monkeypatch.setattr(pu.backends, 'get_backend', no_model)
    with pytest.raises(SystemExit) as e:
        cli.main(['study', '--out', str(tmp_path / 'out')] + argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and 'Traceback' not in err


def test_cli_out_pointing_at_a_file_is_named(tmp_path, capsys):
    from pyterrier_utility import cli
    (tmp_path / 'file').write_text('x')
    with pytest.raises(SystemExit):
        cli.main(['study', '--out', str(tmp_path / 'file')])
    assert f'error: --out {tmp_path / "file"} is a file, not a folder' in capsys.readouterr().err


def test_text_that_cannot_be_encoded_is_named_by_qid_and_docno():
    from pyterrier_utility._frames import check_encodable
    from pyterrier_utility.errors import FrameError
    fine = frame([('q1', 'lift', 'd1', 'one', 0)])
    check_encodable('Reader', fine)
    with pytest.raises(FrameError, match=r"Reader: text cannot be encoded as UTF-8 .* for qid q2 docno d7$"):
        check_encodable('Reader', frame([('q1', 'lift', 'd1', 'one', 0), ('q2', 'drag', 'd7', 'bad \ud800', 0)]))
    with pytest.raises(FrameError, match=r"Reader: query cannot be encoded as UTF-8 .* for qid q3$"):
        check_encodable('Reader', frame([('q3', '\udfff?', 'd1', 'one', 0), ('q3', '\udfff?', 'd2', 'two', 1)]))


def test_warnings_point_at_the_users_line_not_the_library():
    reader = Reader(CountingBackend())
    with pytest.warns(UserWarning, match='empty document text') as caught:
        reader(pd.DataFrame({'qid': ['q1'], 'query': ['lift'], 'docno': ['d1'], 'text': ['']}))
    assert {w.filename for w in caught} == {__file__}
