import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pandas.testing import assert_frame_equal
from pyterrier_rag.backend import Backend, BackendOutput
from scipy import stats as sps
from support.backends import FirstContextBackend
from support.simulated_server import SimulatedServer

import pyterrier_utility as pu
from pyterrier_utility import LLMRetEval, Reader, UtilityEvaluator
from pyterrier_utility.backends import OpenAICompatibleBackend
from pyterrier_utility.errors import SettingError
from pyterrier_utility.methods.reteval import MINILM_MATCH_THRESHOLD, failure_cases, recall_correlation

TEXTS = {'d1': 'Paris', 'd2': 'the capital is London', 'd3': 'Rome, maybe', 'd4': 'lift acts upward on a wing',
         'd5': 'Paris'}
QRELS = pd.DataFrame({'qid': ['q1', 'q1', 'q2', 'q3'], 'docno': ['d1', 'd2', 'd4', 'd3'], 'label': [2, 0, 2, 0]})
QUERIES = {'q1': 'capital of France?', 'q2': 'what is lift?', 'q3': 'anything?'}


class JudgeBackend(Backend):
    """Says Yes exactly when the candidate is one of the reference answers."""

    def __init__(self):
        super().__init__('judge')
        self.calls = []

    def generate(self, inps, **kw):
        self.calls.extend(inps)

        def same(p):
            refs = p.split('Reference answers:\n')[1].split('\nCandidate answer: ')[0].split('\n')
            cand = p.split('Candidate answer: ')[1].split('\n')[0]
            return 'Yes.' if f'- {cand}' in refs else 'No, it does not.'
        return [BackendOutput(text=same(p)) for p in inps]


def gold_echo():
    return Reader(FirstContextBackend(), n_samples=3)


def answered(reader, rows):
    frame = pd.DataFrame(rows, columns=['qid', 'docno'])
    frame['query'] = frame['qid'].map(QUERIES)
    frame['text'] = frame['docno'].map(TEXTS)
    frame['rank'] = frame.groupby('qid').cumcount()
    frame['score'] = 10.0 - frame['rank']
    return reader(frame)


def test_judge_sees_all_gold_answers_at_once_and_replies_stay_with_their_query():
    reteval = LLMRetEval(Reader(FirstContextBackend()), QRELS, TEXTS, judge=JudgeBackend(), gold_reader=gold_echo())
    # Two gold answers each: with one reply per (answer, gold) the second query read the first's reply.
    assert list(reteval.matches(['q1', 'q2'], ['A', 'D'], [['A', 'B'], ['C', 'D']])) == [1.0, 1.0]
    assert list(reteval.matches(['q1', 'q2'], ['B', 'E'], [['A', 'B'], ['C', 'D']])) == [1.0, 0.0]
    prompt = reteval.judge.backend.calls[0]
    assert 'Question: q1\nReference answers:\n- A\n- B\nCandidate answer: A\n' in prompt
    assert len(reteval.judge.backend.calls) == 4  # one judgement per answer


def test_judge_decides_match_with_gold_context_answers():
    backend = FirstContextBackend()
    reader = Reader(backend)
    judge = JudgeBackend()
    reteval = LLMRetEval(reader, QRELS, TEXTS, judge=judge, gold_reader=gold_echo())
    good = answered(reader, [('q1', 'd1'), ('q1', 'd3'), ('q2', 'd3'), ('q3', 'd2')])
    with pytest.warns(UserWarning, match='LLM-retEval is NaN.*qid q3'):
        out = reteval(good)
    per_query = out.drop_duplicates('qid').set_index('qid')
    assert per_query.loc['q1', 'reteval'] == 1.0 and per_query.loc['q1', 'gold_qanswer'] == 'Paris'
    assert per_query.loc['q1', 'gold_qanswers'] == ('Paris', 'Paris', 'Paris')
    assert per_query.loc['q2', 'reteval'] == 0.0 and per_query.loc['q2', 'gold_qanswer'] == 'lift acts upward on a wing'
    assert np.isnan(per_query.loc['q3', 'reteval'])
    assert len(judge.calls) == 2
    # The gold context: relevant documents, as many as were retrieved (q1: d1 of its two).
    gold_prompt = Reader(FirstContextBackend()).prompter.build_prompt(QUERIES['q1'], ['Paris'])
    assert reteval.gold_reader.cache.backend.calls[0] == gold_prompt


