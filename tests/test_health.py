"""Answer health: the measures on hand-made answers, Table 1's marks and the positive control."""
import numpy as np
import pandas as pd
import pytest
from pyterrier_rag.backend import Backend, BackendOutput

from pyterrier_utility.backends._base import query_of
from pyterrier_utility.report import tables as rendering
from pyterrier_utility.report.tables import table_notes
from pyterrier_utility.study import health, stats

DOC = 'the boundary layer separates from the wing at high angles of attack and the lift falls sharply'


def test_copied_share_counts_the_words_in_long_verbatim_runs_of_one_document():
    # 12 of 14 words lie in a run of 12 consecutive words of DOC (case and punctuation ignored).
    answer = 'Simply put: The boundary layer separates from the wing at high angles, of attack.'
    assert health.words(answer)[:3] == ['simply', 'put', 'the']
    assert health.copied_share(answer, [DOC]) == pytest.approx(12 / 14)
    # Two runs of 8 from two documents: each document alone holds one of them.
    half = 'the boundary layer separates from the wing at high'
    other = 'a vortex sheet leaves the trailing edge of every wing'
    assert health.copied_share(half + ' ' + other, [DOC, other]) == pytest.approx(10 / 19)
    # Runs of 7 words are not copied; neither is an answer of fewer than 8 words.
    assert health.copied_share('the boundary layer separates from the wing, then a stall', [DOC]) == 0
    assert health.copied_share('the boundary layer separates', [DOC]) == 0
    assert health.copied_share(DOC, []) == 0


def test_health_of_hand_made_answers():
    answers = pd.DataFrame({
        'system': ['0-shot', '0-shot', 'BM25', 'BM25', 'BM25', 'BM25', 'BM25'],
        'k': [0, 0, 1, 1, 1, 1, 1], 'qid': ['1', '2', '1', '1', '1', '2', '2'], 'sample': [0, 0, 0, 1, 2, 0, 1],
        'qanswer': ['a stall', '', '  \n ', 'It stalls: ' + DOC, 'lift falls', 'the lift falls', None],
        'truncated': [False, False, False, True, None, True, False],
        'tokens': [3, 1, 2, 30, np.nan, 96, 1]})
    contexts = pd.DataFrame({'system': ['BM25', 'BM25'], 'k': [1, 1], 'qid': ['1', '2'], 'position': [1, 1],
                             'docno': ['d1', 'd2'], 'label': [2, 0], 'text': [DOC, 'unrelated text']})
    got = health.answer_health(answers, contexts)
    expected = pd.DataFrame({'system': ['0-shot', 'BM25'], 'k': [0, 1], 'answers': [2, 5], 'empty': [0.5, 0.4],
                             'cut': [0.0, 2 / 4], 'copied': [0.0, 0.2], 'mean_tokens': [2.0, 129 / 4]})
    pd.testing.assert_frame_equal(got, expected)
    # The copied answer is copied from its own query's document only.
    moved = contexts.assign(qid=['2', '1'])
    assert health.answer_health(answers, moved)['copied'].tolist() == [0.0, 0.0]
    # Engines that do not say whether they cut, nor how many tokens: NaN, not 0.
    unknown = health.answer_health(answers.drop(columns=['truncated', 'tokens']), None)
    assert unknown[['cut', 'copied', 'mean_tokens']].isna().all().all()


def _per_query(rel, nrel):
    rows = []
    for k, (r, n) in enumerate(zip(rel, nrel), 1):
        for q in range(6):
            rows += [('label>=2', 'Rel', k, str(q), r + q / 100), ('label>=2', 'NRel', k, str(q), n - q / 100)]
    frame = pd.DataFrame(rows, columns=['labels', 'system', 'k', 'qid', 'utility'])
    return frame.assign(quality_0shot=0.4)


