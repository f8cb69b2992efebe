import pandas as pd
import pytest

from pyterrier_utility import OracleSampler

QRELS = pd.DataFrame([
    ('q1', 'r1', 3), ('q1', 'r2', 2), ('q1', 'r3', 2), ('q1', 'm1', 1), ('q1', 'n1', 0),
    ('q2', 'r4', 3), ('q2', 'n2', 0), ('q2', 'n3', 0),
], columns=['qid', 'docno', 'label'])
TEXTS = {d: f'text of {d}' for d in ['r1', 'r2', 'r3', 'r4', 'm1', 'n1', 'n2', 'n3', 'u1', 'u2', 'u3']}
TOPICS = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['one', 'two']})


def test_rel_samples_only_relevant_labels():
    out = OracleSampler(QRELS, TEXTS, labels=2, num_results=2)(TOPICS)
    q1 = out[out.qid == 'q1']
    assert len(q1) == 2 and set(q1['docno']) <= {'r1', 'r2', 'r3'}
    assert list(out[out.qid == 'q2']['docno']) == ['r4']  # fewer than k: all of them
    assert list(q1['rank']) == [0, 1]
    assert (out['text'] == out['docno'].map(TEXTS)).all()
    assert q1['score'].is_monotonic_decreasing


def test_label_set_and_minimum():
    only3 = OracleSampler(QRELS, TEXTS, labels={3})(TOPICS)
    assert set(only3['docno']) == {'r1', 'r4'}
    from1 = OracleSampler(QRELS, TEXTS, labels=1)(TOPICS)
    assert set(from1[from1.qid == 'q1']['docno']) == {'r1', 'r2', 'r3', 'm1'}


def test_sampling_is_seeded_per_query_and_nested():
    a = OracleSampler(QRELS, TEXTS, labels=1, seed=3)(TOPICS)
    b = OracleSampler(QRELS, TEXTS, labels=1, seed=3)(TOPICS.iloc[::-1])
    assert list(a[a.qid == 'q1']['docno']) == list(b[b.qid == 'q1']['docno'])
    small = OracleSampler(QRELS, TEXTS, labels=1, seed=3, num_results=2)(TOPICS)
    assert list(small[small.qid == 'q1']['docno']) == list(a[a.qid == 'q1']['docno'][:2])
    orders = {tuple(OracleSampler(QRELS, TEXTS, labels=1, seed=s).sample('q1')) for s in range(20)}
    assert len(orders) > 1


def test_nrel_judged_only_and_filled_from_unjudged():
    judged = OracleSampler(QRELS, TEXTS, relevant=False, num_results=3)(TOPICS)
    assert set(judged[judged.qid == 'q1']['docno']) == {'n1'}
    assert set(judged[judged.qid == 'q2']['docno']) == {'n2', 'n3'}
    filled = OracleSampler(QRELS, TEXTS, relevant=False, fill_unjudged=True, num_results=3)(TOPICS)
    q1 = list(filled[filled.qid == 'q1']['docno'])
    assert len(q1) == 3 and q1[0] == 'n1'
    assert set(q1[1:]) <= {'r4', 'n2', 'n3', 'u1', 'u2', 'u3'}  # never a document judged for q1


def test_query_without_candidates_warns_and_is_absent():
    topics = pd.concat([TOPICS, pd.DataFrame({'qid': ['q9'], 'query': ['nine']})])
    with pytest.warns(UserWarning, match='q9'):
        out = OracleSampler(QRELS, TEXTS)(topics)
    assert 'q9' not in set(out['qid'])


def dl19_like_qrels():
    """Two queries with the label counts of DL'19 queries 1037798 ({3: 2, 2: 5, 1: 6, 0: 141}) and
    156493 ({3: 1, 2: 116, 1: 16, 0: 167}) (github.com/DanielTian97/rag-utility, qrels/qrels.csv),
    rows in a shuffled order."""
    import numpy as np
    rows = [(qid, f'{qid}-{label}-{i}', label) for qid, counts in (('a', {3: 2, 2: 5, 1: 6, 0: 141}),
                                                                    ('b', {3: 1, 2: 116, 1: 16, 0: 167}))
            for label, n in counts.items() for i in range(n)]
    qrels = pd.DataFrame(rows, columns=['qid', 'docno', 'label'])
    return qrels.iloc[np.random.default_rng(0).permutation(len(qrels))].reset_index(drop=True)


