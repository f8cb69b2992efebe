"""Batch invariance of the offline engine: an answer, its token log-probabilities and ``truncated``
depend on the prompt and seed alone, bit for bit; so do the values of every other forward pass."""
import contextlib
import copy

import pytest
import torch

from pyterrier_utility import backends
from pyterrier_utility.backends.hf import invariant
from pyterrier_utility.backends.hf.backend import INVARIANT_BATCHING, ROWS_ALONE_BATCHING
from pyterrier_utility.errors import SettingError, UtilityWarning

#: Prompts of different lengths (one past a line chunk), two sharing their first lines.
PROMPTS = [
    'Question: what is a sigmet?\nAnswer:',
    'Context 1: the boundary layer of a flat plate in supersonic flow was measured in a wind tunnel at '
    'Mach numbers from 1.5 to 3, with heat transfer to the plate.\nQuestion: what was measured?\nAnswer:',
    'Context 1: the boundary layer of a flat plate in supersonic flow was measured in a wind tunnel at '
    'Mach numbers from 1.5 to 3, with heat transfer to the plate.\nContext 2: shock waves.\n'
    'Question: what was measured?\nAnswer:',
    'Question: heat?\nAnswer:',
]
SEEDS = (11, 12, 13)
#: A prompt of one context line of about 500 tokens: one prefill chunk of that many rows.
LONG = ('Context 1: ' + ' '.join(['the boundary layer of a flat plate in supersonic flow was measured in a wind '
                                  'tunnel at Mach numbers from 1.5 to 3, with heat transfer to the plate;'] * 16)
        + '\nQuestion: what was measured?\nAnswer:')


@contextlib.contextmanager
def threads(count: int):
    """torch runs ``count`` threads inside (a pytest-xdist worker runs fewer than the CPU has)."""
    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)


#: Several threads, however many the process runs.
SEVERAL = max(torch.get_num_threads(), 2)


def engine(gemma, dtype, **kwargs):
    kwargs = {'temperature': 1.0, 'top_k': 50, 'max_new_tokens': 12, 'batch_size': 32, **kwargs}
    return backends.CausalLMBackend(gemma.model, gemma.tokenizer, model_id='gemma-test', dtype=dtype, **kwargs)


def answers(outputs):
    return [(o.text, o.token_logprobs, o.truncated) for o in outputs]


@pytest.mark.slow
@pytest.mark.parametrize('dtype', ['float32', 'bfloat16'])
def test_an_answer_is_the_same_alone_in_any_batch_with_any_samples_order_cache_or_threads(gemma, dtype):
    """Each (prompt, seed) answered alone, then among every other prompt and seed in one batch of mixed
    lengths, in reverse order in batches of 2, after its prefix was cached, and on another number of
    threads where the backend's tile holds across thread counts: the same text, token log-probabilities and
    truncation, byte for byte, every time."""
    backend = engine(gemma, dtype)
    alone = {}
    for prompt in PROMPTS:
        for seed in SEEDS:
            backend.prefixes.clear()
            alone[prompt, seed] = answers(backend.generate([prompt], seeds=[seed]))[0]
    pairs = [(p, s) for s in SEEDS for p in PROMPTS]
    together = answers(backend.generate([p for p, _ in pairs], seeds=[s for _, s in pairs]))  # prefixes cached
    assert together == [alone[pair] for pair in pairs]
    small = engine(gemma, dtype, batch_size=2, prefix_cache_mb=0)
    reversed_pairs = pairs[::-1]
    assert answers(small.generate([p for p, _ in reversed_pairs], seeds=[s for _, s in reversed_pairs])) == \
        [alone[pair] for pair in reversed_pairs]
    assert len({text for text, _, _ in alone.values()}) > len(PROMPTS)  # samples differ: the test can see a change
    assert 'batch-invariant' in backend.reproducibility
    if backend.tile_threads is not None:
        # No tile holds across thread counts on this CPU in this dtype (a Xeon with AMX in float32): the
        # answers hold at the process's number of threads, and the batching says at how many.
        assert backend.tile_threads == torch.get_num_threads()
        assert backend.batching == f'{INVARIANT_BATCHING} at {invariant.threads_text(backend.tile_threads)}'
        pytest.skip(f'no row tile holds across thread counts on this CPU in {dtype}: the answers on another number '
                    'of threads are not promised (the batching names the threads), so they are not checked')
    assert backend.batching == INVARIANT_BATCHING
    # A prompt whose first line is a prefill chunk of hundreds of tokens (its products past the rows where
    # a BLAS splits rows between threads), here on the process's threads
    long_alone = answers(backend.generate([LONG], seeds=[SEEDS[0]]))
    # On another number of threads than the process's (one, or two in a pytest-xdist worker of one)
    with threads(1 if torch.get_num_threads() > 1 else 2):
        assert answers(backend.generate([PROMPTS[2]] * 3, seeds=list(SEEDS))) == [alone[PROMPTS[2], s] for s in SEEDS]
        assert answers(backend.generate([LONG], seeds=[SEEDS[0]])) == long_alone


