"""Property-based: for any input frame or setting, either a clear error of the project's own types
(or pyterrier's InputValidationError for a missing column), or an output with the documented
invariants: one answer per query and sample, answers only from the backend, utility exactly
(P_k - P_0) / P_0 and NaN exactly where P is undefined or P_0 is 0."""
import math
import warnings

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings, strategies as st
from pyterrier.validate import InputValidationError
from pyterrier_rag.backend import BackendOutput
from support.backends import CountingBackend

from pyterrier_utility import GenerationCache, Reader, UtilityEvaluator
from pyterrier_utility.backends import OpenAICompatibleBackend
from pyterrier_utility.errors import BackendError, SettingError, UtilityError

EXPECTED = (InputValidationError, UtilityError)
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ids = st.one_of(st.sampled_from(['q1', 'q2', 'q3']), st.integers(1, 3))
queries = st.one_of(st.sampled_from(['what is lift', 'why {drag}?', 'Context 2: x', '']), st.integers(0, 3))
docnos = st.one_of(st.sampled_from(['d1', 'd2', 'd3']), st.integers(1, 3))
texts = st.one_of(st.text(max_size=12), st.none())
ranks = st.one_of(st.integers(0, 12), st.floats(0, 12, allow_nan=False), st.sampled_from(['0', '2', '10']))
DEFECTS = [None] * 6 + ['missing qid', 'two queries', 'missing docno', 'rank not a number', 'missing query']


@st.composite
def result_frames(draw):
    """Mostly well-formed rankings (duplicates, empty texts, numbers as ids, placeholder rows of
    queries with nothing retrieved), with one defect of a known kind in about a third of them."""
    qids = draw(st.lists(ids, min_size=1, max_size=3, unique_by=str))
    rows = []
    for qid in qids:
        query = draw(queries)
        n = draw(st.integers(0, 4))
        rows += [(qid, query, None, None, 0)] if n == 0 else [
            (qid, query, draw(docnos), draw(texts), draw(ranks)) for _ in range(n)]
    frame = pd.DataFrame(rows, columns=['qid', 'query', 'docno', 'text', 'rank']).astype(object)
    defect, row = draw(st.sampled_from(DEFECTS)), draw(st.integers(0, len(frame) - 1))
    column, value = {'missing qid': ('qid', None), 'two queries': ('query', 'another question'),
                     'missing docno': ('docno', None), 'rank not a number': ('rank', 'x'),
                     'missing query': ('query', None)}.get(defect, (None, None))
    if column:
        frame.loc[row, column] = value
    return frame.drop(columns=['rank']) if draw(st.booleans()) else frame


class RecordingBackend(CountingBackend):
    """CountingBackend remembering every text it returned."""

    def __init__(self):
        super().__init__()
        self.returned = set()

    def generate(self, inps, **kw):
        outs = super().generate(inps, **kw)
        self.returned.update(o.text for o in outs)
        return outs


class HashScorer:
    """A stand-in for FBERT: a fixed value in [0, 1) per (qid, answer); NaN for q3 (no relevant
    document); 0 for an empty answer."""

    measure = 'FBERT'
    references = 'label>=2'

    def score_with_reference(self, qids, answers):
        scores = np.array([math.nan if q == 'q3' else (0.0 if not a else (hash((q, a)) % 1000) / 1000)
                           for q, a in zip(qids, answers)])
        return scores, [None if q == 'q3' else 'd' for q in qids]


def read(reader, frame):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return reader(frame)


@SETTINGS
@given(frame=result_frames(), n_samples=st.integers(1, 3), seed=st.integers(0, 5))
def test_reader_gives_one_backend_answer_per_query_and_sample_or_a_clear_error(frame, n_samples, seed):
    backend = RecordingBackend()
    try:
        out = read(Reader(backend, n_samples=n_samples, seed=seed), frame)
    except EXPECTED:
        return
    assert len(out) == len(frame) * n_samples
    assert set(out['qanswer']) <= backend.returned
    assert all(isinstance(q, str) for q in out['qid'])
    by = ['qid', 'sample'] if n_samples > 1 else ['qid']
    assert (out.groupby(by)['qanswer'].nunique() == 1).all()
    if n_samples > 1:
        assert sorted(set(out['sample'])) == list(range(n_samples)) or out.empty