def test_gold_answers_are_sampled_three_times_at_temperature_half_by_default():
    with SimulatedServer() as server:
        backend = OpenAICompatibleBackend('sim', server.url, temperature=0.3, max_new_tokens=8)
        reader = Reader(backend, seed=7)
        reteval = LLMRetEval(reader, QRELS, TEXTS, judge=JudgeBackend())
        out = reteval(answered(reader, [('q2', 'd3')]))
    sent = [(b['temperature'], b['seed'], 'lift acts upward' in b['prompt']) for b in server.bodies]
    assert sorted(sent) == [(0.3, 7, False), (0.5, 7, True), (0.5, 8, True), (0.5, 9, True)]
    assert len(out['gold_qanswers'].iloc[0]) == 3
    assert repr(reteval).endswith('gold 3 samples)')


def test_a_backend_that_cannot_change_temperature_needs_a_gold_reader():
    with pytest.raises(SettingError, match='give gold_reader='):
        LLMRetEval(Reader(FirstContextBackend()), QRELS, TEXTS, judge=JudgeBackend())


def test_every_sample_is_judged_as_text_and_reteval_is_their_mean(minilm):
    from support.backends import CountingBackend
    reader = Reader(CountingBackend(), n_samples=2)
    judge = JudgeBackend()
    # The gold reader answers like the retrieved one's sample 1 only: q1's sample 1 matches, sample 0 not.
    gold = Reader(type('One', (CountingBackend,), {})(), n_samples=1, seed=1)
    reteval = LLMRetEval(reader, QRELS, TEXTS, judge=judge, gold_reader=gold, k=1)
    evaluate = UtilityEvaluator(reader, pu.FBertScorer(QRELS, TEXTS, model_type=minilm))
    pipeline_out = (pt.Transformer.from_df(pd.DataFrame({
        'qid': ['q1'], 'query': [QUERIES['q1']], 'docno': ['d1'], 'text': ['Paris'], 'rank': [0]})) >> reader
        >> evaluate >> reteval)(pd.DataFrame({'qid': ['q1'], 'query': [QUERIES['q1']]}))
    assert pipeline_out['reteval'].iloc[0] == 0.5
    assert not [c for c in judge.calls if "('" in c]  # answers are judged as text, never as tuples
    candidates = sorted(c.split('Candidate answer: ')[1].split('\n')[0] for c in judge.calls)
    assert candidates == ['Paris (seed 0, 1 contexts)', 'Paris (seed 1, 1 contexts)']
    # Straight from the reader (rows per sample), the same value.
    straight = reteval(reader(pd.DataFrame({'qid': ['q1'], 'query': [QUERIES['q1']], 'docno': ['d1'],
                                            'text': ['Paris'], 'rank': [0]})))
    assert set(straight['reteval']) == {0.5}


def test_a_query_with_nothing_retrieved_is_judged_not_declared_without_relevant_documents():
    reader = Reader(FirstContextBackend())
    reteval = LLMRetEval(reader, QRELS, TEXTS, judge=JudgeBackend(), gold_reader=gold_echo())
    rows = pd.DataFrame({'qid': ['q1'], 'query': [QUERIES['q1']], 'docno': [None], 'text': [None], 'rank': [0]})
    with pytest.warns(UserWarning, match='no document retrieved'):
        out = reteval(reader(rows))
    assert out['reteval'].iloc[0] == 0.0  # 'unknown' (0-shot) against 'Paris' (gold context of one document)


def test_over_long_gold_context_is_truncated_evenly_keeping_instructions():
    from test_edge_cases import WordTokenizer
    backend = FirstContextBackend()
    backend.tokenizer = WordTokenizer()
    gold = Reader(backend, prompt='Read. {contexts}\nQ: {query}', context_format='C{i}: {text}', max_prompt_tokens=9)
    texts = dict(TEXTS, d4=' '.join(f'w{i}' for i in range(40)))
    reteval = LLMRetEval(Reader(FirstContextBackend()), QRELS, texts, judge=JudgeBackend(), gold_reader=gold)
    with pytest.warns(UserWarning, match='truncated evenly'):
        reteval.gold_answers(pd.DataFrame({'qid': ['q2'], 'query': [QUERIES['q2']]}), {'q2': 1})
    assert backend.calls[0].startswith('Read. C1: w0') and backend.calls[0].endswith('\nQ: what is lift?')