def test_the_thread_mechanism_itself_a_linear_layer_sees_at_most_probe_rows_and_attention_one_thread(gemma,
                                                                                                 monkeypatch):
    """What keeps a long prompt's answer thread-invariant, checked as it runs, on any CPU (where this CPU's
    kernels would agree anyway, only this can fail): every product of a linear layer is given at most
    :data:`~invariant.PROBE_ROWS` rows, and attention's products, a prefill chunk's and a decode step's over
    the prompt's keys held once, run on one thread."""
    rows = []
    attention_threads: dict = {'_attended': [], '_attended_shared': []}
    linear = invariant.F.linear
    monkeypatch.setattr(invariant.F, 'linear', lambda x, w, b=None: rows.append(x.shape[0]) or linear(x, w, b))
    for name, seen in attention_threads.items():
        monkeypatch.setattr(invariant, name, lambda *a, attended=getattr(invariant, name), seen=seen:
                            seen.append(torch.get_num_threads()) or attended(*a))
    with threads(2):
        gemma.prefixes.clear()
        gemma.generate([LONG], seeds=[0])
    assert max(rows) == invariant.PROBE_ROWS
    assert all(seen and set(seen) == {1} for seen in attention_threads.values()), attention_threads


def test_a_tiled_linear_layer_gives_each_row_its_values_at_every_row_count_and_thread_count(gemma):
    """The tile found for the model holds for every layer shape (the output layer whole): each row's
    values in a batch of any size, on one thread or all, are those it gets alone. Bias-free bfloat16
    layers on a CPU compute a decode step weight-major, the output layer's product left transposed."""
    model = gemma.model
    layers = {tuple(m.weight.shape): m for m in model.modules() if isinstance(m, invariant.TiledLinear)}
    assert gemma.row_tile in invariant.TILES and {m.row_tile for m in layers.values()} == {gemma.row_tile}
    generator = torch.Generator().manual_seed(0)
    for shape, layer in layers.items():
        x = torch.randn(9, 1, shape[1], generator=generator).to(layer.weight.dtype)
        alone = [layer(x[i:i + 1]) for i in range(9)]
        for count in (SEVERAL, 1):
            with threads(count):
                for rows in (2, 5, 9):
                    together = layer(x[:rows])
                    assert all(torch.equal(together[i], alone[i][0]) for i in range(rows)), (shape, rows, count)
    bf16 = invariant.tiled(torch.nn.Sequential(torch.nn.Linear(8, 3, bias=False, dtype=torch.bfloat16)),
                           weight_major=True)
    assert bf16[0].weight_major and type(bf16[0]) is invariant.TiledLinear
    x = torch.randn(2, 1, 8).to(torch.bfloat16)
    assert torch.equal(bf16[0](x), torch.nn.functional.linear(x, bf16[0].weight))


