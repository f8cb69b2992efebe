"""PyTerrier citizenship: every public transformer inspects, prints, pickles and fuses like the core's."""
import pickle
import re

import pandas as pd
import pyterrier as pt
import pytest
from pandas.testing import assert_frame_equal
from support.backends import CountingBackend

import pyterrier_utility as pu

QRELS = pd.DataFrame({'qid': ['1', '1', '2'], 'docno': ['12', '13', '14'], 'label': [3, 0, 2]})


@pytest.fixture(scope='module')
def transformers(cranfield, minilm, tmp_path_factory):
    reader = pu.Reader(pu.GenerationCache(CountingBackend(), tmp_path_factory.mktemp('g') / 'g.sqlite'))
    scorer = pu.FBertScorer(QRELS, cranfield.texts, model_type=minilm)
    gold = pu.Reader(CountingBackend(), n_samples=3)
    run = tmp_path_factory.mktemp('run') / 'run.txt'
    run.write_text('1 Q0 12 0 2.0 r\n1 Q0 13 1 1.0 r\n')
    embeddings = pu.methods.cosmix.CorpusEmbeddings({'12': cranfield.texts['12'], '13': cranfield.texts['13']})
    dense = pu.methods.cosmix.DenseRetriever(embeddings, cranfield.texts)
    hybrid = pu.methods.cosmix.HybridRetriever(cranfield.bm25(num_results=5), dense)
    return {
        'Reader': reader, 'ReverseOrder': pu.ReverseOrder(), 'OracleSampler': pu.OracleSampler(QRELS, cranfield.texts),
        'FBertScorer': scorer, 'UtilityEvaluator': pu.UtilityEvaluator(reader, scorer),
        'GoldAnswerScorer': pu.GoldAnswerScorer({'1': ['lift']}, 'bertscore-gold', model_type=minilm),
        'ERAGLabeller': pu.ERAGLabeller(reader, scorer), 'ContextAttribution': pu.ContextAttribution(reader, scorer),
        'LLMRetEval': pu.LLMRetEval(reader, QRELS, cranfield.texts, bertscore=minilm, gold_reader=gold),
        'TextLoader': cranfield.text_loader(), 'GenerationCache': reader.cache,
        'PisaBM25': cranfield.bm25(num_results=5)[0], 'RunFile': pu.RunFile(run, cranfield.texts),
        'DenseRetriever': dense, 'HybridRetriever': hybrid,
        'COSMix': pu.methods.cosmix.COSMix(reader, pu.methods.cosmix.Validator(CountingBackend(seeded=False)), hybrid,
                                           dense, k=2),
    }


@pytest.fixture(scope='module')
def inputs(cranfield):
    """A small input of each kind: a query, its BM25 results (with and without text), and their answers."""
    topics = cranfield.get_topics().head(1)
    results = cranfield.bm25(num_results=3)(topics)
    return {'topics': topics, 'results': results, 'docnos': results.drop(columns=['text']),
            'answered': pu.Reader(CountingBackend())(results)}


#: The input each transformer is run on (the generation cache is a backend: it is given prompts).
INPUT = {'Reader': 'results', 'ReverseOrder': 'results', 'OracleSampler': 'topics', 'FBertScorer': 'answered',
         'GoldAnswerScorer': 'answered', 'UtilityEvaluator': 'answered', 'ERAGLabeller': 'results',
         'ContextAttribution': 'results',
         'LLMRetEval': 'answered', 'TextLoader': 'docnos', 'PisaBM25': 'topics', 'RunFile': 'topics',
         'DenseRetriever': 'topics', 'HybridRetriever': 'topics', 'COSMix': 'topics'}


@pytest.mark.parametrize('name', ['Reader', 'ReverseOrder', 'OracleSampler', 'FBertScorer', 'GoldAnswerScorer',
                                  'UtilityEvaluator',
                                  'ERAGLabeller', 'ContextAttribution',
                                  'LLMRetEval', 'TextLoader', 'GenerationCache', 'PisaBM25', 'RunFile',
                                  'DenseRetriever', 'HybridRetriever', 'COSMix'])
