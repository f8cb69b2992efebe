"""The transfer command over a real study of the two offline readers: each reader's document utility,
its own oracle beside Rel and the other reader's, and their agreement, with nothing generated twice;
and ``study --transfer`` over two simulated readers, one of which ignores its context."""
import json
import re

import numpy as np
import pandas as pd
import pytest
from pyterrier_rag.backend import BackendOutput
from support.backends import FirstContextBackend

from pyterrier_utility.commands import main as commands
from pyterrier_utility.errors import SettingError
from pyterrier_utility.schema import TRANSFER_FILES
from pyterrier_utility.study import StudyConfig
from pyterrier_utility.study.config_json import to_dict

READERS = ('gemma3-270m', 'smollm2-135m')


@pytest.mark.slow
def test_transfer_over_a_study_of_two_readers_measures_each_on_its_own_oracle_and_the_others(tmp_path, capsys):
    out = tmp_path / 'readers'
    config = StudyConfig(readers=READERS, queries=2, ks=(1, 2), systems=('BM25', 'Rel'), samples=1,
                         decoding=StudyConfig().decoding.replace(max_new_tokens=12), out=str(out))
    commands.study(config)
    found = commands.transfer(out, max_docs=4)
    assert {p.name for p in out.iterdir()} >= set(TRANSFER_FILES.values())
    utility = pd.read_csv(out / TRANSFER_FILES['document_utility'], dtype={'qid': str, 'docno': str})
    assert set(utility['reader']) == set(READERS) and set(utility['labels']) == {'label>=2', 'label>=3'}
    assert utility.groupby(['labels', 'reader', 'qid']).size().max() <= 4
    assert np.allclose(utility['gain'], utility['p_doc'] - utility['p0'], equal_nan=True)
    # Each reader's own oracle at k=1 is its document of highest positive gain under the first label set
    # (ties: P alone, then docno), whichever reader it is given to.
    given = found.contexts
    for reader in READERS:
        mine = utility[(utility['reader'] == reader) & (utility['gain'] > 0) & (utility['labels'] == 'label>=2')]
        best = mine.sort_values(['qid', 'gain', 'p_doc', 'docno'], ascending=[True, False, False, True])
        expected = best.drop_duplicates('qid').set_index('qid')['docno'].to_dict()
        for other in READERS:
            shown = given[(given['reader'] == other) & (given['system'] == f'Util:{reader}') & (given['k'] == 1)]
            assert dict(zip(shown['qid'].astype(str), shown['docno'].astype(str))) == expected
    table = pd.read_csv(out / TRANSFER_FILES['table'])
    sources = {'BM25', 'Rel'} | {f'Util:{r}' for r in READERS}
    assert set(zip(table['reader'], table['source'], table['k'])) <= {(r, s, k) for r in READERS for s in sources
                                                                     for k in (1, 2)}
    assert set(table['source']) == sources and set(table['reader']) == set(READERS)
    agreement = pd.read_csv(out / TRANSFER_FILES['transfer'])
    assert {'spearman_per_query', 'kendall_pooled', 'jaccard', 'label_auc', 'cell_order_tau'} <= set(
        agreement['statistic'])
    assert '| Labels | Reader | Context source | k=1 | k=2 |' in (out / TRANSFER_FILES['table_md']).read_text()
    assert set(agreement['labels']) == {'label>=2', 'label>=3'}
    settings = json.loads((out / 'settings.json').read_text())
    assert settings['transfer']['max_docs'] == 4 and 'positive gains only' in settings['transfer']['oracle']
    assert settings['transfer']['oracle_labels'] == 'label>=2'
    assert settings['command'] == 'study' and settings['transfer']['generated'] > 0
    # Again: every answer is read from the folder's generation cache, and the files are the same.
    before = {name: (out / name).read_bytes() for name in TRANSFER_FILES.values()}
    again = commands.transfer(out, max_docs=4)
    assert again.settings['generated'] == 0
    assert {name: (out / name).read_bytes() for name in TRANSFER_FILES.values()} == before


def test_transfer_refuses_a_folder_without_a_study_of_two_readers(tmp_path):
    with pytest.raises(SettingError, match='settings.json does not exist: transfer reads a finished study folder'):
        commands.transfer(tmp_path)
    (tmp_path / 'settings.json').write_text(json.dumps(to_dict(StudyConfig(out=str(tmp_path)))))
    with pytest.raises(SettingError, match=r'a study of 1 reader \(gemma3-270m\); transfer compares two or more'):
        commands.transfer(tmp_path)


class QuestionBackend(FirstContextBackend):
    """Ignores its contexts: answers with the question of its prompt."""

    def generate(self, inps, *, seeds=None, **kw):
        self.calls.extend(inps)
        return [BackendOutput(text=re.findall(r'Question: "?([^"\n]*)', p)[-1]) for p in inps]