@pytest.mark.parametrize('dtype', ['float32', 'bfloat16'])
def test_a_prefill_chunk_of_hundreds_of_rows_gives_each_row_the_same_values_on_one_thread_and_several(gemma, dtype):
    """A prefill chunk's products, past the row counts where a BLAS splits the rows between threads (on
    a Xeon with AMX in bfloat16: from 79 rows for one of Gemma 3's layer shapes), give each row the same
    values on one thread as on several: they are computed in blocks of rows the tile was measured at,
    each row's values those it gets in its block alone."""
    backend = engine(gemma, dtype)
    if backend.rows_alone:
        pytest.skip('no row tile holds on this CPU kind in this dtype: each answer is decoded alone')
    counts = (SEVERAL, 1) if backend.tile_threads is None else (backend.tile_threads,)
    layers = {tuple(m.weight.shape): m for m in backend.model.modules() if isinstance(m, invariant.TiledLinear)
              and m is not backend.model.get_output_embeddings()}
    generator = torch.Generator().manual_seed(1)
    for shape, layer in layers.items():
        x = torch.randn(1, 520, shape[1], generator=generator).to(layer.weight.dtype)
        with threads(counts[-1]):  # the blocks alone (a prefill chunk of 64 rows)
            blocks = torch.cat([layer(x[:, i:i + invariant.PROBE_ROWS])
                                for i in range(0, 520, invariant.PROBE_ROWS)], 1)
        for count in counts:
            with threads(count):
                for rows in (65, 79, 130, 320, 468, 520):
                    assert torch.equal(layer(x[:, :rows]), blocks[:, :rows]), (shape, rows, count)


def test_the_attention_of_a_left_padded_row_is_that_of_the_row_alone():
    """A row left-padded among longer mates (a boolean mask as transformers builds it) attends over its
    own keys: bit for bit its values alone, where torch's fused attention over the padded keys is not
    bound to be; a mask that is not one span ending at the last key is refused."""
    generator = torch.Generator().manual_seed(3)
    module = torch.nn.Module()
    heads, dim = 4, 64
    lengths = (37, 300, 300, 5)
    longest = max(lengths)
    keys = torch.randn(len(lengths), 1, longest, dim, generator=generator)
    values = torch.randn(len(lengths), 1, longest, dim, generator=generator)
    query = torch.randn(len(lengths), heads, 1, dim, generator=generator)
    mask = torch.zeros(len(lengths), 1, 1, longest, dtype=torch.bool)
    for row, length in enumerate(lengths):
        mask[row, ..., longest - length:] = True
    together, _ = invariant.batch_invariant_attention(module, query, keys, values, mask, scaling=0.125)
    for row, length in enumerate(lengths):
        start = longest - length
        alone, _ = invariant.batch_invariant_attention(module, query[row:row + 1], keys[row:row + 1, :, start:],
                                                       values[row:row + 1, :, start:], None, scaling=0.125)
        assert torch.equal(together[row], alone[0]), length
        expected = torch.nn.functional.scaled_dot_product_attention(
            query[row:row + 1], keys[row:row + 1, :, start:], values[row:row + 1, :, start:], scale=0.125,
            enable_gqa=True).transpose(1, 2)
        torch.testing.assert_close(alone, expected)
    holed = mask.clone()
    holed[1, ..., -2] = False
    with pytest.raises(RuntimeError, match='not one span ending at the last'):
        invariant.batch_invariant_attention(module, query, keys, values, holed, scaling=0.125)


@pytest.mark.parametrize('tile', [1, 4, 8])
def test_grouped_query_attention_over_several_key_heads_in_padded_tiles_is_torchs(tile):
    """Several key heads, each shared by 3 query heads (SmolLM2's 9 over 3), in tiles that pad the
    folded rows (3 x 5 of them): the values of torch's attention, for a prefill chunk and a decode step."""
    generator = torch.Generator().manual_seed(5)
    module = torch.nn.Module()
    module.row_tile = tile
    for length in (5, 1):
        q = torch.randn(2, 9, length, 16, generator=generator)
        k = torch.randn(2, 3, 7, 16, generator=generator)
        v = torch.randn(2, 3, 7, 16, generator=generator)
        mask = torch.ones(2, 1, length, 7, dtype=torch.bool).tril(7 - length)
        got, _ = invariant.batch_invariant_attention(module, q, k, v, mask, scaling=0.25)
        expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=0.25,
                                                                    enable_gqa=True).transpose(1, 2)
        torch.testing.assert_close(got, expected)


