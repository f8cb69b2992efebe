"""The design-card pipeline inside pt.Experiment on the embedded Cranfield."""
import numpy as np
import pyterrier as pt
import pytest
from pyterrier.measures import nDCG

import pyterrier_utility as pu


@pytest.fixture(scope='module')
def tiny_t5(tmp_path_factory):
    """A randomly initialised T5 with single-token "true"/"false": MonoT5 wiring, not ranking."""
    import string

    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer
    path = tmp_path_factory.mktemp('tiny-t5')
    vocab = [('<pad>', 0.0), ('</s>', 0.0), ('<unk>', 0.0), ('\u2581', -2.0), ('\u2581true', -5.0),
             ('\u2581false', -5.0)]
    vocab += [(c, -10.0) for c in string.ascii_lowercase + string.digits + ':.,?']
    vocab += [('\u2581' + c, -11.0) for c in string.ascii_lowercase]
    import sentencepiece  # noqa: F401  (the slow tokenizer needs it)
    tok = T5Tokenizer(vocab=vocab, extra_ids=0)
    tok.save_pretrained(path)
    config = T5Config(vocab_size=len(tok), d_model=32, d_ff=64, d_kv=8, num_layers=2, num_decoder_layers=2,
                      num_heads=4, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0, n_positions=512)
    T5ForConditionalGeneration(config).save_pretrained(path)
    return str(path)


@pytest.mark.slow
def test_design_card_pipeline_in_experiment(cranfield, minilm, counting_backend, tiny_t5):
    from pyterrier_t5 import MonoT5ReRanker
    qrels = cranfield.get_qrels()
    topics = pu.datasets.answerable_topics(cranfield.get_topics().head(6), qrels, labels=2)
    reader = pu.Reader(counting_backend)
    evaluate = pu.UtilityEvaluator(reader, pu.FBertScorer(qrels, cranfield.texts, labels=2, model_type=minilm))
    bm25 = cranfield.bm25(num_results=20)
    monot5 = MonoT5ReRanker(model=tiny_t5, tok_model=tiny_t5, batch_size=8, verbose=False)
    dense = pu.rerankers.minilm_reranker()
    k = 3
    systems = {
        'BM25': bm25 % k,
        'BM25-r': bm25 % k >> pu.ReverseOrder(),
        'MonoT5': bm25 >> monot5 % k,
        'Dense': bm25 >> dense % k,
        'Dense-r': bm25 >> dense % k >> pu.ReverseOrder(),
        'Rel': pu.OracleSampler(qrels, cranfield.texts, labels=2) % k,
        'NRel': pu.OracleSampler(qrels, cranfield.texts, relevant=False, fill_unjudged=True) % k,
    }
    res = pt.Experiment([s >> reader >> evaluate for s in systems.values()], topics, qrels,
                        [nDCG @ k, pu.FBERT, pu.FBERT0, pu.Utility], names=list(systems), baseline=5)
    res = res.set_index('name')
    assert res.loc['Rel', 'nDCG@3'] > res.loc['BM25', 'nDCG@3'] > res.loc['NRel', 'nDCG@3'] == 0
    assert res['FBERT0'].nunique() == 1  # one 0-shot answer per query, shared by every system
    # ... so its test columns compare it with itself: never a mark, never a p-value.
    others = res.drop(index='Rel')
    assert (others['FBERT0 +'] == 0).all() and (others['FBERT0 -'] == 0).all() and others['FBERT0 p-value'].isna().all()
    assert 'not significance-tested' in pu.FBERT0.SHORT_DESC
    # Same documents, evaluated in the order the reader sees them.
    assert res.loc['BM25-r', 'nDCG@3'] < res.loc['BM25', 'nDCG@3']
    assert 'Utility p-value' in res.columns
    zero_shot_prompts = [c for c in counting_backend.calls if 'Context 1' not in c]
    assert len(zero_shot_prompts) == len(topics)


def test_offline_reader_answers_from_context(cranfield, minilm, gemma):
    qrels = cranfield.get_qrels()
    reader = pu.Reader(gemma, stop=pu.reader.BASE_MODEL_STOP)
    evaluate = pu.UtilityEvaluator(reader, pu.FBertScorer(qrels, cranfield.texts, labels=2, model_type=minilm))
    topics = cranfield.get_topics().head(2)
    out = (pu.OracleSampler(qrels, cranfield.texts, labels=2) % 2 >> reader >> evaluate)(topics)
    assert set(out['qid']) == {'1', '2'}
    assert out['qanswer'].str.len().gt(0).any()  # an empty answer is possible: scored 0, warned
    assert out['quality'].between(0, 1).all() and out['quality_0shot'].between(0, 1).all()


@pytest.mark.slow
def test_the_notebook_reader_with_its_defaults_is_the_studys(cranfield, minilm, tmp_path):
    """``pu.Reader(pu.backends.gemma3_270m())``, nothing else given, generates what the study generates
    for its default reader: the same generation key, prompt format and stops, answers and U for the same
    query, system and k. The study answers its 0-shot and k-shot prompts in one batch, the pipeline in
    two: the reader is batch-invariant, so the answers are the same."""
    from pyterrier_utility.commands import run
    from pyterrier_utility.study import StudyConfig
    config = StudyConfig(queries=1, ks=(2,), systems=('Rel',), samples=1, label_sets=(2,), out=str(tmp_path))
    results, _ = run(config)
    qrels = cranfield.get_qrels()
    topics = pu.datasets.answerable_topics(cranfield.get_topics(), qrels, labels=2).head(1)
    reader = pu.Reader(pu.backends.gemma3_270m())
    assert reader.backend.generation_key == results.settings['backends']['gemma3-270m']
    # The key its answers are cached under: the backend's decoding with the reader's stops.
    assert reader.cache.backend.decoding == reader.backend.decoding.replace(stop=tuple(reader.stop))
    assert reader.template.name == 'example' and reader.stop == results.settings['engines']['gemma3-270m']['stop']
    evaluate = pu.UtilityEvaluator(reader, pu.FBertScorer(qrels, cranfield.texts, labels=2, model_type=minilm))
    piped = (pu.OracleSampler(qrels, cranfield.texts, labels=2) % 2 >> reader >> evaluate)(topics)
    piped = piped.drop_duplicates('qid')
    answers = results.answers[results.answers['system'] == 'Rel'].set_index('qid')
    assert list(piped['qanswer']) == list(answers.loc[piped['qid'], 'qanswer'])
    # U to float32 precision: the two scorers encode their texts in batches of other compositions.
    study = results.per_query.set_index('qid').loc[piped['qid'], 'utility'].to_numpy()
    np.testing.assert_allclose(piped['utility'].to_numpy(), study, rtol=1e-5)


def test_a_reader_takes_a_reader_name_or_refuses_at_construction(counting_backend):
    with pytest.raises(pu.errors.SettingError, match=r"unknown reader 'gemma3-207m' \(did you mean 'gemma3-270m'\?\); "
                                                     'choose from gemma3-270m, smollm2-135m, huggingface:MODEL'):
        pu.Reader('gemma3-207m')
    with pytest.raises(pu.errors.SettingError, match='Reader: backend must be a reader name .* got int 3'):
        pu.Reader(3)
    assert pu.Reader(counting_backend).template.name == 'plain'  # a backend that needs no format of its own