def test_every_public_transformer_has_inspectable_attributes_a_telling_repr_and_pickles(name, transformers, inputs):
    transformer = transformers[name]
    attributes = pt.inspect.transformer_attributes(transformer)  # raises for an argument not kept under its name
    assert all(a.value is not pt.inspect.TransformerAttribute.MISSING for a in attributes)
    assert ' object at 0x' not in repr(transformer).replace('CountingBackend object at', '')
    clone = pickle.loads(pickle.dumps(transformer))

    def settings(t):  # the repr, but for where the test backend sits in memory
        return re.sub(r' object at 0x[0-9a-f]+', '', repr(t))
    assert type(clone) is type(transformer) and settings(clone) == settings(transformer)
    assert [a.name for a in pt.inspect.transformer_attributes(clone)] == [a.name for a in attributes]
    if name == 'GenerationCache':
        assert ([a.text for a in clone.generate(['a prompt'], seeds=[3])]
                == [a.text for a in transformer.generate(['a prompt'], seeds=[3])])
    else:
        assert_frame_equal(clone(inputs[INPUT[name]]), transformer(inputs[INPUT[name]]))


def test_reprs_tell_different_instances_apart(cranfield):
    texts = cranfield.texts
    assert repr(pu.OracleSampler(QRELS, texts, seed=1)) != repr(pu.OracleSampler(QRELS, texts, seed=2))
    assert repr(pu.OracleSampler(QRELS, texts, labels=2)) != repr(pu.OracleSampler(QRELS, texts, labels=3))
    assert repr(pu.OracleSampler(QRELS, texts, num_results=5)) != repr(pu.OracleSampler(QRELS, texts))
    backend = CountingBackend()
    assert repr(pu.Reader(backend, seed=1)) != repr(pu.Reader(backend, seed=2))
    assert repr(pu.Reader(backend, stop=['STOP'])) != repr(pu.Reader(backend, stop=['\n']))
    assert repr(pu.ReverseOrder()) == 'ReverseOrder()'


def test_the_reader_declares_both_modes():
    assert pt.inspect.transformer_inputs(pu.Reader(CountingBackend())) == [['qid', 'docno', 'query', 'text'],
                                                                           ['qid', 'query']]


def test_a_whole_pipeline_pickles_and_gives_the_same_frame(cranfield, minilm, tmp_path):
    qrels = cranfield.get_qrels()
    reader = pu.Reader(pu.GenerationCache(CountingBackend(), tmp_path / 'g.sqlite'), n_samples=2)
    evaluate = pu.UtilityEvaluator(reader, pu.FBertScorer(qrels, cranfield.texts, model_type=minilm))
    pipeline = cranfield.bm25(num_results=20) % 3 >> reader >> evaluate
    topics = cranfield.get_topics().head(2)
    before = pipeline(topics)
    clone = pickle.loads(pickle.dumps(pipeline))
    assert_frame_equal(clone(topics), before)
    assert clone[-1].reader.cache.backend.calls == reader.cache.backend.calls  # nothing generated again


def test_the_embedded_collection_is_a_pyterrier_dataset_with_a_text_loader(cranfield):
    dataset = pt.get_dataset('utility:cranfield')
    assert isinstance(dataset, pt.datasets.Dataset) and len(dataset.get_topics()) == 225
    out = pt.text.get_text(cranfield, 'text')(pd.DataFrame({'qid': ['1'], 'docno': ['1']}))
    assert out['text'].iloc[0] == cranfield.texts['1']
    with pytest.raises(pu.errors.SettingError, match="provides the field 'text'"):
        cranfield.text_loader(['title', 'author'])


def test_seeding_leaves_torch_and_the_callers_tokenizer_as_they_were(gemma):
    import torch
    from pyterrier_rag.backend import Backend, BackendOutput

    class Unseeded(Backend):
        def generate(self, inps, **kw):
            return [BackendOutput(text=str(torch.rand(1).item())) for _ in inps]

    torch.manual_seed(123)
    expected = torch.rand(1)
    torch.manual_seed(123)
    pu.GenerationCache(Unseeded('u')).generate(['a', 'b'], seeds=[5, 6])
    assert torch.rand(1) == expected  # the global generator is where the caller left it
    side = gemma.tokenizer.padding_side
    gemma.tokenizer.padding_side = 'right'
    pu.backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='g')
    assert gemma.tokenizer.padding_side == 'right'
    gemma.tokenizer.padding_side = side