@pytest.mark.slow
def test_the_offline_smollm2_reader_answers_alike_alone_and_in_a_batch():
    """SmolLM2 135M, the offline reader whose attention has several key heads (9 query heads over 3):
    each (prompt, seed) the same alone as among the others, in float32 (row tiles of several rows here)."""
    backend = backends.smollm2_135m(temperature=1.0, top_k=50, max_new_tokens=8, dtype='float32')
    pairs = [(p, s) for s in SEEDS[:2] for p in PROMPTS]
    alone = [answers(backend.generate([p], seeds=[s]))[0] for p, s in pairs]
    assert answers(backend.generate([p for p, _ in pairs], seeds=[s for _, s in pairs])) == alone
    assert all(logprobs for _, logprobs, _ in alone) and len({text for text, _, _ in alone}) > len(PROMPTS)


def test_a_prefill_chunk_attends_causally_after_its_cached_prefix():
    """A chunk of queries after cached keys, with no mask given: each query sees the keys up to its
    own position, as torch's causal attention over the whole sequence gives it."""
    generator = torch.Generator().manual_seed(4)
    q = torch.randn(1, 4, 10, 32, generator=generator)
    k = torch.randn(1, 2, 10, 32, generator=generator)
    v = torch.randn(1, 2, 10, 32, generator=generator)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    got, _ = invariant.batch_invariant_attention(torch.nn.Module(), q[:, :, 6:], k, v, None, scaling=32 ** -0.5)
    torch.testing.assert_close(got, expected[:, :, 6:].transpose(1, 2))


def test_a_model_on_an_accelerator_decodes_padded_batches_and_says_so(gemma):
    """The invariance is built for CPUs: a model elsewhere (here on torch's meta device, as on a GPU)
    decodes padded batches by default, measures no tile, and its reproducibility says that batch mates
    can change an answer; ``invariant=True`` there is refused, naming the device."""
    from transformers import AutoModelForCausalLM
    config = copy.deepcopy(gemma.model.config)
    config.num_hidden_layers, config.layer_types = 2, config.layer_types[:2]
    with torch.device('meta'):
        model = AutoModelForCausalLM.from_config(config)
    backend = backends.CausalLMBackend(model, gemma.tokenizer, model_id='meta-test')
    assert (backend.invariant, backend.row_tile) == (False, 1)
    assert backend.batching.startswith('padded batches') and 'other batch mates can change' in backend.reproducibility
    with pytest.raises(SettingError, match=r"'meta-test'\): invariant=True is for a model on a CPU, not on meta"):
        backends.CausalLMBackend(model, gemma.tokenizer, model_id='meta-test', invariant=True)


def test_where_no_row_tile_holds_each_answer_is_decoded_alone_and_is_the_same_in_any_batch(gemma, monkeypatch):
    """On a CPU where no row tile makes the products batch-invariant (every tile refused here), the backend
    says so in a warning, decodes each answer as a batch of one row, and an answer is the same alone as
    among other prompts and samples; its batching (part of the generation key) and reproducibility say so."""
    monkeypatch.setattr(invariant, '_tile_holds', lambda *args, **kwargs: False)
    monkeypatch.setattr(invariant, '_TILES', {})
    with pytest.warns(UtilityWarning, match=r"no row tile makes the matrix products batch-invariant on this CPU in "
                                            r"torch.float32 .*each answer is decoded alone"):
        backend = engine(gemma, 'float32', max_new_tokens=6)
    assert (backend.row_tile, backend.rows_alone, backend.batching) == (None, True, ROWS_ALONE_BATCHING)
    assert 'each answer decoded alone' in backend.reproducibility
    pairs = [(p, s) for s in SEEDS[:2] for p in PROMPTS[:3]]
    alone = [answers(backend.generate([p], seeds=[s]))[0] for p, s in pairs]
    assert answers(backend.generate([p for p, _ in pairs], seeds=[s for _, s in pairs])) == alone
    assert len({text for text, _, _ in alone}) > 3


