"""TREC RAG's nugget recall as answer quality (:mod:`pyterrier_utility.scoring.nuggets`): nuggets made from
the relevant documents by a judge, ten documents a prompt, or read from a nugget file in the track's JSONL;
each labelled vital or okay and each answer's support of each assigned by the judge; the track's four
scores, checked against a computation written here; every reply that does not parse a NaN with a warning
naming its queries; the nuggets and assignments written into the study's folder and read back."""
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from pyterrier_rag.backend import Backend, BackendOutput
from support.folders import TOPICS

from pyterrier_utility import GenerationCache
from pyterrier_utility.errors import SettingError
from pyterrier_utility.scoring.nuggets import (
    ASSIGNMENT_PROMPT,
    CREATOR_PROMPT,
    IMPORTANCE,
    IMPORTANCE_PROMPT,
    Nugget,
    NuggetScorer,
    nugget_scores,
    parse_list,
    read_nuggets,
)


def track_scores(importance, assignment):
    """The track's scores, written here as nuggetizer's ``calculate_nugget_scores`` counts them (NaN, not
    its 0, over no nugget)."""
    vital = [a for i, a in zip(importance, assignment) if i == 'vital']

    def score(labels, partial):
        if not labels:
            return float('nan')
        return (labels.count('support') + partial * labels.count('partial_support')) / len(labels)
    return {'all': score(list(assignment), 0.5), 'all_strict': score(list(assignment), 0),
            'vital': score(vital, 0.5), 'vital_strict': score(vital, 0)}


@pytest.mark.parametrize('reply, allowed, length, parsed', [
    ('["a", "b"]', None, None, ['a', 'b']),
    ('```python\n["a"]\n```', None, None, ['a']),
    (" ['Vital', 'okay']", IMPORTANCE, 2, ['vital', 'okay']),
    ("['vital']", IMPORTANCE, 2, None),  # too few
    ("['vital', 'good']", IMPORTANCE, 2, None),  # not a label
    ('["a", 3]', None, None, None), ('["a", " "]', None, None, None), ('a, b', None, None, None),
    ('{"a": 1}', None, None, None), ('', None, None, None), ('["a"] and more', None, None, None),
])
def test_a_reply_is_a_python_list_of_the_asked_labels_and_length_or_none(reply, allowed, length, parsed):
    assert parse_list(reply, allowed, length) == parsed


@pytest.mark.parametrize('importance, assignment', [
    (['vital', 'okay', 'vital', 'okay'], ['support', 'partial_support', 'partial_support', 'not_support']),
    (['okay', 'okay'], ['support', 'partial_support']),
    (['vital'] * 3, ['not_support'] * 3),
])
def test_the_four_scores_are_the_tracks(importance, assignment):
    assert nugget_scores(importance, assignment) == pytest.approx(track_scores(importance, assignment), nan_ok=True)


class NuggetJudge(Backend):
    """A greedy judge replying to the three prompts as the test says, counting its prompts."""
    deterministic = True

    def __init__(self, created, labels, support):
        super().__init__('nugget-judge')
        self.created, self.labels, self.support = created, labels, support
        self.calls = []

    def generate(self, inps, **kw):
        self.calls.extend(inps)
        return [BackendOutput(text=self.reply(p)) for p in inps]

    def reply(self, prompt):
        query = prompt.split('Search Query: ')[1].split('\n')[0]
        if prompt.startswith('You are NuggetizeLLM'):
            return self.created(query, prompt)
        if prompt.startswith('You are NuggetizeScoreLLM'):
            return self.labels(query, eval(prompt.split('Nugget List: ')[1].split('\n')[0]))
        passage = prompt.split('Passage: ')[1].split('\nNugget List: ')[0]
        return self.support(query, passage, eval(prompt.split('Nugget List: ')[1].split('\n')[0]))