def test_authors_rel_is_sorted_by_label_and_padded_where_sampled_rel_is_not():
    qrels = dl19_like_qrels()
    texts = dict.fromkeys(qrels['docno'], 'x')
    topics = pd.DataFrame({'qid': ['a', 'b'], 'query': ['one', 'two']})
    label = qrels.set_index('docno')['label']
    authors = (OracleSampler(qrels, texts, labels={2, 3}, mode='authors') % 15)(topics)
    assert list(authors[authors.qid == 'a']['docno'].map(label)) == [3, 3, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 0]
    assert list(authors[authors.qid == 'b']['docno'].map(label)) == [3] + [2] * 14
    # the label set does not change the order: {3} gets the same 15 documents
    only3 = (OracleSampler(qrels, texts, labels={3}, mode='authors') % 15)(topics)
    assert list(only3['docno']) == list(authors['docno'])
    sampled = (OracleSampler(qrels, texts, labels={2, 3}) % 15)(topics)
    assert sorted(sampled[sampled.qid == 'a']['docno'].map(label)) == [2, 2, 2, 2, 2, 3, 3]  # all 7, no padding
    assert set(sampled[sampled.qid == 'b']['docno'].map(label)) <= {2, 3}
    assert len(sampled[sampled.qid == 'b']) == 15
    sampled3 = (OracleSampler(qrels, texts, labels={3}) % 15)(topics)
    assert list(sampled3.groupby('qid').size()) == [2, 1]


def test_authors_nrel_is_sorted_lowest_label_first():
    # res/reverse_oracle_dl_19.csv: judged documents from label 0 up (its score column is 3 - label)
    qrels = dl19_like_qrels()
    nrel = OracleSampler(qrels, dict.fromkeys(qrels['docno'], 'x'), relevant=False, mode='authors')
    label = qrels.set_index('docno')['label']
    assert list(pd.Series(nrel.sample('a')).map(label)) == [0] * 141 + [1] * 6 + [2] * 5 + [3] * 2


def test_authors_oracle_reproduces_their_run_for_a_dl19_query():
    # github.com/DanielTian97/rag-utility, res/oracle_dl_19.csv, qid 1037798 ("who is robert gray"),
    # ranks 0-19 (docno, score = label); the query has 154 judged documents, the other 134 label 0.
    their_run = [('3641634', 3), ('8760871', 3), ('720665', 2), ('5438881', 2), ('4095286', 2), ('7822415', 2),
                 ('6060285', 2), ('4974552', 1), ('3167284', 1), ('7466652', 1), ('3387556', 1), ('8537479', 1),
                 ('3641640', 1), ('6908549', 0), ('666442', 0), ('6822247', 0), ('6921843', 0), ('6917254', 0),
                 ('6919149', 0), ('6606712', 0)]
    # qrels holding these rows, lowest label first; within a label in the run's order (ties keep the qrels' order)
    qrels = pd.DataFrame([('1037798', d, lab) for lab in (0, 1, 2, 3) for d, x in their_run if x == lab],
                         columns=['qid', 'docno', 'label'])
    oracle = OracleSampler(qrels, dict.fromkeys(qrels['docno'], 'x'), mode='authors') % 15
    out = oracle(pd.DataFrame({'qid': ['1037798'], 'query': ['who is robert gray']}))
    assert list(out['docno']) == [d for d, _ in their_run[:15]]
    assert list(out['rank']) == list(range(15))


def test_modes_and_unjudged_filling_are_checked():
    from pyterrier_utility.errors import SettingError
    with pytest.raises(SettingError, match="mode must be one of \\['sampled', 'authors'\\]"):
        OracleSampler(QRELS, TEXTS, mode='sorted')
    with pytest.raises(SettingError, match="fill_unjudged needs mode='sampled'"):
        OracleSampler(QRELS, TEXTS, relevant=False, fill_unjudged=True, mode='authors')


class Unenumerable:
    """A docno -> text mapping over TEXTS that names documents by position and refuses to be iterated."""

    def __init__(self, docnos):
        self.docnos = list(docnos)

    def __getitem__(self, docno):
        return TEXTS[docno]

    def __contains__(self, docno):
        return docno in TEXTS

    def __len__(self):
        return len(self.docnos)

    def __iter__(self):
        raise AssertionError('the corpus was enumerated')

    def docno_at(self, i):
        return self.docnos[i]