def test_where_tiles_hold_only_at_the_process_threads_the_batches_stay_invariant_at_that_count(gemma, monkeypatch):
    """On a CPU where no row tile gives the same values on one thread as on several, but one does at the
    process's own number of threads (measured so on a Xeon with AMX in float32), the backend keeps decoding
    batches in that tile, and says at how many threads its answers hold: an answer is the same alone as among
    other prompts and samples, and its batching (part of the generation key) names the count."""
    holds = invariant._tile_holds
    monkeypatch.setattr(invariant, '_tile_holds', lambda *args, threads=None, **kwargs:
                        threads is not None and holds(*args, threads=threads, **kwargs))
    monkeypatch.setattr(invariant, '_TILES', {})
    with threads(2):
        backend = engine(gemma, 'float32', max_new_tokens=6)
        assert (backend.rows_alone, backend.tile_threads) == (False, 2) and backend.row_tile in invariant.TILES
        assert backend.batching == f'{INVARIANT_BATCHING} at 2 threads' and 'at 2 threads' not in INVARIANT_BATCHING
        assert 'batch-invariant at this number of threads' in backend.reproducibility
        pairs = [(p, s) for s in SEEDS[:2] for p in PROMPTS[:3]]
        alone = [answers(backend.generate([p], seeds=[s]))[0] for p, s in pairs]
        assert answers(backend.generate([p for p, _ in pairs], seeds=[s for _, s in pairs])) == alone
    with threads(1):  # a process of one thread: the tile that holds there, said in the singular
        monkeypatch.setattr(invariant, '_TILES', {})
        assert engine(gemma, 'float32', max_new_tokens=6).batching == f'{INVARIANT_BATCHING} at 1 thread'


def test_an_output_layer_that_holds_only_as_linear_computes_it_so(gemma, monkeypatch):
    """A bfloat16 output layer whose weight-major product no tile makes batch-invariant (as on a Xeon with
    AMX) is computed as ``linear`` where that holds, and the answers stay batch-invariant."""
    holds = invariant._tile_holds
    vocabulary = gemma.model.get_output_embeddings().weight.shape[0]  # only the whole output layer has as many
    monkeypatch.setattr(invariant, '_tile_holds', lambda weight, rows, tile, major, *args, **kwargs:
                        not (major and weight.shape[0] == vocabulary) and holds(weight, rows, tile, major, *args,
                                                                                 **kwargs))
    monkeypatch.setattr(invariant, '_TILES', {})
    backend = engine(gemma, 'bfloat16', max_new_tokens=6)
    head = backend.model.get_output_embeddings()
    assert (head.weight_major, head.transposed_output, backend.rows_alone) == (False, False, False)
    assert any(m.weight_major for m in backend.model.modules() if isinstance(m, invariant.TiledLinear))
    pairs = [(p, s) for s in SEEDS[:2] for p in PROMPTS[:3]]
    alone = [answers(backend.generate([p], seeds=[s]))[0] for p, s in pairs]
    assert answers(backend.generate([p for p, _ in pairs], seeds=[s for _, s in pairs])) == alone


def test_a_texts_logprobs_are_those_of_the_models_forward_pass_whatever_was_scored_before(gemma):
    """``text_logprobs`` equals the log-softmax of the model's own forward pass at each next token,
    and scoring other texts first changes none of its bits."""
    text = 'the lift of a wing is large at a high angle of attack in a supersonic flow'
    ids = gemma.tokenizer(text).input_ids
    with torch.no_grad():
        logits = gemma.model(torch.tensor([ids])).logits[0, :-1].float()
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
    first = gemma.text_logprobs(text)
    torch.testing.assert_close(first, expected, rtol=1e-4, atol=1e-3)  # other kernels: the output layer in tiles
    for other in ('drag', 'wing flow lift and drag ' * 20):
        gemma.text_logprobs(other)
    assert torch.equal(gemma.text_logprobs(text), first)
    assert len(gemma.text_logprobs('a')) == len(gemma.tokenizer('a').input_ids) - 1


def _answers(folder):
    import pandas as pd
    frame = pd.read_csv(folder / 'answers.csv', dtype={'qid': str}, keep_default_na=False)
    return frame.set_index(['system', 'k', 'qid', 'sample'])[['qanswer', 'logprob', 'tokens', 'truncated']]