def test_nuggets_are_made_ten_documents_a_prompt_labelled_ten_a_prompt_and_the_vital_kept_first(tmp_path):
    documents = {'q1': [f'document {i}' for i in range(12)]}
    # Ten nuggets from the first window; thirteen once the second is read.
    created = lambda query, prompt: repr([f'fact {i}' for i in range(10 if 'List Length: 0' in prompt else 13)])  # noqa: E731
    labels = lambda query, nuggets: repr(['vital' if n.endswith(('1', '3')) else 'okay' for n in nuggets])  # noqa: E731
    judge = NuggetJudge(created, labels, lambda query, passage, nuggets: repr(['support'] * len(nuggets)))
    scorer = NuggetScorer(GenerationCache(judge, tmp_path / 'judge.sqlite'), TOPICS, documents, quality='nuggets-all')
    nuggets = scorer.nuggets_of(['q1'])['q1']
    creation = [p for p in judge.calls if p.startswith('You are NuggetizeLLM')]
    # Two prompts: documents 1-10, then 11-12 with the first reply's ten nuggets as the initial list.
    assert len(creation) == 2 and '[10] document 9' in creation[0] and '[11]' not in creation[0]
    assert '[1] document 10\n[2] document 11\nSearch Query' in creation[1]
    assert "Initial Nugget List: []\nInitial Nugget List Length: 0" in creation[0]
    assert "Initial Nugget List Length: 10" in creation[1] and "'fact 9']" in creation[1]
    assert creation[0] == CREATOR_PROMPT.format(query=TOPICS['q1'], max_nuggets=30, nuggets=[], nuggets_length=0,
                                                context='\n'.join(f'[{i + 1}] document {i}' for i in range(10)))
    # Thirteen nuggets labelled in two prompts of ten and three; vital first, in order.
    labelling = [p for p in judge.calls if p.startswith('You are NuggetizeScoreLLM')]
    assert sorted(p.split('label each of the ')[1].split(' ')[0] for p in labelling) == ['10', '3']
    assert [n.text for n in nuggets[:4]] == ['fact 1', 'fact 3', 'fact 11', 'fact 0']
    assert [n.importance for n in nuggets] == ['vital'] * 3 + ['okay'] * 10
    assert scorer.score_with_reference(['q1'], ['an answer'])[0].tolist() == [1.0]
    assert len([p for p in judge.calls if p.startswith('You are NuggetizeAssignerLLM')]) == 2


def test_each_reply_that_does_not_parse_is_nan_with_a_warning_naming_its_query_and_nothing_is_asked_again(tmp_path):
    topics = dict(TOPICS, q3='what is a slab', q4='what is a boundary layer', q5='what is heat')
    documents = {q: [f'text of {q}'] for q in ('q1', 'q2', 'q3', 'q4')}
    created = {'q1': "['lift is caused by pressure', 'wings lift']", 'q2': 'there are none', 'q3': "['slabs']",
               'q4': "['layers thicken']"}
    labels = {'q1': "['vital', 'okay']", 'q3': "['vital', 'okay']", 'q4': "['okay']"}  # q3: two labels for one
    support = {'lift': "['support', 'partial_support']", 'none': "['not_support']", 'bad': 'support',
               'thick': "['support']"}
    judge = NuggetJudge(lambda q, p: created[[k for k, t in topics.items() if t == q][0]],
                        lambda q, n: labels[[k for k, t in topics.items() if t == q][0]],
                        lambda q, passage, n: support[passage])
    path = tmp_path / 'judge.sqlite'
    scorer = NuggetScorer(GenerationCache(judge, path), topics, documents, quality='nuggets-vital-strict')
    qids = ['q1', 'q1', 'q1', 'q2', 'q3', 'q4', 'q5']
    answers = ['lift', 'bad', 'lift', 'lift', 'lift', 'thick', 'lift']
    with pytest.warns(UserWarning) as caught:
        scores = scorer.score_with_reference(qids, answers)[0]
    assert scores[0] == scores[2] == 1.0 and np.isnan(scores[1:2]).all() and np.isnan(scores[3:]).all()
    assert sorted(str(w.message) for w in caught) == [
        'NuggetV_strict is NaN (no relevant documents to make nuggets from): qid q5',
        'NuggetV_strict is NaN (no vital nugget): qid q4',
        'the judge did not label each nugget vital or okay: NuggetV_strict is NaN: qid q3',
        'the judge gave no list of nuggets: NuggetV_strict is NaN: qid q2',
        'the judge gave no support label to each nugget of an answer: NuggetV_strict is NaN: qid q1']
    # One creation and one labelling per query, one assignment per distinct (query, answer).
    assert len(judge.calls) == 4 + 3 + 3
    assert ASSIGNMENT_PROMPT.format(query=TOPICS['q1'], context='lift', num_nuggets=2,
                                    nuggets=['lift is caused by pressure', 'wings lift']) in judge.calls
    assert IMPORTANCE_PROMPT.format(query=TOPICS['q1'], num_nuggets=2,
                                    nuggets=['lift is caused by pressure', 'wings lift']) in judge.calls
    nuggets, assignments = scorer.frames()
    assert nuggets[['qid', 'nugget', 'text', 'importance']].values.tolist() == [
        ['q1', 1, 'lift is caused by pressure', 'vital'], ['q1', 2, 'wings lift', 'okay'],
        ['q4', 1, 'layers thicken', 'okay']]
    assert assignments[['qid', 'qanswer', 'nugget', 'assignment']].values.tolist() == [
        ['q1', 'lift', 1, 'support'], ['q1', 'lift', 2, 'partial_support'], ['q4', 'thick', 1, 'support']]
    # Built again on the same cache, it asks nothing.
    again = NuggetJudge(*(lambda *a: pytest.fail('asked again'),) * 3)
    rebuilt = NuggetScorer(GenerationCache(again, path), topics, documents, quality='nuggets-all')
    with pytest.warns(UserWarning):
        assert rebuilt.score_with_reference(qids, answers)[0][0] == pytest.approx(0.75)
    assert again.calls == []