def test_study_transfer_says_where_a_reader_ignores_its_context_and_the_report_shows_the_readers(tmp_path, monkeypatch,
                                                                                                capsys):
    import pyterrier_utility as pu
    from pyterrier_utility import cli

    def build(spec, **kw):
        return QuestionBackend() if spec == 'smollm2-135m' else FirstContextBackend('I cannot say')
    monkeypatch.setattr(pu.backends, 'get_backend', build)
    with pytest.raises(SystemExit, match='2'):
        cli.main(['study', '--max-docs', '3', '--out', str(tmp_path / 'x')])
    assert '--max-docs needs --transfer' in capsys.readouterr().err
    with pytest.raises(SystemExit, match='2'):
        cli.main(['study', '--transfer', '--out', str(tmp_path / 'x')])
    assert "--transfer reads a study of one dataset and two or more readers" in capsys.readouterr().err
    out = tmp_path / 'readers'
    with pytest.warns(UserWarning, match=r'no pool document changes the answer quality of reader smollm2-135m '
                                         r'\(gain 0 for all 8 documents\)') as caught:
        assert cli.main(['study', '--reader', *READERS, '--queries', '2', '-k', '1', '2', '--systems', 'BM25', 'Rel',
                         '--samples', '1', '--labels', '2', '--transfer', '--max-docs', '4', '--out', str(out)]) == 0
    assert not [w for w in caught if 'gemma3-270m (gain 0' in str(w.message)]
    utility = pd.read_csv(out / TRANSFER_FILES['document_utility'], dtype={'qid': str, 'docno': str})
    ignores = utility[utility['reader'] == 'smollm2-135m']
    assert len(ignores) == 8 and (ignores['gain'] == 0).all() and (ignores['p_doc'] == ignores['p0']).all()
    reads = utility[utility['reader'] == 'gemma3-270m']
    assert (reads['gain'] != 0).any()
    # No ranking of noise: the correlations with a reader of constant gain are undefined.
    agreement = pd.read_csv(out / TRANSFER_FILES['transfer'])
    pairs = agreement[agreement['statistic'].str.startswith(('spearman', 'kendall'))
                      & (agreement['reader_b'] == 'smollm2-135m')]
    assert len(pairs) == 4 and pairs['value'].isna().all()
    page = (out / 'report.html').read_text()
    assert 'Across readers: whose utility is it?' in page
    assert "At k=1 a reader's own oracle is its best pool document" in page
    assert '| Labels | Reader | Context source |' not in page and '<th>Context source</th>' in page
    assert page.count('data:image/png;base64,') >= 2 + len(list(out.glob('fig*.png')))
    assert {TRANSFER_FILES['agreement_figure'], TRANSFER_FILES['gains_figure']} <= {p.name for p in out.iterdir()}
    printed = capsys.readouterr().out
    assert 'agreement between readers (transfer.csv)' in printed
    # A plain study again into the folder removes what the transfer wrote: no page shows another run's findings.
    assert cli.main(['study', '--reader', *READERS, '--queries', '2', '-k', '1', '2', '--systems', 'BM25', 'Rel',
                     '--samples', '1', '--labels', '2', '--out', str(out)]) == 0
    assert not any((out / name).exists() for name in TRANSFER_FILES.values())
    assert 'Across readers' not in (out / 'report.html').read_text()


class OpeningBackend(FirstContextBackend):
    """Answers with the first three words of its prompt's first context: another reader of the same documents."""

    def generate(self, inps, *, seeds=None, **kw):
        return [BackendOutput(text=' '.join(out.text.split()[:3])) for out in super().generate(inps, seeds=seeds, **kw)]