@pytest.mark.slow
def test_studies_of_2_and_4_queries_and_of_1_and_2_samples_agree_on_every_shared_answer(tmp_path):
    """The same settings over 2 queries and over 4 (batched differently), and with 1 sample instead of
    2: every answer the runs share is the same, and so are the queries' P and U."""
    import pandas as pd

    from pyterrier_utility import cli
    runs = {}
    for name, queries, samples in (('two', 2, 2), ('four', 4, 2), ('one', 2, 1)):
        runs[name] = tmp_path / name
        assert cli.main(['study', '--queries', str(queries), '-k', '1', '3', '--systems', 'BM25', 'Rel', '--samples',
                         str(samples), '--max-new-tokens', '12', '--out', str(runs[name])]) == 0
    two, four, one = (_answers(runs[n]) for n in ('two', 'four', 'one'))
    assert len(four) == 2 * len(two) and len(two) == 2 * len(one) == 2 * 2 * 7  # 0-shot, BM25, BM25-r, Rel
    pd.testing.assert_frame_equal(four.loc[two.index], two)
    pd.testing.assert_frame_equal(two.loc[one.index], one)
    per_query = {n: pd.read_csv(runs[n] / 'per_query.csv', dtype={'qid': str}).set_index(['labels', 'system', 'k',
                                                                                            'qid'])
                 for n in ('two', 'four')}
    shared = per_query['four'].loc[per_query['two'].index]
    pd.testing.assert_frame_equal(shared[['quality', 'quality_0shot', 'utility']],
                                  per_query['two'][['quality', 'quality_0shot', 'utility']])


@pytest.mark.slow
def test_an_attribution_in_its_own_folder_explains_the_utility_of_its_study(tmp_path):
    """``attribute`` into a folder of its own, beside a ``study`` with the same settings: v(empty) is
    the study's P_0, v(all) its P_k, so the shares sum to its U; leave-one-out, in a third folder,
    gives the coalitions it shares with Shapley the same values. (P is a mean over samples, taken in
    float32 by the attribution and in float64 by the study: equal to 1e-7.)"""
    import pandas as pd

    from pyterrier_utility import cli
    options = ['--systems', 'BM25', 'Rel', '-k', '2', '--queries', '2', '--samples', '2', '--labels', '2',
               '--max-new-tokens', '12']
    folders = {name: tmp_path / name for name in ('study', 'shapley', 'loo')}
    assert cli.main(['study', *options, '--out', str(folders['study'])]) == 0
    assert cli.main(['attribute', *options, '--method', 'shapley', '--out', str(folders['shapley'])]) == 0
    assert cli.main(['attribute', *options, '--method', 'loo', '--out', str(folders['loo'])]) == 0
    per_query = pd.read_csv(folders['study'] / 'per_query.csv', dtype={'qid': str}).set_index(['system', 'qid'])

    def coalitions(name):
        frame = pd.read_csv(folders[name] / 'coalitions.csv', dtype={'qid': str, 'coalition': str},
                            keep_default_na=False)
        return frame.set_index(['system', 'k', 'qid', 'coalition'])['value']
    shapley, loo = coalitions('shapley'), coalitions('loo')
    attributed = per_query[(per_query['k'] == 2) & per_query.index.get_level_values('system').isin(['BM25', 'Rel'])]
    assert len(attributed) == 2 * 2
    for (system, qid), row in attributed.iterrows():
        assert shapley[system, 2, qid, ''] == pytest.approx(row['quality_0shot'], abs=1e-7)
        assert shapley[system, 2, qid, '1 2'] == pytest.approx(row['quality'], abs=1e-7)
    shared = loo.index.intersection(shapley.index)
    assert len(shared) >= 2 * 2 * 2 and (loo[shared] == shapley[shared]).all()
    attribution = pd.read_csv(folders['shapley'] / 'attribution.csv', dtype={'qid': str})
    sums = attribution.groupby(['system', 'qid'])['phi_utility'].sum()
    for (system, qid), total in sums.items():
        assert total == pytest.approx(attributed.loc[(system, qid), 'utility'], abs=1e-6)