def test_bertscore_threshold_match(minilm):
    reader = Reader(FirstContextBackend())
    reteval = LLMRetEval(reader, QRELS, TEXTS, bertscore=minilm, threshold=0.99, gold_reader=gold_echo())
    out = reteval(answered(reader, [('q1', 'd5'), ('q2', 'd2')])).set_index('qid')
    assert out.loc['q1', 'reteval'] == 1.0  # 'Paris' from an unjudged copy of the gold document
    f1 = minilm.f1_matrix(['the capital is London'], ['lift acts upward on a wing'])[0, 0]
    assert f1 < 0.99 and out.loc['q2', 'reteval'] == 0.0


#: Hand-made answer pairs the default BERTScore threshold is calibrated on (offline MiniLM-L6).
MATCHING = [('Paris', 'The capital of France is Paris.'), ('Tulsa, Oklahoma', 'Tulsa, Oklahoma'),
            ('Peter Hansen', 'Peter Hansen played him.'),
            ('the boundary layer separates', 'separation of the boundary layer'), ('1969', 'It happened in 1969.'),
            ('lift is the upward force on a wing', 'the upward force acting on a wing is called lift'),
            ('Nigeria', 'Nigeria'), ('drag increases with speed', 'drag grows as speed increases'),
            ('the heat transfer rate rises with Mach number', 'heat transfer increases with the Mach number'),
            ('George Washington', 'The first president was George Washington.'),
            ('about 300 km', 'roughly 300 kilometres'),
            ('Shakespeare wrote Hamlet', 'Hamlet was written by William Shakespeare'),
            ('a weather advisory for aircraft', 'a sigmet is a weather advisory that concerns the safety of aircraft'),
            ('the Pacific Ocean', 'Pacific Ocean'),
            ('by conduction through the slab', 'heat is conducted through the slab')]
DIFFERENT = [('Nigeria, delta basin', 'Nigeria, Horn of Africa'), ('Paris', 'London'), ('1969', '1945'),
             ('Peter Hansen', 'Ross Elliott'), ('lift is the upward force on a wing', 'drag slows an aircraft down'),
             ('the boundary layer separates', 'the shock wave is attached to the nose'),
             ('George Washington', 'Abraham Lincoln'),
             ('the Pacific Ocean', 'the Atlantic Ocean'), ('Shakespeare wrote Hamlet', 'Marlowe wrote Doctor Faustus'),
             ('a weather advisory for aircraft', 'a person in a state of hypnosis'),
             ('heat transfer rises with Mach number', 'heat transfer falls with Mach number'),
             ('Tulsa, Oklahoma', 'Austin, Texas'),
             ('about 300 km', 'about 3 metres'), ('by conduction through the slab', 'by radiation from the surface'),
             ('the wing stalls at high angles of attack', 'the engine overheats at high altitude')]


def test_the_default_threshold_is_the_best_on_the_calibration_pairs(minilm):
    same = np.array([minilm.f1_matrix([a], [b])[0, 0] for a, b in MATCHING])
    other = np.array([minilm.f1_matrix([a], [b])[0, 0] for a, b in DIFFERENT])
    def right(t):
        return int((same >= t).sum() + (other < t).sum())
    assert right(MINILM_MATCH_THRESHOLD) == 28 == max(right(t) for t in np.arange(0.3, 1.0, 0.005))
    assert other[0] < MINILM_MATCH_THRESHOLD  # the paper's own mismatch
    assert right(0.5) == 25  # the threshold the notebook once used let 5 pairs through wrongly