@pytest.mark.slow
def test_transfer_records_each_readers_oracle_in_contexts_csv_once(tmp_path, monkeypatch):
    import pyterrier_utility as pu
    from pyterrier_utility import cli
    from pyterrier_utility.study.folder import read_study

    # Two simulated readers in this process, each reading its context its own way.
    monkeypatch.setattr(pu.backends, 'cpu_replicas', lambda: 1)
    monkeypatch.setattr(pu.backends, 'get_backend', lambda spec, **kw: (
        OpeningBackend('I cannot say') if spec == 'smollm2-135m' else FirstContextBackend('I cannot say')))
    out = tmp_path / 'readers'
    assert cli.main(['study', '--reader', *READERS, '--queries', '2', '-k', '1', '2', '--systems', 'BM25', 'Rel',
                     '--samples', '1', '--labels', '2', '--out', str(out)]) == 0
    studied = pd.read_csv(out / 'contexts.csv', dtype=str, keep_default_na=False)
    assert not studied['system'].str.startswith('Util:').any()
    commands.transfer(out, max_docs=4)
    contexts = pd.read_csv(out / 'contexts.csv', dtype=str, keep_default_na=False)
    assert list(contexts.columns) == list(studied.columns) == ['reader', 'system', 'k', 'qid', 'position', 'docno',
                                                               'label', 'text']
    pd.testing.assert_frame_equal(contexts.head(len(studied)), studied)  # the study's own rows as written
    oracles = contexts.iloc[len(studied):].astype({'k': int, 'position': int})
    assert set(oracles['system']) == {f'Util:{r}' for r in READERS}
    # Each oracle's documents at k, recomputed from document_utility.csv: the reader's k pool documents of
    # highest positive gain (ties: P alone, then docno), the same whichever reader is given them.
    utility = pd.read_csv(out / TRANSFER_FILES['document_utility'], dtype={'qid': str, 'docno': str})
    for reader in READERS:
        mine = utility[(utility['reader'] == reader) & (utility['gain'] > 0)]
        best = mine.sort_values(['qid', 'gain', 'p_doc', 'docno'], ascending=[True, False, False, True])
        for k in (1, 2):
            expected = {q: list(part['docno'][:k]) for q, part in best.groupby('qid')}
            assert expected and any(len(docs) == k for docs in expected.values())
            for given in READERS:
                shown = oracles[(oracles['reader'] == given) & (oracles['system'] == f'Util:{reader}')
                                & (oracles['k'] == k)]
                assert {q: list(part.sort_values('position')['docno']) for q, part in shown.groupby('qid')} == expected
                assert (shown.groupby('qid')['position'].apply(list) == shown.groupby('qid')['position'].apply(
                    lambda p: list(range(1, len(p) + 1)))).all()
    judged = utility.drop_duplicates(['qid', 'docno']).set_index(['qid', 'docno'])['label']
    assert [float(x) if x else None for x in oracles['label']] == [
        None if pd.isna(x) else float(x) for x in judged.reindex(pd.MultiIndex.from_frame(oracles[['qid', 'docno']]))]
    assert (oracles['text'] != '').all()
    # Again: the oracles' rows are replaced, not added twice.
    written = (out / 'contexts.csv').read_bytes()
    commands.transfer(out, max_docs=4)
    assert (out / 'contexts.csv').read_bytes() == written
    # read_study reads them as any system's, a block per reader; the page lists each reader's own oracle.
    study = read_study(out)
    assert len(study.contexts) == len(contexts)
    assert set(study.contexts.loc[study.contexts['system'] == 'Util:gemma3-270m', 'dataset']) == set(READERS)
    page = (out / 'report.html').read_text()
    table = page[page.index('<details class="oracles">'):]
    table = table[:table.index('</details>')]
    assert "The documents each reader's own oracle chose at k=2" in table
    assert re.findall(r'<th>([^<]*)</th>', table) == ['qid'] + [f'Util:{r}' for r in READERS]


def test_the_per_query_agreement_intervals_are_the_percentile_bootstrap_of_the_mean_over_queries():
    """Two readers' gains over eight queries of five documents: the per-query Spearman and Jaccard, their
    means, and the 95% intervals recomputed here (the queries resampled with numpy's generator of the
    seed, each resample's mean, numpy's 2.5th and 97.5th percentiles)."""
    from scipy import stats

    from pyterrier_utility.study.transfer import reader_agreement
    rng = np.random.default_rng(7)
    gains = rng.normal(size=(8, 5, 2))
    utility = pd.DataFrame([dict(reader=r, qid=f'q{q}', docno=f'd{d}', gain=gains[q, d, i])
                            for i, r in enumerate('ab') for q in range(8) for d in range(5)])
    found = reader_agreement(utility, n_resamples=200, seed=4).set_index('statistic')
    per_query = {
        'spearman_per_query': [stats.spearmanr(g[:, 0], g[:, 1])[0] for g in gains],
        'jaccard': [len(set(np.flatnonzero(g[:, 0] > 0)) & set(np.flatnonzero(g[:, 1] > 0)))
                    / len(set(np.flatnonzero(g[:, 0] > 0)) | set(np.flatnonzero(g[:, 1] > 0))) for g in gains]}
    draws = np.random.default_rng(4).integers(0, 8, (200, 8))
    for statistic, values in per_query.items():
        means = np.asarray(values)[draws].mean(axis=1)
        row = found.loc[statistic]
        assert row['value'] == pytest.approx(np.mean(values), abs=1e-12) and row['n'] == 8
        assert (row['low'], row['high']) == pytest.approx((np.percentile(means, 2.5), np.percentile(means, 97.5)),
                                                          abs=1e-12)
        assert row['low'] < row['value'] < row['high']