def test_positive_control_holds_or_fails_per_k():
    table = stats.table1(_per_query([0.3, -0.2], [0.1, 0.1]))
    control = health.positive_control(table)
    assert control[['k', 'holds', 'significant']].values.tolist() == [[1, True, True], [2, False, False]]
    hp = pd.DataFrame({'system': ['Rel', 'NRel', 'Rel', 'NRel'], 'k': [1, 1, 2, 2], 'answers': [30] * 4,
                       'empty': [0.0, 0.0, 0.3, 0.1], 'cut': [0.1, 0.0, 0.5, np.nan], 'copied': [0.0] * 4,
                       'mean_tokens': [20.0] * 4})
    notes = health.control_notes(control, hp)
    assert notes[0].startswith('Positive control FAILED: Rel does not beat NRel at k=2 (label>=2)')
    assert notes[1] == ('Answer health of those cells: Rel k=2: 30% empty, 50% cut, 0% copied; NRel k=2: 10% empty, '
                        'unknown cut, 0% copied (health.csv).')
    # Two readers' blocks: only the failing reader's cells are named, each with its reader.
    two = pd.concat([stats.table1(_per_query([0.3, 0.2], [0.1, 0.1])).assign(dataset='gemma'),
                     table.assign(dataset='smol')])
    both = pd.concat([hp.assign(dataset='gemma'), hp.assign(dataset='smol', empty=0.0)])
    assert health.control_notes(health.positive_control(two), both)[1] == (
        'Answer health of those cells: Rel k=2 (smol): 0% empty, 50% cut, 0% copied; NRel k=2 (smol): 0% empty, '
        'unknown cut, 0% copied (health.csv).')
    passing = health.positive_control(stats.table1(_per_query([0.3, 0.2], [0.1, 0.1])))
    assert health.control_notes(passing) == ('Positive control held: Rel beats NRel at every k and label set (mean U; '
                                             'each difference significant).',)
    assert health.control_notes(health.positive_control(table[table['system'] == 'Rel'])) == ()


def test_table1_marks_unhealthy_cells_and_states_the_control():
    table = stats.table1(_per_query([0.3, -0.2], [0.1, 0.1]))
    hp = pd.DataFrame({'system': ['0-shot', 'Rel', 'NRel', 'Rel', 'NRel'], 'k': [0, 1, 1, 2, 2],
                       'answers': [6, 30, 30, 30, 30], 'empty': [0.0, 0.0, 0.05, 0.3, 0.0],
                       'cut': [0.2, 0.0, 0.1, 0.0, 0.0], 'copied': [0.0] * 5, 'mean_tokens': [9.0] * 5})
    assert health.unhealthy(hp)['system'].tolist() == ['0-shot', 'Rel']  # at the bars is not past them
    marked = health.mark_table(table, hp)
    assert marked.set_index(['system', 'k'])['mark'].to_dict() == {('Rel', 1): '', ('NRel', 1): '\u2020',
                                                                   ('Rel', 2): '\u00a7', ('NRel', 2): '\u2020'}
    assert set(marked['mark_0shot']) == {'\u00a7'}
    notes = table_notes(table, hp)
    assert notes[0].startswith('\u00a7 more than 5% of the cell\'s answers empty or more than 10% cut')
    assert notes[1].startswith('Positive control FAILED')
    paper = rendering.table1_paper(marked, notes=notes)
    assert '| Rel | 0.400\u00a7 | 0.325 | -0.175\u00a7 |' in paper
    assert paper.splitlines()[0].endswith(notes[-1])
    latex = rendering.table1_paper(marked, 'latex', notes=notes)
    assert '$-$0.175$^{\\S}$' in latex and '0.400$^{\\S}$' in latex and '\\S{} more than 5\\%' in latex
    markdown = rendering.table1_markdown(marked, notes=notes)
    assert markdown.endswith('\n\n' + '\n\n'.join(notes) + '\n') and '| 2 | 0.400\u00a7 | -0.175\u00a7 |' in markdown
    # Without health, no marks and no notes.
    assert '\u00a7' not in rendering.table1_paper(table) + rendering.table1_markdown(table)


def test_summary_names_the_shares_and_the_marked_cells():
    hp = pd.DataFrame({'system': ['0-shot', 'Rel'], 'k': [0, 3], 'answers': [10, 30], 'empty': [0.0, 0.1],
                       'cut': [0.0, 0.2], 'copied': [0.0, 0.5], 'mean_tokens': [10.0, 30.0]})
    assert health.summary(hp) == ('Answer health: 40 answers, 7.5% empty, 15.0% cut at max_new_tokens, 37.5% copied '
                                  'from a context document; mean 25.0 tokens.\n1 of 2 cells marked \u00a7 in Table 1: '
                                  'Rel k=3 (health.csv).')
    assert health.summary(hp.head(1)).endswith("; no cell past Table 1's bars (empty > 5%, cut > 10%).")


def test_control_detail_gives_rel_and_nrel_at_each_k():
    table = stats.table1(_per_query([0.3, -0.2], [0.1, 0.1]))
    detail = health.control_detail(health.positive_control(table))
    assert detail.startswith('Rel against NRel (label>=2): k=1 0.325 > 0.075 (p ')
    assert '; k=2 -0.175 <= 0.075 (p ' in detail
    assert health.control_detail(health.positive_control(table[table['system'] == 'Rel'])) == ''