def test_reteval_measure_and_the_papers_failure_cases_through_the_pipeline():
    reader = Reader(FirstContextBackend())
    reteval = LLMRetEval(reader, QRELS, TEXTS, judge=JudgeBackend(), gold_reader=gold_echo())
    # q1 misses its gold document d1 yet answers 'Paris' (from d5); q2 finds d4 yet answers from d3 first.
    out = reteval(answered(reader, [('q1', 'd5'), ('q1', 'd3'), ('q2', 'd3'), ('q2', 'd4')]))
    topics = pd.DataFrame({'qid': ['q1', 'q2'], 'query': [QUERIES['q1'], QUERIES['q2']]})
    res = pt.Experiment([pt.Transformer.from_df(out)], topics, QRELS, [pu.RetEval], names=['s'])
    assert res['RetEval'][0] == pytest.approx(0.5)
    table = failure_cases(out, QRELS, k=2).set_index('qid')
    assert table.loc['q1', 'R@2'] == 0.0 and table.loc['q1', 'reteval'] == 1.0
    assert table.loc['q2', 'R@2'] == 1.0 and table.loc['q2', 'reteval'] == 0.0
    assert list(table['disagree']) == [1.0, 1.0]
    assert table[['correct', 'recall_case', 'reteval_case']].isna().all().all()  # unknown without correct=
    gold_answers = {'q1': 'Paris', 'q2': 'lift acts upward on a wing'}
    judged = failure_cases(out, QRELS, k=2, correct=lambda q, a: a == gold_answers[q]).set_index('qid')
    assert cases(judged, 'recall_case') == ['A/B', 'C'] and judged['reteval_case'].isna().all()
    assert list(judged['correct']) == [1.0, 0.0] and list(judged['gold_correct']) == [1.0, 1.0]
    # Had only q2's answer from d3 been right, Recall@k would be right on both, and LLM-retEval wrong on both
    # with wrong gold answers (case D): q1's wrong answer matched them, q2's right one did not.
    wrong_gold = failure_cases(out, QRELS, k=2, correct=lambda q, a: q == 'q2' and a == 'Rome, maybe')
    assert cases(wrong_gold, 'recall_case') == [None, None] and cases(wrong_gold, 'reteval_case') == ['D', 'D']


def cases(table, column):
    """A case column as a list, None where the query has no case."""
    return [c if isinstance(c, str) else None for c in table[column]]


def llm_reteval_output(rows):
    """A hand-made LLMRetEval output: per query, its ranking, its verdict, its answer and gold answers."""
    return pd.DataFrame([{'qid': q, 'docno': d, 'rank': r, 'reteval': m, 'qanswer': a, 'gold_qanswers': g}
                         for q, docs, m, a, g in rows for r, d in enumerate(docs)])


#: The issue's example, at k = 2 (gold documents g1..g4; the right answer to every query is 'yes'):
#: q1 retrieved its gold document and matched, but its answer is wrong; q2 missed, no match, right answer;
#: q3 retrieved, matched, right answer; q4 missed, matched, right answer.
EXAMPLE = llm_reteval_output([('q1', ['g1', 'x'], 1.0, 'no', ('yes', 'no')),
                              ('q2', ['x', 'y'], 0.0, 'yes', ('yes',)),
                              ('q3', ['y', 'g3'], 1.0, 'yes', ('yes',)),
                              ('q4', ['x', 'z'], 1.0, 'yes', ('yes', 'yes'))])
EXAMPLE_QRELS = pd.DataFrame({'qid': ['q1', 'q2', 'q3', 'q4'], 'docno': ['g1', 'g2', 'g3', 'g4'], 'label': 2})


def test_failures_are_counted_against_answer_correctness_on_every_query():
    table = failure_cases(EXAMPLE, EXAMPLE_QRELS, k=2, correct=lambda q, a: a == 'yes')
    expected = pd.DataFrame({'qid': ['q1', 'q2', 'q3', 'q4'], 'R@2': [1.0, 0.0, 1.0, 0.0],
                             'reteval': [1.0, 0.0, 1.0, 1.0], 'disagree': [0.0, 0.0, 0.0, 1.0],
                             'correct': [0.0, 1.0, 1.0, 1.0],
                             'gold_correct': [0.5, 1.0, 1.0, 1.0], 'recall_case': ['C', 'A/B', None, 'A/B'],
                             # q1: a wrong answer matched gold answers one of which is wrong too.
                             'reteval_case': ['D', 'E/F', None, None]})
    assert_frame_equal(table, expected)
    assert table['recall_case'].notna().sum() == 3 and table['reteval_case'].notna().sum() == 2