@SETTINGS
@given(frame=result_frames(), n_samples=st.integers(1, 3))
def test_utility_is_exactly_the_relative_gain_and_nan_exactly_where_undefined(frame, n_samples):
    reader = Reader(RecordingBackend(), n_samples=n_samples)
    try:
        answered = read(reader, frame)
    except EXPECTED:
        return
    scorer = HashScorer()
    out = read(UtilityEvaluator(reader, scorer), answered)
    zero = read(reader, answered[['qid', 'query']].drop_duplicates('qid'))
    for qid, rows in out.groupby('qid'):
        k_answers = answered[answered['qid'] == qid]
        k_answers = k_answers.drop_duplicates('sample') if n_samples > 1 else k_answers.head(1)
        p_k = scorer.score_with_reference([qid] * len(k_answers), list(k_answers["qanswer"]))[0].mean()
        z = zero[zero['qid'] == qid]
        p_0 = scorer.score_with_reference([qid] * len(z), list(z["qanswer"]))[0].mean()
        u = rows['utility'].iloc[0]
        if math.isnan(p_k) or math.isnan(p_0) or p_0 == 0:
            assert math.isnan(u)
        else:
            assert math.isclose(u, (p_k - p_0) / p_0, rel_tol=1e-12, abs_tol=1e-15)
        assert rows['utility'].nunique(dropna=False) == 1


@SETTINGS
@given(stop=st.one_of(st.text(max_size=5), st.lists(st.text(max_size=5), max_size=3), st.integers(), st.none()),
       n_samples=st.one_of(st.integers(-1, 3), st.floats(0, 3), st.booleans()))
def test_reader_settings_are_accepted_as_meant_or_refused(stop, n_samples):
    try:
        reader = Reader(CountingBackend(), stop=stop, n_samples=n_samples)
    except SettingError:
        return
    assert isinstance(n_samples, int) and not isinstance(n_samples, bool) and n_samples >= 1
    assert all(isinstance(s, str) and s for s in reader.stop)
    if isinstance(stop, str):
        assert reader.stop == [stop]


@SETTINGS
@given(temperature=st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2, 2)),
       top_k=st.one_of(st.integers(-2, 60), st.none()),
       top_p=st.one_of(st.floats(-1, 2), st.none()),
       max_new_tokens=st.integers(-1, 400))
def test_sampling_settings_are_accepted_as_meant_or_refused(temperature, top_k, top_p, max_new_tokens):
    try:
        backend = OpenAICompatibleBackend('m', 'http://127.0.0.1:9/v1', temperature=temperature, top_k=top_k,
                                          top_p=top_p, max_new_tokens=max_new_tokens)
    except SettingError:
        return
    assert math.isfinite(temperature) and temperature >= 0
    assert top_k is None or top_k >= 0
    assert top_p is None or 0 < top_p <= 1
    assert max_new_tokens >= 1 and backend.max_new_tokens == max_new_tokens


class Scripted(CountingBackend):
    def __init__(self, outputs):
        super().__init__()
        self.outputs = outputs

    def generate(self, inps, **kw):
        return [BackendOutput(text=t) for t in self.outputs]


@SETTINGS
@given(outputs=st.lists(st.one_of(st.text(max_size=6), st.none(), st.integers(), st.just('ERROR::other')), max_size=4),
       prompts=st.lists(st.sampled_from(['a', 'b', 'c']), min_size=1, max_size=3, unique=True))
def test_only_strings_the_backend_produced_for_each_prompt_are_stored(outputs, prompts):
    cache = GenerationCache(Scripted(outputs))
    try:
        got = [o.text for o in cache.generate(prompts, seeds=[0] * len(prompts))]
    except BackendError:
        assert cache.store.memory == {}
        return
    assert got == outputs and len(outputs) == len(prompts)
    assert all(isinstance(t, str) and not t.startswith('ERROR::') for t in got)