def test_a_nugget_file_is_read_in_the_tracks_format_and_a_faulty_line_is_refused_naming_file_and_line(tmp_path):
    path = tmp_path / 'nuggets.jsonl'
    path.write_text(json.dumps({'qid': 'q1', 'query': 'what causes wing lift', 'nuggets': [
        {'text': 'lift is caused by pressure', 'importance': 'vital'}, {'text': 'wings lift'}]}) + '\n\n'
        + json.dumps({'qid': 2, 'nuggets': [{'text': 'mach one', 'importance': 'Okay'}]}) + '\n')
    assert read_nuggets(path) == {None: {'q1': [Nugget('lift is caused by pressure', 'vital'), Nugget('wings lift')],
                                         '2': [Nugget('mach one', 'okay')]}}
    for line, why in (('{"qid": "q1"', 'not JSON'), ('{"qid": "q1", "nuggets": {}}', 'a list of "nuggets"'),
                      ('{"nuggets": []}', 'with a "qid"'), ('{"qid": "q1", "nuggets": [{"text": ""}]}', 'non-empty'),
                      ('{"qid": "q1", "nuggets": [{"text": "a", "importance": "high"}]}', "importance 'high'"),
                      ('{"qid": "q1", "nuggets": []}', 'qid q1 has nuggets on an earlier line')):
        faulty = tmp_path / 'faulty.jsonl'
        faulty.write_text('{"qid": "q1", "nuggets": []}\n' + line + '\n')
        with pytest.raises(SettingError, match=f'{faulty}, line 2: .*{why}'):
            read_nuggets(faulty)
    with pytest.raises(SettingError, match='the nugget file .*missing.jsonl does not exist'):
        read_nuggets(tmp_path / 'missing.jsonl')


def test_given_nuggets_are_not_made_again_and_those_without_importance_are_labelled(tmp_path):
    judge = NuggetJudge(lambda q, p: pytest.fail('made'), lambda q, n: repr(['okay'] * len(n)),
                        lambda q, passage, n: repr(['support'] * len(n)))
    scorer = NuggetScorer(judge, TOPICS, {'q1': ['a document']}, quality='nuggets-all-strict',
                          nuggets={'q1': [Nugget('lift', 'vital'), Nugget('pressure')]})
    assert scorer.score_with_reference(['q1'], ['lift'])[0].tolist() == [1.0]
    assert [n.importance for n in scorer.nuggets_of(['q1'])['q1']] == ['vital', 'okay']
    assert sum(p.startswith('You are NuggetizeScoreLLM') for p in judge.calls) == 1
    with pytest.raises(SettingError, match="NuggetScorer: quality must be one of"):
        NuggetScorer(judge, TOPICS, quality='judge-docs')


def nugget_study_judge():
    """The study's judge: q1's nuggets from its relevant document, q2's reply no list; an answer supports
    the vital nugget where it says 'pressure', the okay one partially where it says 'wing'."""
    return NuggetJudge(
        lambda query, prompt: "['lift is caused by pressure', 'wings lift']" if 'lift' in query else 'none',
        lambda query, nuggets: repr(['vital', 'okay'][:len(nuggets)]),
        lambda query, passage, nuggets: repr([('support' if 'pressure' in passage else 'not_support'),
                                              ('partial_support' if 'wing' in passage else 'not_support')]))