def test_nrel_fills_from_unjudged_documents_without_enumerating_the_corpus():
    texts = Unenumerable(sorted(TEXTS))
    filled = OracleSampler(QRELS, texts, relevant=False, fill_unjudged=True, num_results=5)
    as_dict = OracleSampler(QRELS, TEXTS, relevant=False, fill_unjudged=True, num_results=5)
    # a dict is drawn in sorted docno order: by position over the same order, the same documents
    assert filled.sample('q1') == as_dict.sample('q1')
    q1 = filled.sample('q1')
    assert q1[0] == 'n1' and len(set(q1)) == 5 and not set(q1[1:]) & {'r1', 'r2', 'r3', 'm1', 'n1'}
    out = filled(TOPICS)
    assert (out['text'] == out['docno'].map(TEXTS)).all()


def test_unjudged_filling_refuses_a_mapping_it_would_have_to_enumerate():
    from collections.abc import Mapping

    from pyterrier_utility.errors import SettingError

    class Plain(Mapping):
        def __getitem__(self, d):
            return TEXTS[d]

        def __len__(self):
            return len(TEXTS)

        def __iter__(self):
            raise AssertionError('the corpus was enumerated')
    with pytest.raises(SettingError, match='texts must be a dict or have docno_at'):
        OracleSampler(QRELS, Plain(), relevant=False, fill_unjudged=True)


def test_cranfield_nrel_is_unchanged():
    # NRel on the embedded Cranfield as drawn before unjudged documents were drawn by position
    # (commit 98332b0): first five, last three, and a digest of all 100
    import hashlib

    from pyterrier_utility.datasets import cranfield
    d = cranfield()
    nrel = OracleSampler(d.get_qrels(), d.texts, relevant=False, fill_unjudged=True, num_results=100)
    for qid, first, last, digest in (
            ('1', ['486', '523', '327', '1116', '658'], ['1100', '43', '1399'], 'c0b7fc345ff62354'),
            ('2', ['486', '871', '743', '1107', '1335'], ['1355', '203', '846'], 'c89d29f0c6c09e74')):
        sample = nrel.sample(qid)
        assert (sample[:5], sample[-3:]) == (first, last)
        assert hashlib.sha256(' '.join(sample).encode()).hexdigest()[:16] == digest


def test_default_systems_offer_both_oracles():
    from pyterrier_utility.datasets import cranfield
    from pyterrier_utility.errors import SettingError
    from pyterrier_utility.study import default_systems
    d = cranfield()
    qrels = d.get_qrels()
    sampled = default_systems(d, qrels, retrieval=False, labels={3, 4})
    authors = default_systems(d, qrels, retrieval=False, labels={3, 4}, oracle='authors')
    assert (sampled['Rel'].mode, sampled['NRel'].mode, sampled['NRel'].fill_unjudged) == ('sampled', 'sampled', True)
    assert (authors['Rel'].mode, authors['NRel'].mode, authors['NRel'].fill_unjudged) == ('authors', 'authors', False)
    label = qrels[qrels.qid == '1'].set_index('docno')['label']
    assert list(pd.Series(authors['Rel'].sample('1')[:9]).map(label)) == [3] * 7 + [2] * 2  # qid 1 has no label 4
    with pytest.raises(SettingError, match='oracle must be one of'):
        default_systems(d, qrels, retrieval=False, oracle='paper')


def test_fewer_than_k_is_said_naming_the_queries_compiled_or_not_and_inside_pt_experiment():
    import pyterrier as pt
    from ir_measures import nDCG
    fewer = r'gives fewer than k=3 relevant documents \(all it has\) to some queries.*q2'
    rel = OracleSampler(QRELS, TEXTS, labels=2)
    for pipeline in (rel % 3, (rel % 3).compile()):
        with pytest.warns(UserWarning, match=fewer):
            out = pipeline(TOPICS)
        assert out.groupby('qid').size().to_dict() == {'q1': 3, 'q2': 1}
    with pytest.warns(UserWarning, match=fewer):
        pt.Experiment([rel % 3], TOPICS, QRELS, [nDCG @ 3])
