import pickle

import numpy as np
import pandas as pd
import pyterrier as pt
import pytest
from pandas.testing import assert_frame_equal

from pyterrier_utility import GridWindow, LostInTheMiddle, Permutation, ReverseOrder, Window, permutations
from pyterrier_utility.contexts.order import window_starts
from pyterrier_utility.errors import SettingError


def test_reverse_order_turns_top_into_last(results):
    out = ReverseOrder()(results)
    expected = pd.DataFrame([
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd3', 'text': 'third doc', 'score': 3.0, 'rank': 0},
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd2', 'text': 'second doc', 'score': 2.0, 'rank': 1},
        {'qid': 'q1', 'query': 'what is lift', 'docno': 'd1', 'text': 'first doc', 'score': 1.0, 'rank': 2},
        {'qid': 'q2', 'query': 'what is drag', 'docno': 'd4', 'text': 'drag doc', 'score': 1.0, 'rank': 0},
    ])
    assert_frame_equal(out, expected)


def test_reverse_twice_is_identity_on_order(results):
    twice = ReverseOrder()(ReverseOrder()(results))
    assert list(twice['docno']) == ['d1', 'd2', 'd3', 'd4']


def test_reverse_ranks_by_score_when_rank_missing(results):
    out = ReverseOrder()(results.drop(columns=['rank']))
    assert list(out[out.qid == 'q1']['docno']) == ['d3', 'd1', 'd2']


def test_reversed_ranking_is_what_ndcg_sees(results):
    import ir_measures
    from ir_measures import nDCG
    qrels = pd.DataFrame({'query_id': ['q1', 'q1'], 'doc_id': ['d1', 'd3'], 'relevance': [2, 1]})
    def ndcg(frame):
        run = frame.rename(columns={'qid': 'query_id', 'docno': 'doc_id'})
        return ir_measures.calc_aggregate([nDCG@3], qrels, run[run.query_id == 'q1'])[nDCG@3]
    def ranking(docnos):
        return pd.DataFrame({'qid': 'q1', 'docno': docnos, 'score': [3.0, 2.0, 1.0]})
    assert ndcg(ReverseOrder()(results)) == ndcg(ranking(['d3', 'd2', 'd1']))
    assert ndcg(ReverseOrder()(results)) < ndcg(ranking(['d1', 'd2', 'd3']))


def ranking(sizes):
    """Query q<i> with ``sizes[i]`` documents d<i>-1 .. d<i>-n, best first, given in a shuffled row order."""
    rows = [{'qid': f'q{i}', 'query': f'query {i}', 'docno': f'd{i}-{r}', 'score': float(100 - r), 'rank': r - 1}
            for i, n in enumerate(sizes, 1) for r in range(1, n + 1)]
    return pd.DataFrame(rows).sample(frac=1.0, random_state=3).reset_index(drop=True)


def expected(qid, ranks):
    """The frame an ordering must give: the documents of ``ranks`` (from 1) in that order, ranked from 0
    with scores m..1."""
    i = qid[1:]
    m = len(ranks)
    return pd.DataFrame([{'qid': qid, 'query': f'query {i}', 'docno': f'd{i}-{r}', 'score': float(m - pos), 'rank': pos}
                         for pos, r in enumerate(ranks)])


def test_lost_in_the_middle_of_five_documents():
    assert_frame_equal(LostInTheMiddle()(ranking([5])), expected('q1', [1, 3, 5, 4, 2]))
    assert_frame_equal(LostInTheMiddle(reverse=True)(ranking([5])), expected('q1', [5, 3, 1, 2, 4]))


def test_lost_in_the_middle_of_four_one_and_two_documents_per_query():
    out = LostInTheMiddle()(ranking([4, 1, 2]))
    assert_frame_equal(out, pd.concat([expected('q1', [1, 3, 4, 2]), expected('q2', [1]), expected('q3', [1, 2])],
                                      ignore_index=True))


def test_the_reversal_puts_the_best_in_the_middle_as_reversing_first_does():
    frame = ranking([1, 2, 3, 4, 5, 6, 7, 8])
    assert_frame_equal(LostInTheMiddle(reverse=True)(frame), (ReverseOrder() >> LostInTheMiddle())(frame))


def longcontextreorder(items):
    """LangChain's LongContextReorder, as its documentation describes it: from the worst item to the
    best, each item with an even index goes to the front, each with an odd index to the back."""
    out = []
    for i, item in enumerate(reversed(items)):
        out = [item] + out if i % 2 == 0 else out + [item]
    return out


@pytest.mark.parametrize('n', range(1, 9))
def test_langchain_gives_the_same_order_for_odd_n_and_its_mirror_for_even_n(n):
    ours = list(LostInTheMiddle()(ranking([n]))['docno'])
    theirs = longcontextreorder([f'd1-{r}' for r in range(1, n + 1)])
    assert theirs == (ours if n % 2 else ours[::-1])