@pytest.mark.parametrize('hit, matched, right, gold, recall_case, reteval_case', [
    (True, True, True, ('yes',), None, None),
    (False, False, False, ('yes',), None, None),
    (True, False, False, ('yes',), 'C', None),           # distracted: LLM-retEval right, Recall wrong
    (False, True, True, ('yes',), 'A/B', None),          # answered from an unlabelled document
    (True, True, False, ('yes', 'yes'), 'C', 'F'),       # a wrong answer matched right gold answers
    (True, True, False, ('no',), 'C', 'D'),              # wrong gold answers, matched by a wrong answer
    (True, False, True, ('yes', 'no'), None, 'E/F'),     # a right gold answer, yet no match
    (True, False, True, ('no', 'no'), None, 'D'),        # no right gold answer to match
    (False, False, True, ('no',), 'A/B', 'D'),
    (False, True, False, ('no',), None, 'D'),
])
def test_each_failure_case(hit, matched, right, gold, recall_case, reteval_case):
    frame = llm_reteval_output([('q1', ['g1' if hit else 'x'], float(matched), 'yes' if right else 'no', gold)])
    table = failure_cases(frame, EXAMPLE_QRELS, k=1, correct=lambda q, a: a == 'yes')
    assert (cases(table, 'recall_case'), cases(table, 'reteval_case')) == ([recall_case], [reteval_case])


def test_the_majority_of_samples_decides_correctness_and_unjudged_queries_get_no_case():
    frame = pd.concat([llm_reteval_output([('q1', ['g1'], 0.5, a, ('yes',))]).assign(sample=s)
                       for s, a in enumerate(['yes', 'no', 'yes'])], ignore_index=True)
    unjudged = [('q2', ['x'], np.nan, 'yes', np.nan), ('q9', ['x'], 1.0, 'yes', ('yes',))]
    nan = llm_reteval_output(unjudged).assign(sample=0)
    table = failure_cases(pd.concat([frame, nan], ignore_index=True), EXAMPLE_QRELS, k=1,
                          correct=lambda q, a: a == 'yes').set_index('qid')
    assert table.loc['q1', 'correct'] == pytest.approx(2 / 3) and pd.isna(table.loc['q1', 'reteval_case'])
    assert np.isnan(table.loc['q9', 'R@1']) and pd.isna(table.loc['q9', 'recall_case'])  # no gold document
    assert pd.isna(table.loc['q2', 'reteval_case']) and np.isnan(table.loc['q2', 'disagree'])


def test_recall_correlation_is_scipys_spearman_on_all_and_on_queries_without_a_recall_failure():
    rows = [('q1', ['g1'], 1.0, 'yes', ('yes',)), ('q2', ['x'], 1.0, 'yes', ('yes',)),
            ('q3', ['g3'], 0.0, 'no', ('yes',)), ('q4', ['x'], 0.0, 'no', ('yes',)),
            ('q5', ['g5'], 1.0, 'yes', ('yes',)),
            ('q6', ['x'], 1.0, 'no', ('yes',)), ('q7', ['g7'], 0.0, 'yes', ('no',))]
    qrels = pd.DataFrame({'qid': [f'q{i}' for i in range(1, 8)], 'docno': [f'g{i}' for i in range(1, 8)], 'label': 2})
    table = failure_cases(llm_reteval_output(rows), qrels, k=1, correct=lambda q, a: a == 'yes')
    assert cases(table, 'recall_case') == [None, 'A/B', 'C', None, None, None, None]
    assert cases(table, 'reteval_case') == [None, None, None, None, None, 'F', 'D']
    out = recall_correlation(table)
    assert out['all'] == pytest.approx(sps.spearmanr(table['R@1'], table['reteval'])[0]) and out['all_n'] == 7
    refined = table.drop(index=[1, 2])  # the Recall failures, not the LLM-retEval ones
    assert out['refined'] == pytest.approx(sps.spearmanr(refined['R@1'], refined['reteval'])[0])
    assert out['refined_n'] == 5
    unjudged = recall_correlation(failure_cases(llm_reteval_output(rows), qrels, k=1))
    assert unjudged['all'] == out['all'] and np.isnan(unjudged['refined']) and unjudged['refined_n'] == 0


def test_needs_a_way_to_match():
    with pytest.raises(SettingError, match='judge backend or a bertscore'):
        LLMRetEval(Reader(FirstContextBackend()), QRELS, TEXTS)