@pytest.mark.slow
def test_the_offline_default_reader_gives_answers_that_exist(tmp_path):
    """A small real study with every default of the offline reader (Gemma 3 270M, its prompt format and
    decoding): at most one empty answer of 42 (the default meets 1% on the main job), a quarter cut at
    most, and the health file counting them. A prompt or decoding that empties answers again fails here."""
    from pyterrier_utility import cli
    assert cli.main(['study', '--queries', '3', '-k', '3', '5', '--systems', 'BM25', 'Rel', 'NRel', '--no-reverse',
                     '--samples', '2', '--out', str(tmp_path)]) == 0
    answers = pd.read_csv(tmp_path / 'answers.csv', keep_default_na=False)
    assert len(answers) == 3 * (1 + 3 * 2) * 2
    empty = ~answers['qanswer'].map(health.visible)
    cut = answers['truncated'].astype(str).eq('True')
    assert empty.sum() <= 1, answers.loc[empty, ['system', 'k', 'qid', 'sample']]
    assert cut.mean() <= 0.25  # 9 of 42 in bfloat16 on a Xeon with AMX: k = 3 and 5 only, long prompts
    found = pd.read_csv(tmp_path / 'health.csv')
    assert (found['answers'] * found['empty']).sum() == pytest.approx(empty.sum())
    assert (found['answers'] * found['cut']).sum() == pytest.approx(cut.sum())


#: Answers without a visible character: a NUL, an ESC, white space around them, a zero-width space.
INVISIBLE = ['\x00', '\x1b', ' \x00\t\x1b ', '\u200b']


class InvisibleBackend(Backend):
    """Answers every prompt with a context with one of :data:`INVISIBLE`, the 0-shot prompts of the
    ``blank`` questions with a NUL, the other 0-shot prompts with words; ``given`` records each answer."""
    supports_seeds = True

    def __init__(self, blank):
        super().__init__('invisible')
        self.blank = set(blank)
        self.given = {}

    def generate(self, inps, *, seeds=None, **kw):
        texts = [INVISIBLE[sum(map(ord, p)) % len(INVISIBLE)] if 'Context 1:' in p
                 else '\x00' if query_of(p).strip("'") in self.blank else 'the lift falls' for p in inps]
        self.given.update(zip(inps, texts))
        return [BackendOutput(text=t) for t in texts]


def test_answers_without_a_visible_character_are_empty_stored_as_generated_and_u_is_nan_where_p0_is_0(
        tmp_path, monkeypatch, capsys):
    import pyterrier_utility as pu
    from pyterrier_utility import cli
    from pyterrier_utility.study import read_study
    topics = pu.datasets.cranfield().get_topics().set_index('qid')['query']
    backend = InvisibleBackend([topics['3']])
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: backend)
    with pytest.warns(UserWarning, match=r'utility is NaN because the 0-shot FBERT is 0 \(label>=2\): qid 3$'):
        assert cli.main(['study', '--systems', 'Rel', 'NRel', '--no-reverse', '-k', '1', '2', '--queries', '3',
                         '--samples', '1', '--labels', '2', '--out', str(tmp_path)]) == 0
    assert set(backend.given.values()) == set(INVISIBLE) | {'\x00', 'the lift falls'}
    found = pd.read_csv(tmp_path / 'health.csv')
    assert found.set_index(['system', 'k'])['empty'].to_dict() == {('0-shot', 0): 1 / 3, ('Rel', 1): 1.0,
                                                                   ('Rel', 2): 1.0, ('NRel', 1): 1.0, ('NRel', 2): 1.0}
    table = pd.read_csv(tmp_path / 'table1.csv', keep_default_na=False)
    assert table['mark'].str.contains(health.HEALTH_MARK).all() and (table['mark_0shot'] == health.HEALTH_MARK).all()
    per_query = pd.read_csv(tmp_path / 'per_query.csv', dtype={'qid': str})
    assert per_query.loc[per_query['qid'] == '3', 'utility'].isna().all()
    assert (per_query.loc[per_query['qid'] != '3', 'utility'] == -1).all()  # P_k = 0: an empty answer scores 0
    # answers.csv holds each answer exactly as generated, NUL and ESC included, and reads back so.
    raw = (tmp_path / 'answers.csv').read_bytes()
    assert b'\x00' in raw and b'\x1b' in raw
    answers = read_study(tmp_path).answers
    assert sorted(answers['qanswer']) == sorted(backend.given.values())
    said = capsys.readouterr()
    assert 'Answer health: 15 answers, 86.7% empty' in said.out + said.err
