"""GoldAnswerScorer: EM and token F1 equal pyterrier-rag's, BERTScore against gold answers equals
bert_score's, and gold answers read from every shape they come in."""
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bert_score import BERTScorer
from pyterrier_rag._measures import ems, f1_score

from pyterrier_utility import GoldAnswerScorer
from pyterrier_utility.errors import SettingError
from pyterrier_utility.rerankers import minilm_path
from pyterrier_utility.scoring.gold import exact_match, gold_answers, normalize_answer, token_f1

GOLD = {'q1': ['Paris', 'the city of Paris'], 'q2': ['yes'], 'q3': ['Mach 2.5', 'two and a half']}
ANSWERS = [('q1', 'Paris.'), ('q1', 'It is the city of Paris, France'), ('q1', 'London'), ('q2', 'Yes!'),
           ('q2', 'no'), ('q3', 'about mach 2.5'), ('q3', 'An answer: two and a half times'), ('q3', ''),
           ('q1', 'The  PARIS')]


def test_normalisation_is_squads():
    assert normalize_answer('The  Cat, an  (apple)!') == 'cat apple'
    assert normalize_answer('A theory of a thing') == 'theory of thing'


def test_em_and_f1_equal_pyterrier_rag_and_hand_computed_values():
    qids, answers = zip(*ANSWERS)
    em = GoldAnswerScorer(GOLD, 'em')
    f1 = GoldAnswerScorer(GOLD, 'f1')
    with pytest.warns(UserWarning, match='empty answer scored EM 0: qid q3'):
        em_scores = em.score(qids, answers)
    with pytest.warns(UserWarning, match='empty answer scored F1 0: qid q3'):
        f1_scores = f1.score(qids, answers)
    assert em_scores.tolist() == [ems(a, GOLD[q]) for q, a in ANSWERS]
    assert f1_scores.tolist() == [max(f1_score(a, g) for g in GOLD[q]) for q, a in ANSWERS]
    assert em_scores.tolist() == [1.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    # 'it is city of paris france' against 'city of paris': P 3/6, R 3/3 -> 2/3; 'about mach 25'
    # against 'mach 25': P 2/3, R 1 -> 0.8; 'answer two and half times' against 'two and half':
    # P 3/5, R 1 -> 0.75; 'no' against 'yes' is 0 by HotpotQA's rule.
    assert f1_scores.tolist() == pytest.approx([1.0, 2 / 3, 0.0, 1.0, 0.0, 0.8, 0.75, 0.0, 1.0], abs=1e-12)
    assert [token_f1('no', 'yes'), exact_match('An Apple', 'apple')] == [0.0, 1.0]


def test_queries_without_gold_answers_are_nan_with_a_warning():
    with pytest.warns(UserWarning, match=r'EM is NaN \(no gold answer\): qid q9'):
        scores, best = GoldAnswerScorer(GOLD, 'em').score_with_reference(['q1', 'q9'], ['Paris', 'Paris'])
    assert scores[0] == 1.0 and np.isnan(scores[1]) and best == [None, None]


def test_gold_answers_from_pyterrier_rag_answers_ir_datasets_topics_and_mappings():
    exploded = pd.DataFrame({'qid': [1, 1, 2], 'gold_answer': ['Paris', 'paris', 'Rome']})
    assert gold_answers(exploded) == {'1': ('Paris', 'paris'), '2': ('Rome',)}
    topics = pd.DataFrame({'qid': ['a', 'b', 'c'], 'query': ['x', 'y', 'z'],
                           'answers': [('Paris', 'Paris', ''), np.array(['Rome']), ()]})
    assert gold_answers(topics) == {'a': ('Paris',), 'b': ('Rome',)}
    assert gold_answers({'a': 'Paris', 'b': ['Rome', ' ']}) == {'a': ('Paris',), 'b': ('Rome',)}


def test_the_transformer_adds_its_column():
    frame = pd.DataFrame({'qid': ['q1', 'q2'], 'docno': ['d', 'e'], 'qanswer': ['Paris', 'maybe']})
    out = GoldAnswerScorer(GOLD, 'f1')(frame)
    assert list(out.columns) == ['qid', 'docno', 'qanswer', 'f1'] and out['f1'].tolist() == [1.0, 0.0]
    assert repr(GoldAnswerScorer(GOLD, 'em')) == "GoldAnswerScorer('em', 3 queries)"


def test_settings_of_another_measure_are_refused():
    for quality, options in (('exact', {}), ('em', dict(submeasure='P')), ('f1', dict(agg='mean')),
                             ('bertscore-gold', dict(agg='min'))):
        with pytest.raises(SettingError, match='GoldAnswerScorer'):
            GoldAnswerScorer(GOLD, quality, **options)


@pytest.mark.parametrize('submeasure, agg', [('F1', 'max'), ('P', 'mean')])
def test_bertscore_against_gold_answers_equals_bert_score(minilm, submeasure, agg):
    reference = BERTScorer(model_type=minilm_path(), num_layers=6)
    scorer = GoldAnswerScorer(GOLD, 'bertscore-gold', model_type=minilm, submeasure=submeasure, agg=agg)
    qids, answers = zip(*[(q, a) for q, a in ANSWERS if a])
    ours = scorer.score(qids, answers)
    for value, q, a in zip(ours, qids, answers):
        theirs = dict(zip(('P', 'R', 'F1'), reference.score([a] * len(GOLD[q]), GOLD[q])))[submeasure].numpy()
        assert value == pytest.approx(theirs.max() if agg == 'max' else theirs.mean(), abs=1e-5)
    assert scorer.measure == ('BERTScore' if agg == 'max' else 'BERTScore(P, mean)')


# A QA collection: one relevant document per query, gold answers in the queries' ``answers`` field
# (as ir_datasets' dpr-w100/natural-questions gives them). q4 has none, so a gold-answer study leaves it out.
QA_DOCS = {'d1': 'the wing lift is caused by pressure', 'd2': 'heat flows through slabs',
           'd3': 'shock waves form at mach one', 'd4': 'boundary layers thicken downstream',
           'd5': 'a flap raises lift', 'd6': 'jets are loud', 'd7': 'vortex shedding behind cylinders'}
QA_QUERIES = [('q1', 'what causes wing lift', ('pressure', 'pressure differences')),
              ('q2', 'when do shock waves form', ('No context.', 'mach one')),
              ('q3', 'what raises lift', ('no context (seed 0, 0 contexts)', 'flaps')),
              ('q4', 'why are jets loud', ())]
QA_QRELS = [('q1', 'd1', 2), ('q1', 'd2', 0), ('q2', 'd3', 2), ('q2', 'd4', 0), ('q3', 'd5', 2), ('q3', 'd6', 0),
            ('q4', 'd6', 2), ('q4', 'd7', 0)]


@pytest.fixture(scope='module')
def qa_collection(tmp_path_factory):
    """Registers irds:pu-test/qa from local files: documents, qrels, and queries with answers."""
    import ir_datasets
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.datasets.dpr_w100 import DprW100Query
    from ir_datasets.formats import BaseQueries, TrecQrels, TsvDocs
    from ir_datasets.util import LocalDownload

    class Queries(BaseQueries):
        def queries_iter(self):
            return iter(DprW100Query(*q) for q in QA_QUERIES)

        def queries_cls(self):
            return DprW100Query

        def queries_namespace(self):
            return 'pu-test/qa'

        def queries_lang(self):
            return 'en'

    folder = tmp_path_factory.mktemp('qa')
    (folder / 'docs.tsv').write_text(''.join(f'{d}\t{t}\n' for d, t in QA_DOCS.items()))
    (folder / 'qrels').write_text(''.join(f'{q} 0 {d} {label}\n' for q, d, label in QA_QRELS))
    if 'pu-test/qa' not in ir_datasets.registry:
        ir_datasets.registry.register('pu-test/qa', Dataset(
            TsvDocs(LocalDownload(folder / 'docs.tsv'), namespace='pu-test/qa'), Queries(),
            TrecQrels(LocalDownload(folder / 'qrels'), {0: 'not', 2: 'relevant'})))
    return 'irds:pu-test/qa'


@pytest.fixture(scope='module')
def qa_folder(tmp_path_factory):
    """The same QA collection as a folder of files (--dataset FOLDER), its gold answers in answers.tsv: a
    header, a line per answer, one query's answers on lines apart, one line repeated, a blank line, CR LF."""
    folder = tmp_path_factory.mktemp('qa-folder')
    (folder / 'docs.tsv').write_text(''.join(f'{d}\t{t}\n' for d, t in QA_DOCS.items()))
    (folder / 'topics.tsv').write_text(''.join(f'{q}\t{text}\n' for q, text, _ in QA_QUERIES))
    (folder / 'qrels').write_text(''.join(f'{q} 0 {d} {label}\n' for q, d, label in QA_QRELS))
    lines = [(q, a) for q, _, answers in QA_QUERIES for a in answers]
    lines = lines[1:] + lines[:1] + [lines[2]]
    (folder / 'answers.tsv').write_bytes(('qid\tanswer\r\n\n' + ''.join(f'{q}\t{a}\r\n' for q, a in lines)).encode())
    return str(folder)


def test_a_folders_gold_answers_are_read_from_its_answers_file(qa_folder, tmp_path):
    import pyterrier_utility as pu
    d = pu.datasets.get_dataset(qa_folder)
    # In file order, each once: q1's first answer stands on the last line but one.
    assert d.gold_answers() == {'q1': ('pressure differences', 'pressure'), 'q2': ('No context.', 'mach one'),
                                'q3': ('no context (seed 0, 0 contexts)', 'flaps')}
    bare = tmp_path / 'bare'
    bare.mkdir()
    for name in ('docs.tsv', 'topics.tsv', 'qrels'):
        (bare / name).write_bytes((Path(qa_folder) / name).read_bytes())
    with pytest.raises(SettingError) as e:
        pu.datasets.get_dataset(str(bare)).gold_answers()
    assert str(e.value).startswith(f'{bare} has no gold answers: answer quality against gold answers reads them from '
                                   'answers.tsv in the collection folder')


@pytest.mark.parametrize('raw, message', [
    ('q1\tpressure\nq2 mach one\n', 'line 2: 1 field, expected 2 (qid<TAB>answer)'),
    ('q1\tpressure\nq2\tmach\tone\n', 'line 2: 3 fields, expected 2 (qid<TAB>answer)'),
    ('q1\tpressure\n\tmach one\n', 'line 2: empty qid'),
    ('q1\tpressure\nq2\t  \n', 'line 2, qid q2: an empty answer'),
    ('q1\tpressure\nq9\tmach one\n', 'line 2: qid q9 is not in {topics}'),
    ('Q 1\tpressure\n', "line 1: qid 'Q 1' holds white space, where TREC runs and qrels cut it; give qids without "
                          'white space'),
    (b'q1\tpressure\nq2\tMach \xb9\n', 'line 2, qid q2: bytes that are not UTF-8 (0xb9 at byte 9); save the file '
                                         'as UTF-8'),
    ('qid\tanswer\n\n', 'holds no answers (qid<TAB>answer per line)'),
])
def test_a_faulty_answers_line_is_refused_naming_file_and_line(qa_folder, tmp_path, raw, message):
    import shutil

    import pyterrier_utility as pu
    folder = tmp_path / 'qa'
    shutil.copytree(qa_folder, folder)
    (folder / 'answers.tsv').write_bytes(raw if isinstance(raw, bytes) else raw.encode())
    with pytest.raises(SettingError) as e:
        pu.datasets.get_dataset(str(folder)).gold_answers()
    assert str(e.value) == f'{folder / "answers.tsv"} ' + message.format(topics=folder / 'topics.tsv')


def test_a_qa_collections_gold_answers_are_read_from_its_topics(qa_collection):
    import pyterrier_utility as pu
    d = pu.datasets.get_dataset(qa_collection)
    assert list(d.get_topics().columns) == ['qid', 'query'] and len(d.get_topics()) == 4
    assert d.gold_answers() == {q: answers for q, _, answers in QA_QUERIES if answers}
    with pytest.raises(SettingError, match='cranfield has no gold answers'):
        pu.datasets.cranfield().gold_answers()


@pytest.mark.parametrize('collection', ['qa_collection', 'qa_folder'])
@pytest.mark.parametrize('quality', ['em', 'f1'])
def test_cli_study_scores_p_against_the_gold_answers(collection, quality, tmp_path, monkeypatch, request):
    import json

    from support.backends import CountingBackend

    import pyterrier_utility as pu
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    out = tmp_path / quality
    assert cli.main(['study', '--dataset', request.getfixturevalue(collection), '--quality', quality, '--queries', '0',
                     '-k', '1',
                     '--systems', 'Rel', '--labels', '2', '--samples', '1', '--out', str(out)]) == 0
    settings = json.loads((out / 'settings.json').read_text())
    assert (settings['quality'], settings['submeasure'], settings['agg']) == (quality, 'F1', 'max')
    per_query = pd.read_csv(out / 'per_query.csv', dtype={'qid': str}).set_index('qid')
    answers = pd.read_csv(out / 'answers.csv', dtype={'qid': str}, keep_default_na=False)
    # The fake reader answers with Context 1 and its seed: 0-shot 'no context (seed 0, 0 contexts)',
    # Rel at k=1 'the wing lift is caused by pressure (seed 0, 1 contexts)' for q1.
    assert answers.loc[(answers['system'] == 'Rel') & (answers['qid'] == 'q1'), 'qanswer'].tolist() == [
        'the wing lift is caused by pressure (seed 0, 1 contexts)']
    assert list(per_query.index) == ['q1', 'q2', 'q3']  # q4 has no gold answer
    measure = ems if quality == 'em' else (lambda a, golds: max(f1_score(a, g) for g in golds))
    gold = {q: answers for q, _, answers in QA_QUERIES}
    for system, column in (('0-shot', 'quality_0shot'), ('Rel', 'quality')):
        rows = answers[answers['system'] == system].set_index('qid')['qanswer']
        assert per_query[column].tolist() == pytest.approx([measure(rows[q], gold[q]) for q in per_query.index])
    if quality == 'em':
        # Only q3's 0-shot answer is one of its gold answers.
        assert per_query['quality_0shot'].tolist() == [0.0, 0.0, 1.0]
        assert per_query['quality'].tolist() == [0.0, 0.0, 0.0]
        assert per_query['utility'].isna().tolist() == [True, True, False] and per_query.loc['q3', 'utility'] == -1.0
    else:
        # q1: 'wing lift is caused by pressure seed 0 1 contexts' against 'pressure': P 1/10, R 1 -> 2/11.
        # q2: 0-shot 'no context seed 0 0 contexts' against 'no context': P 2/6, R 1 -> 1/2;
        #     'shock waves form at mach one seed 0 1 contexts' against 'mach one': P 2/10, R 1 -> 1/3.
        # q3: 0-shot F1 1 (it is a gold answer); 'flap raises lift seed 0 1 contexts' shares 'seed 0
        #     contexts' with it: P 3/7, R 3/6 -> 6/13 ('flaps' is not 'flap': no stemming).
        assert per_query['quality_0shot'].tolist() == pytest.approx([0.0, 0.5, 1.0])
        assert per_query['quality'].tolist() == pytest.approx([2 / 11, 1 / 3, 6 / 13])
        assert per_query['utility'].tolist()[1:] == pytest.approx([(1 / 3 - 1 / 2) / (1 / 2), 6 / 13 - 1])
    # P is named for what it computes wherever it is headed: never FBERT, which is BERTScore against the
    # relevant documents; the same in the tables the report command writes again.
    name = {'em': 'EM', 'f1': 'F1'}[quality]
    assert f'| k | 0-shot {name} | Rel |' in (out / 'table1.md').read_text()
    assert f'0-shot: the mean {name} of the answers without context' in (out / 'table1.tex').read_text()
    assert cli.main(['report', str(out), '--out', str(tmp_path / 'again'), '--html']) == 0
    page = (tmp_path / 'again' / 'report.html').read_text()
    assert f'"quality":"{name}"' in page
    for text in [(folder / file).read_text() for folder in (out, tmp_path / 'again')
                 for file in ('table1.md', 'table1_paper.md', 'table1.tex', 'report.html')] + [page]:
        assert 'FBERT' not in text
    # The study's files hold P in columns named for the answer quality, not for FBERT.
    for file in ('per_query.csv', 'scores.csv'):
        header = (out / file).read_text().splitlines()[0].split(',')
        assert 'quality' in header and not [c for c in header if 'fbert' in c]


def test_gold_quality_settings_are_checked_once():
    from pyterrier_utility.study import StudyConfig
    assert StudyConfig().quality == 'fbert-docs' and StudyConfig(quality='bertscore-gold', agg='mean').agg == 'mean'
    for bad in (dict(quality='rouge'), dict(quality='em', submeasure='P'), dict(submeasure='F'), dict(agg='min')):
        with pytest.raises(SettingError, match='StudyConfig'):
            StudyConfig(**bad)


@pytest.mark.parametrize('collection', ['qa_collection', 'qa_folder'])
def test_cli_experiment_runs_a_gold_quality_in_pt_experiment(collection, tmp_path, monkeypatch, request):
    from support.backends import CountingBackend

    import pyterrier_utility as pu
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    out = tmp_path / 'experiment'
    assert cli.main(['experiment', '--dataset', request.getfixturevalue(collection), '--quality', 'f1', '-k', '1',
                     '--systems', 'Rel', '--labels', '2', '--out', str(out)]) == 0
    table = pd.read_csv(out / 'experiment.csv').set_index('name')
    # The same P as the study's (see above): F1 of the Rel answers 2/11, 1/3, 6/13; 0-shot 0, 1/2, 1.
    # P named for what it computes: F1 and F1_0shot, no FBERT column.
    assert not [c for c in table.columns if 'FBERT' in c]
    assert table.loc['Rel', 'F1'] == pytest.approx((2 / 11 + 1 / 3 + 6 / 13) / 3, abs=1e-4)
    assert table.loc['Rel', 'F1_0shot'] == pytest.approx(0.5, abs=1e-4)


def test_cli_experiment_with_the_absolute_gain_reports_p_k_minus_p_0_per_query(qa_folder, tmp_path, monkeypatch):
    from support.backends import CountingBackend

    import pyterrier_utility as pu
    from pyterrier_utility import cli
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: CountingBackend())
    out = tmp_path / 'experiment'
    assert cli.main(['experiment', '--dataset', qa_folder, '--quality', 'f1', '-k', '1', '--systems', 'Rel',
                     '--labels', '2', '--utility', 'absolute', '--out', str(out)]) == 0
    values = pd.read_csv(out / 'per_query.csv', dtype={'qid': str}).pivot(index='qid', columns='measure',
                                                                          values='value')
    # F1 of the Rel answers 2/11, 1/3, 6/13 against 0-shot 0, 1/2, 1 (see above): U = P_k - P_0, q1's too.
    assert values['Utility'].tolist() == pytest.approx([2 / 11, 1 / 3 - 1 / 2, 6 / 13 - 1])
    assert (values['Utility'] == values['F1'] - values['F1_0shot']).all()