def test_a_study_scored_by_nuggets_writes_them_and_their_assignments_and_reads_its_own_nugget_file_back(
        small_folder, tmp_path, monkeypatch, capsys):
    from support.backends import CountingBackend

    import pyterrier_utility as pu
    from pyterrier_utility import cli
    built = {}
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: built.setdefault(
        spec, nugget_study_judge() if spec == 'smollm2-135m' else CountingBackend()))
    out = tmp_path / 'study'
    args = ['study', '--dataset', small_folder, '--quality', 'nuggets-all', '--judge', 'smollm2-135m', '--queries',
            '0', '-k', '1', '--systems', 'Rel', '--labels', '2', '--samples', '1', '--utility', 'absolute']
    with pytest.warns(UserWarning, match='the judge gave no list of nuggets: NuggetA is NaN: qid q2'):
        assert cli.main(args + ['--out', str(out)]) == 0
    assert (json.loads((out / 'settings.json').read_text())['quality'], built.keys()) == (
        'nuggets-all', {'gemma3-270m', 'smollm2-135m'})
    written = [json.loads(line) for line in (out / 'nuggets.jsonl').read_text().splitlines()]
    assert written == [{'labels': 'label>=2', 'qid': 'q1', 'query': TOPICS['q1'], 'nuggets': [
        {'text': 'lift is caused by pressure', 'importance': 'vital'}, {'text': 'wings lift', 'importance': 'okay'}]}]
    assignments = pd.read_csv(out / 'nugget_assignments.csv', dtype={'qid': str})
    answers = pd.read_csv(out / 'answers.csv', dtype={'qid': str}, keep_default_na=False)
    per_query = pd.read_csv(out / 'per_query.csv', dtype={'qid': str}).set_index('qid')
    # Each P read here from the assignments written, by the track's formula.
    for system, column in (('0-shot', 'quality_0shot'), ('Rel', 'quality')):
        answer = answers[(answers['system'] == system) & (answers['qid'] == 'q1')]['qanswer'].iloc[0]
        labels = assignments[assignments['qanswer'] == answer].sort_values('nugget')['assignment'].tolist()
        assert per_query.loc['q1', column] == pytest.approx(track_scores(['vital', 'okay'], labels)['all'])
    assert per_query.loc['q1', 'quality'] == pytest.approx(0.75) and np.isnan(per_query.loc['q2', 'quality'])
    table = (out / 'table1.md').read_text()
    assert '| k | 0-shot NuggetA | Rel |' in table and 'FBERT' not in table
    # The study's own nugget file read back: nothing made or labelled again, the same P.
    judge = built['smollm2-135m'] = nugget_study_judge()
    again = tmp_path / 'again'
    given = out / 'nuggets.jsonl'
    with pytest.warns(UserWarning, match=rf'NuggetA is NaN \(the nugget file {given} has none for it\): qid q2'):
        assert cli.main(args + ['--nuggets', str(out / 'nuggets.jsonl'), '--out', str(again)]) == 0
    assert not any(p.startswith(('You are NuggetizeLLM', 'You are NuggetizeScoreLLM')) for p in judge.calls)
    assert pd.read_csv(again / 'per_query.csv', dtype={'qid': str})['quality'].tolist() == pytest.approx(
        per_query['quality'].tolist(), nan_ok=True)
    with pytest.raises(SystemExit):
        cli.main(['study', '--dataset', small_folder, '--nuggets', str(given), '--out', str(again)])
    assert 'nuggets are those of a quality scored by nuggets, not of quality' in capsys.readouterr().err


@pytest.mark.slow
def test_the_offline_gemma_assigns_given_nuggets_through_the_cache_and_p_is_what_its_replies_give(tmp_path):
    import ast

    from pyterrier_utility import backends
    path = tmp_path / 'judge.sqlite'
    given = {'q1': [Nugget('lift is caused by pressure', 'vital'), Nugget('wings make lift', 'okay')]}
    answers = ['the wing lift is caused by pressure', 'I do not know']

    def scorer(backend):
        return NuggetScorer(GenerationCache(backend, path), TOPICS, nuggets=given, quality='nuggets-all')
    gemma = backends.get_backend('gemma3-270m')
    first = scorer(gemma)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # an offline reply that gives no labels is NaN, warned
        scores = first.score_with_reference(['q1', 'q1'], answers)[0]
    replies = first.assigner.replies([dict(query=TOPICS['q1'], context=a, num_nuggets=2,
                                           nuggets=[n.text for n in given['q1']]) for a in answers])
    assert first.assigner.cache.generated == 2  # the two answers' prompts, each asked once

    def independent(reply):
        try:
            labels = ast.literal_eval(reply.strip())
            credit = [{'support': 1, 'partial_support': 0.5, 'not_support': 0}[x.strip().lower()] for x in labels]
        except (ValueError, SyntaxError, KeyError, AttributeError, TypeError):
            return float('nan')
        return sum(credit) / 2 if len(credit) == 2 else float('nan')
    assert scores.tolist() == pytest.approx([independent(r) for r in replies], nan_ok=True)
    again = scorer(gemma)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        assert again.score_with_reference(['q1', 'q1'], answers)[0].tolist() == pytest.approx(scores.tolist(),
                                                                                             nan_ok=True)
    assert again.assigner.cache.generated == 0
