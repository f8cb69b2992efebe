"""COS-Mix: the sparse/other partition, reciprocal rank fusion, the validator, the fallback, and COS-Mix
as a system of the study."""
import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pandas.testing import assert_frame_equal
from pyterrier_rag.backend import Backend, BackendOutput
from support.backends import CountingBackend
from support.simulated_server import SimulatedServer

import pyterrier_utility as pu
from pyterrier_utility import study as ex
from pyterrier_utility.backends import OpenAICompatibleBackend
from pyterrier_utility.errors import SettingError
from pyterrier_utility.methods.cosmix import (
    CorpusEmbeddings,
    COSMix,
    DenseRetriever,
    HybridRetriever,
    SparsePartition,
    Validator,
    reciprocal_rank_fusion,
)

CORPUS = {
    'a1': 'The boundary layer separates from the wing near the trailing edge at high angles of attack.',
    'a2': 'Near the trailing edge, at a high angle of attack, the boundary layer separates from the wing.',
    'b1': 'Heat transfer to a hypersonic blunt nose rises steeply with the Mach number.',
    'b2': 'Heat transfer to a hypersonic blunt nose increases steeply with the Mach number.',
    'u1': 'Flutter of thin panels in supersonic flow depends on the panel aspect ratio.',
    'u2': 'A sigmet is a weather advisory concerning the safety of all aircraft.',
}


@pytest.fixture(scope='module')
def embeddings():
    return CorpusEmbeddings(CORPUS)


def test_the_partition_puts_documents_carried_elsewhere_in_r_and_unique_ones_in_s(embeddings):
    partition = SparsePartition(embeddings, threshold=0.8)
    assert partition.sparse == {'u1', 'u2'} and partition.rest == {'a1', 'a2', 'b1', 'b2'}
    m = embeddings.matrix
    assert partition.nearest['a1'] == pytest.approx(float(m[0] @ m[1]), abs=1e-6)  # its paraphrase
    assert SparsePartition(embeddings, threshold=1.0).sparse == set(CORPUS)  # nothing is an exact copy
    again = CorpusEmbeddings(CORPUS)  # from the cache folder, not encoded again
    assert not hasattr(again, '_st') and np.array_equal(again.matrix, embeddings.matrix)


def test_reciprocal_rank_fusion_by_hand():
    bm25 = pd.DataFrame({'qid': 'q', 'query': 'x', 'docno': ['d1', 'd2', 'd3'], 'rank': [0, 1, 2]})
    dense = pd.DataFrame({'qid': 'q', 'query': 'x', 'docno': ['d3', 'd4', 'd1'], 'rank': [0, 1, 2]})
    fused = reciprocal_rank_fusion([bm25, dense], k=60, num_results=3)
    # d1: 1/61 + 1/63; d3: 1/63 + 1/61 (a tie, broken by docno); d2: 1/62; d4: 1/62 (cut).
    assert list(fused['docno']) == ['d1', 'd3', 'd2']
    assert fused['score'].tolist() == pytest.approx([1 / 61 + 1 / 63, 1 / 63 + 1 / 61, 1 / 62])
    assert list(fused['rank']) == [0, 1, 2]
    assert list(reciprocal_rank_fusion([dense, bm25], k=60, num_results=3)['docno']) == ['d1', 'd3', 'd2']


def test_dense_and_hybrid_retrieval_stay_within_their_subset(embeddings):
    topics = pd.DataFrame({'qid': ['q'], 'query': ['boundary layer separation on a wing']})
    dense = DenseRetriever(embeddings, CORPUS, subset={'u1', 'u2', 'a1'}, num_results=2)
    found = dense(topics)
    assert found['docno'].iloc[0] == 'a1' and len(found) == 2 and set(found['docno']) <= {'u1', 'u2', 'a1'}
    bm25 = pt.Transformer.from_df(pd.DataFrame({'qid': 'q', 'query': topics['query'][0], 'docno': ['a2', 'u2', 'b1'],
                                                'rank': [0, 1, 2], 'score': [3.0, 2.0, 1.0]}))
    hybrid = HybridRetriever(bm25, DenseRetriever(embeddings, CORPUS, subset={'u1', 'u2'}), subset={'u1', 'u2'},
                             num_results=5)
    out = hybrid(topics)
    assert set(out['docno']) == {'u1', 'u2'} and out['text'].tolist() == [CORPUS[d] for d in out['docno']]


class Scripted(Backend):
    """A judge replying from a table: the validator's stand-in, greedy."""
    supports_seeds = True
    deterministic = True

    def __init__(self, yes):
        super().__init__('scripted-judge')
        self.yes = yes
        self.calls = []

    def generate(self, inps, **kw):
        self.calls += inps
        return [BackendOutput(text=' Yes.' if any(y in p for y in self.yes) else ' No') for p in inps]


def test_the_validator_reads_yes_and_never_sends_an_empty_answer():
    judge = Scripted(yes=['Answer: good'])
    assert list(Validator(judge).validate(['q1', 'q2', 'q3'], ['good one', 'bad one', '  '])) == [True, False, False]
    assert len(judge.calls) == 2 and any('Question: q1\nAnswer: good one\n' in c for c in judge.calls)