#: What ``simple_shuffling`` in the authors' ``tools/permutation_generator.py``
#: (github.com/DanielTian97/rag-utility) gives for k = 1..9, worked out by hand from its algorithm:
#: it reverses its list, then takes each item in turn, appending the 1st, 3rd, 5th, ... and
#: prepending the 2nd, 4th, ... Lost in the middle is ``simple_shuffling([0, ..., k-1])``, its
#: reversal ``simple_shuffling([k-1, ..., 0])``; here as ranks from 1 (k = 5: "2 4 5 3 1" and
#: "4 2 1 3 5", as the issue read them).
AUTHORS_LIM = {1: ('1', '1'), 2: ('12', '21'), 3: ('231', '213'), 4: ('1342', '4213'), 5: ('24531', '42135'),
               6: ('135642', '642135'), 7: ('2467531', '6421357'), 8: ('13578642', '86421357'),
               9: ('246897531', '864213579')}


@pytest.mark.parametrize('k', range(1, 10))
def test_the_authors_orientation_is_their_simple_shuffling(k):
    lim, lim_r = ([int(c) for c in order] for order in AUTHORS_LIM[k])
    assert_frame_equal(LostInTheMiddle(authors=True)(ranking([k])), expected('q1', lim))
    assert_frame_equal(LostInTheMiddle(reverse=True, authors=True)(ranking([k])), expected('q1', lim_r))
    # This project's orientation is the same for even k and its mirror image for odd k.
    ours = list(LostInTheMiddle().positions(k))
    assert [r - 1 for r in lim] == (ours[::-1] if k % 2 else ours)


def test_the_study_offers_both_orientations_by_name():
    from pyterrier_utility.study import config, sweep
    assert {'lim', 'lim-r', 'lim-authors', 'lim-authors-r'} <= set(config.ORDERING_NAMES) == set(sweep.ORDERINGS)
    suffix, ordering = sweep.ORDERINGS['lim-authors-r']
    assert suffix == '-lim-authors-r' and list(ordering(ranking([5]))['docno']) == [f'd1-{r}' for r in (4, 2, 1, 3, 5)]


#: The start ranks (from 1) of the windows the authors' ``compose_context`` (``tools/prompt_tools.py``)
#: samples from a ranking of n documents, worked out by hand from its code: the grid of starts
#: ``range(0, n - k + 1, step)`` (0-based), its first ``tops`` and its last ``tails``, in rank order;
#: as (n, k, step, tops, tails): starts.
COMPOSE_CONTEXT = {(100, 5, 1, 1, 0): [1], (20, 5, 5, 2, 2): [1, 6, 11, 16], (20, 3, 4, 1, 1): [1, 17],
                   (10, 4, 2, 3, 2): [1, 3, 5, 7], (7, 5, 3, 1, 1): [1], (4, 5, 1, 1, 1): [],
                   (100, 10, 10, 2, 3): [1, 11, 71, 81, 91], (23, 5, 4, 1, 2): [1, 13, 17]}


@pytest.mark.parametrize('n, k, step, tops, tails', list(COMPOSE_CONTEXT))
def test_grid_windows_from_the_top_and_the_tail_are_compose_contexts(n, k, step, tops, tails):
    frame = ranking([n])
    windows = [GridWindow(i, k, step) for i in range(1, tops + 1)] + [GridWindow(-j, k, step)
                                                                       for j in range(1, tails + 1)]
    starts = set()
    for window in windows:
        out = window(frame)
        if len(out):
            start = int(out['docno'].iloc[0].split('-')[1])
            assert_frame_equal(out, expected('q1', list(range(start, start + k))))
            starts.add(start)
    assert sorted(starts) == COMPOSE_CONTEXT[n, k, step, tops, tails]


def test_more_tail_windows_than_the_grid_has_are_the_whole_grid():
    """Their slice wraps round there (12 documents, k = 5, step 3, tails 4: only the window at rank 7);
    here every window of the grid (1, 4, 7), the index past it empty."""
    frame = ranking([12])
    firsts = [list(GridWindow(-j, 5, 3)(frame)['docno'][:1]) for j in (1, 2, 3, 4)]
    assert firsts == [['d1-7'], ['d1-4'], ['d1-1'], []]
    assert window_starts(12, 5, 3) == [1, 4, 7] and window_starts(4, 5) == []


def test_a_permutation_orders_the_top_ranks_and_keeps_the_rest_after_them():
    out = Permutation([3, 1, 2])(ranking([3, 2, 5]))
    assert_frame_equal(out, pd.concat([expected('q1', [3, 1, 2]), expected('q2', [1, 2]),
                                       expected('q3', [3, 1, 2, 4, 5])], ignore_index=True))


@pytest.mark.parametrize('order', [[1, 1, 2], [0, 1], [1, 3], []])
def test_a_permutation_must_be_one(order):
    with pytest.raises(SettingError, match='permutation of 1..'):
        Permutation(order)


def test_every_permutation_of_three_as_named_systems():
    systems = permutations(3)
    assert list(systems) == ['123', '132', '213', '231', '312', '321']
    for name, system in systems.items():
        assert_frame_equal(system(ranking([3])), expected('q1', [int(c) for c in name]))
    assert len(permutations(5)) == 120
    with pytest.raises(SettingError, match='at most 9'):
        permutations(10)


