"""pyterrier-rag both ways: its readers, backends and BERTScore measure next to this package's."""
import pandas as pd
import pytest
from pyterrier_rag.readers import Reader as RagReader
from support.backends import CountingBackend

import pyterrier_utility as pu
from pyterrier_utility.errors import FrameError, SettingError

QUERY = pd.DataFrame({'qid': ['1'], 'query': ['what similarity laws must be obeyed when constructing aeroelastic '
                                              'models of heated high speed aircraft .'],
                      'qcontext': ['Context 1: the wing']})


def test_pyterrier_rags_reader_wraps_the_prompt_in_a_chat_template_and_plain_prompt_does_not():
    wrapped = CountingBackend()
    RagReader(wrapped)(QUERY)
    assert wrapped.calls[0].startswith('A chat between a curious human')  # fastchat's one_shot template
    assert 'birthday' in wrapped.calls[0]
    plain = CountingBackend()
    out = RagReader(plain, prompt=pu.interop.plain_prompt())(QUERY)
    assert plain.calls == [pu.reader.KSHOT_PROMPT.format(contexts='Context 1: the wing', query=QUERY['query'][0])]
    assert out['qanswer'].tolist() == ['the wing (seed 0, 1 contexts)']


def test_pyterrier_rags_reader_cannot_feed_the_evaluator_and_the_errors_say_what_to_use(cranfield, minilm):
    qrels = cranfield.get_qrels()
    scorer = pu.FBertScorer(qrels, cranfield.texts, labels=2, model_type=minilm)
    rag = RagReader(CountingBackend(), prompt=pu.interop.plain_prompt())
    with pytest.raises(SettingError, match=r'pyterrier_utility.Reader\(backend\).*FBertScorer'):
        pu.UtilityEvaluator(rag, scorer)
    answers = rag(QUERY)
    assert 'query' not in answers.columns
    evaluate = pu.UtilityEvaluator(pu.Reader(CountingBackend()), scorer)
    with pytest.raises(FrameError, match="no query column .*pyterrier-rag's Reader drops it"):
        evaluate(answers)
    # What works: FBERT of its answers, and its backend inside this package's Reader.
    assert scorer(answers)['fbert'].tolist() == pytest.approx(scorer.score(['1'], answers['qanswer']).tolist())
    reader = pu.Reader(CountingBackend())
    frame = (reader >> pu.UtilityEvaluator(reader, scorer))(QUERY[['qid', 'query']])
    assert frame[['qid', 'utility']].values.tolist() == [['1', 0.0]]


def test_pyterrier_rags_huggingface_backend_keeps_its_max_new_tokens_inside_reader(gemma):
    from pyterrier_rag.backend import HuggingFaceBackend
    backend = HuggingFaceBackend(str(pu.backends.gemma3_270m_path()), generation_args={'do_sample': False},
                                 max_new_tokens=3)
    seen = []
    generate = backend._model.generate
    backend._model.generate = lambda **kw: seen.append(kw.get('max_new_tokens')) or generate(**kw)
    pu.Reader(backend)(QUERY[['qid', 'query']])
    assert seen == [3]
    pu.Reader(backend, max_new_tokens=2)(QUERY[['qid', 'query']])
    assert seen == [3, 2]


class _BertScoreMetric:
    """Stands in for Hugging Face ``evaluate``'s "bertscore" metric (a wrapper of bert_score, loaded
    from the hub, so unavailable offline) with bert_score itself on the offline MiniLM."""

    def __init__(self):
        from bert_score import BERTScorer
        self.scorer = BERTScorer(model_type=pu.rerankers.minilm_path(), num_layers=6)

    def compute(self, predictions, references, lang, model_type, verbose):
        p, r, f = self.scorer.score(predictions, references)
        return {'precision': p.tolist(), 'recall': r.tolist(), 'f1': f.tolist()}


def test_fbert_equals_pyterrier_rags_bertscore_max_on_the_same_pairs(cranfield, minilm, monkeypatch):
    import ir_measures
    from pyterrier_rag import _measures
    from pyterrier_rag.measures import BERTScore
    monkeypatch.setattr(_measures, '_bertscore_model', _BertScoreMetric())
    qrels = cranfield.get_qrels()
    # pyterrier-rag's measure fails on a query with no document at the threshold (FBERT: NaN, warned)
    qids = sorted(set(qrels.loc[qrels['label'] >= 3, 'qid']), key=int)[:3]
    answers = pd.DataFrame({'qid': qids, 'qanswer': [
        'similarity laws for heated aeroelastic models', 'the shock wave moves upstream', 'lift of a slender wing']})
    judged = qrels[qrels['qid'].isin(answers['qid'])]
    rag_qrels = judged.rename(columns={'qid': 'query_id', 'docno': 'doc_id', 'label': 'relevance'}).assign(
        text=judged['docno'].map(cranfield.texts))
    run = answers.rename(columns={'qid': 'query_id'}).assign(doc_id='-', score=0.0)
    for rel in (2, 3):
        theirs = {m.query_id: m.value for m in ir_measures.iter_calc([BERTScore(rel=rel, agg='max')], rag_qrels, run)}
        ours = pu.FBertScorer(qrels, cranfield.texts, labels=rel, model_type=minilm)(answers)
        assert ours.set_index('qid')['fbert'].to_dict() == pytest.approx(theirs, abs=1e-6)