def test_the_validator_decodes_greedily_whatever_the_readers_sampling(tmp_path):
    with SimulatedServer() as server:
        backend = OpenAICompatibleBackend('sim', server.url, temperature=0.3, max_new_tokens=8)
        reader = pu.Reader(pu.GenerationCache(backend, tmp_path / 'g.sqlite'), seed=7)
        validator = Validator(reader.cache)
        validator.validate(['q1', 'q2'], ['a1', 'a2'])
        reader(pd.DataFrame({'qid': ['q1'], 'query': ['q1']}))
    assert sorted(b['temperature'] for b in server.bodies) == [0, 0, 0.3]
    assert validator.cache.path == reader.cache.path  # replies cached next to the answers
    assert backend.decoding.temperature == 0.3 and reader.cache.backend is backend


def test_a_sampling_validator_that_cannot_be_made_greedy_is_refused():
    with pytest.raises(SettingError, match='decode greedily'):
        Validator(CountingBackend())
    assert Validator(CountingBackend(seeded=False)).cache.deterministic


def cosmix_over(embeddings, judge_yes, k=2):
    reader = pu.Reader(CountingBackend())
    first = DenseRetriever(embeddings, CORPUS, subset={'a1', 'a2', 'b1', 'b2'})
    fallback = DenseRetriever(embeddings, CORPUS, subset={'u1', 'u2'})
    return COSMix(reader, Validator(Scripted(judge_yes)), first, fallback, k=k)


def test_the_fallback_is_taken_exactly_when_the_validator_says_no(embeddings):
    topics = pd.DataFrame({'qid': ['q1', 'q2'],
                           'query': ['boundary layer separation', 'panel flutter in supersonic flow']})
    # The reader's answer names its first context; the judge accepts answers about the boundary layer only.
    cosmix = cosmix_over(embeddings, judge_yes=['Answer: The boundary layer', 'Answer: Near the trailing edge'])
    out = cosmix(topics)
    q1, q2 = out[out.qid == 'q1'], out[out.qid == 'q2']
    assert set(q1['branch']) == {'R'} and set(q1['docno']) <= {'a1', 'a2', 'b1', 'b2'} and q1['validated'].all()
    assert set(q2['branch']) == {'S'} and set(q2['docno']) == {'u1', 'u2'} and not q2['validated'].any()
    assert list(out.groupby('qid').size()) == [2, 2]
    assert cosmix.branches().set_index('qid')['branch'].to_dict() == {'q1': 'R', 'q2': 'S'}
    assert cosmix(topics).equals(out)  # reproducible: the same seeds, the same cached answers and replies


def test_cosmix_runs_in_a_study_once_per_k(embeddings, minilm):
    topics = pd.DataFrame({'qid': ['q1'], 'query': ['boundary layer separation']})
    qrels = pd.DataFrame({'qid': ['q1', 'q1'], 'docno': ['a1', 'u1'], 'label': [2, 0]})
    cosmix = cosmix_over(embeddings, judge_yes=['1 contexts'])  # accepts only answers from one context
    results = ex.run_study(topics, qrels, {'COSMix': cosmix}, pu.Reader(CountingBackend()), CORPUS, ks=[1, 2],
                           bertscore=minilm, verbose=False)
    assert results.per_query.set_index('k')['n_docs'].to_dict() == {1: 1, 2: 2}
    assert cosmix.branches().set_index('k')['branch'].to_dict() == {1: 'R', 2: 'S'}


def fixed_ranking(docnos):
    """A retriever returning ``docnos`` in that order for every query, with their texts."""
    return pt.apply.generic(lambda topics: topics[['qid', 'query']].merge(pd.DataFrame(
        {'docno': docnos, 'text': [CORPUS[d] for d in docnos], 'score': [10.0 - i for i in range(len(docnos))],
         'rank': range(len(docnos))}), how='cross'))


def test_the_fused_top_k_reaches_the_reader_lost_in_the_middle_and_the_fallback_in_its_order():
    topics = pd.DataFrame({'qid': ['q1', 'q2'], 'query': ['boundary layer separation', 'panel flutter']})
    reader = pu.Reader(CountingBackend())
    first, fallback = fixed_ranking(['a1', 'a2', 'b1', 'b2', 'u1', 'u2']), fixed_ranking(['u2', 'u1', 'a1', 'b2', 'b1'])
    # The judge accepts q1's answer only (its prompt holds the question).
    judge = Validator(Scripted(yes=['Question: boundary layer']))
    out = COSMix(reader, judge, first, fallback, k=5)(topics)
    expected = pd.DataFrame({'qid': ['q1'] * 5 + ['q2'] * 5,
                             'query': ['boundary layer separation'] * 5 + ['panel flutter'] * 5,
                             'docno': ['a1', 'b1', 'u1', 'b2', 'a2', 'u2', 'u1', 'a1', 'b2', 'b1'],
                             'score': [5.0, 4.0, 3.0, 2.0, 1.0, 10.0, 9.0, 8.0, 7.0, 6.0], 'rank': [0, 1, 2, 3, 4] * 2,
                             'branch': ['R'] * 5 + ['S'] * 5, 'validated': [True] * 5 + [False] * 5})
    expected.insert(3, 'text', expected['docno'].map(CORPUS))
    assert_frame_equal(out, expected)
    sent = [p for p in reader.cache.backend.calls if 'boundary layer separation' in p][0]
    contexts = [CORPUS[d] for d in ['a1', 'b1', 'u1', 'b2', 'a2']]
    assert sent == reader.prompter.build_prompt('boundary layer separation', contexts)  # the order the frame says
    fused_order = COSMix(pu.Reader(CountingBackend()), judge, first, fallback, k=5, reorder=None)(topics)
    assert list(fused_order['docno'][:5]) == ['a1', 'a2', 'b1', 'b2', 'u1']