def test_windows_at_ranks_one_and_six():
    frame = ranking([10, 7, 3])
    assert_frame_equal(Window(1, 5)(frame), pd.concat([expected('q1', [1, 2, 3, 4, 5]), expected('q2', [1, 2, 3, 4, 5]),
                                                       expected('q3', [1, 2, 3])], ignore_index=True))
    # q2 has two documents from rank 6 on, q3 none.
    assert_frame_equal(Window(6, 5)(frame), pd.concat([expected('q1', [6, 7, 8, 9, 10]), expected('q2', [6, 7])],
                                                      ignore_index=True))


def test_windows_check_their_bounds():
    for start, k in [(0, 5), (1, 0), (1.5, 2)]:
        with pytest.raises(SettingError):
            Window(start, k)
    for index, k, step, name in [(0, 5, 1, 'index'), (1.0, 5, 1, 'index'), (1, 0, 1, 'k'), (-1, 5, 0, 'step')]:
        with pytest.raises(SettingError, match=name):
            GridWindow(index, k, step)


def test_orderings_rank_by_score_when_the_input_has_no_rank():
    frame = ranking([5]).drop(columns=['rank'])
    assert_frame_equal(LostInTheMiddle()(frame), expected('q1', [1, 3, 5, 4, 2]))


SYSTEMS = {'original': ([1, 2, 3, 4, 5], None), 'reversed': ([5, 4, 3, 2, 1], ReverseOrder()),
           'lim': ([1, 3, 5, 4, 2], LostInTheMiddle()), 'lim-r': ([5, 3, 1, 2, 4], LostInTheMiddle(reverse=True)),
           'p21345': ([2, 1, 3, 4, 5], Permutation([2, 1])), 'window 6': ([6, 7, 8, 9, 10], Window(6, 5))}


def test_pt_experiment_measures_the_order_the_reader_sees():
    import ir_measures
    from ir_measures import nDCG
    frame = ranking([10, 10])
    qrels = pd.DataFrame({'qid': ['q1', 'q1', 'q1', 'q2', 'q2'], 'docno': ['d1-1', 'd1-3', 'd1-7', 'd2-2', 'd2-9'],
                          'label': [3, 1, 2, 2, 1]})
    source = pt.Transformer.from_df(frame)
    systems = [source % 5 if t is None else (source >> t if isinstance(t, Window) else source % 5 >> t)
               for _, t in SYSTEMS.values()]
    res = pt.Experiment(systems, frame[['qid', 'query']].drop_duplicates(), qrels, [nDCG @ 5], names=list(SYSTEMS))
    measured = dict(zip(res['name'], res['nDCG@5']))
    run_qrels = qrels.rename(columns={'qid': 'query_id', 'docno': 'doc_id', 'label': 'relevance'})
    for name, (ranks, _) in SYSTEMS.items():
        run = pd.DataFrame([{'query_id': q, 'doc_id': f'd{q[1:]}-{r}', 'score': float(10 - i)}
                            for q in ('q1', 'q2') for i, r in enumerate(ranks)])
        assert measured[name] == pytest.approx(ir_measures.calc_aggregate([nDCG @ 5], run_qrels, run)[nDCG @ 5]), name
    # By hand under lim, with trec_eval's gains (the labels): q1 sees labels 3, 1, 0, 0, 0 (ideal 3, 2, 1),
    # q2 sees 0, 0, 0, 0, 2 (ideal 2, 1).
    q1 = (3 + 1 / np.log2(3)) / (3 + 2 / np.log2(3) + 1 / np.log2(4))
    q2 = (2 / np.log2(6)) / (2 + 1 / np.log2(3))
    assert measured['lim'] == pytest.approx((q1 + q2) / 2)
    assert len({round(v, 9) for v in measured.values()}) == len(SYSTEMS)  # every ordering is seen as different


@pytest.mark.parametrize('transformer', [ReverseOrder(), LostInTheMiddle(), LostInTheMiddle(reverse=True),
                                         LostInTheMiddle(authors=True), Permutation([2, 3, 1]), Window(6, 5),
                                         GridWindow(-1, 3, 2)])
def test_orderings_pickle_inspect_and_tell_themselves_apart(transformer):
    clone = pickle.loads(pickle.dumps(transformer))
    frame = ranking([10, 4])
    assert_frame_equal(clone(frame), transformer(frame))
    assert repr(clone) == repr(transformer)
    attributes = pt.inspect.transformer_attributes(transformer)  # raises for an argument not kept under its name
    assert all(a.value is not pt.inspect.TransformerAttribute.MISSING for a in attributes)
    assert transformer(frame.iloc[0:0]).empty


def test_reprs():
    assert [repr(t) for t in (LostInTheMiddle(), LostInTheMiddle(True), LostInTheMiddle(True, authors=True),
                              Permutation((2, 1)), Window(6, 5))] == [
        'LostInTheMiddle(reverse=False)', 'LostInTheMiddle(reverse=True)',
        'LostInTheMiddle(reverse=True, authors=True)', 'Permutation([2, 1])', 'Window(start=6, k=5)']
