"""The ``transfer`` command: whose utility is it? Over a finished study of two or more readers, each
document's utility for each reader, each reader's own utility oracle (``Util:<reader>``) beside the
human one (Rel), every reader measured on every reader's oracle, and how far their utility agrees
(LLM-specific utility: Zhang et al., arXiv 2510.11358, 2025).

It builds what the study builds (the collection, the readers behind the folder's generation cache, the
systems, the scorer of the first label set), so every prompt the study or ``attribute --method single``
answered is read, not generated again.

Example::

    from pyterrier_utility.commands import transferring
    found = transferring.run_transfer(transferring.study_config('results/two-readers'))
    transferring.save_transfer(found, 'results/two-readers')
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Union

import numpy as np
import pandas as pd

from .._checks import check_int
from .._messages import inform, warn
from ..errors import SettingError
from ..methods.llm_utility import DocumentUtility, UtilityOracle, utility_pool
from ..report.figures import pyplot
from ..report.html import write_report
from ..report.transfer_report import agreement_heatmap, gain_scatter
from ..schema import FRAME_FILES, REPORT_FILE, SETTINGS_FILE, TRANSFER_FILES
from ..settings import LabelSet
from ..study.config import StudyConfig
from ..study.config_json import from_dict
from ..study.output import lock_folder
from ..study.preparation import prepare
from ..study.results import StudyResults
from ..study.stats import BASELINE_MARK, MIN_N, paired_ttest
from ..study.sweep import run_study, study_contexts
from ..study.transfer import ORACLE_PREFIX, cell_order_tau, label_auc, reader_agreement
from ..vocabulary import POOL_CAP

#: Marks a reader's mean U on another reader's oracle that differs from its mean U on its own.
OWN_MARK = '*'
#: How the pool and each reader's oracle are made, as ``settings.json`` records them.
POOL_RULE = ("per query, the studied systems' contexts at the largest k by rank, then the judged documents by label, "
             'each once, at most {max_docs}')
ORACLE_RULE = ('Util:<reader> at k: the k pool documents of highest gain (P alone - P_0, first label set) for the '
               'reader, positive gains only, ties by P alone then docno; fewer where fewer have a positive gain')


@dataclass
class Transfer:
    """What ``transfer`` finds and writes.

    Attributes:
        document_utility: each (label set, reader, query, pool document): ``label``, ``p0``, ``p_doc``,
            ``gain``, ``relative_gain`` (``document_utility.csv``).
        per_query: the study of every reader on its systems and on every reader's oracle, per query (``reader``,
            ``system``, ``k``, ``qid``, ``utility``, ...).
        contexts: the documents each (reader, system, k, query) of that study gave the reader.
        table: label set x reader x context source x k: mean U, ``n``, the p-values against Rel and against the
            reader's own oracle, and the marks (``transfer_table.csv``).
        agreement: one row per label set, reader pair (or reader) and statistic, with intervals and ``n``
            (``transfer.csv``).
        settings: ``settings.json``'s record, with the pool's and the oracle's rules.
    """
    document_utility: pd.DataFrame
    per_query: pd.DataFrame
    contexts: pd.DataFrame
    table: pd.DataFrame
    agreement: pd.DataFrame
    settings: dict


def study_config(out: Union[str, Path]) -> StudyConfig:
    """The config of the finished study in ``out`` (its ``settings.json``), which must have two or more
    readers and one dataset; a :class:`SettingError` says what is missing."""
    settings = Path(out) / SETTINGS_FILE
    if not settings.is_file():
        raise SettingError(f'{settings} does not exist: transfer reads a finished study folder')
    config = from_dict(json.loads(settings.read_text())).replace(out=str(out))
    if len(config.readers) < 2:
        raise SettingError(f'{out}: a study of {len(config.readers)} reader ({", ".join(config.readers)}); transfer '
                           'compares two or more (study --reader A B)')
    if len(config.datasets) > 1:
        raise SettingError(f'{out}: a study of {len(config.datasets)} datasets; transfer reads one')
    return config


def transfer_table(per_query: pd.DataFrame, alpha: float = 0.05, min_n: int = MIN_N) -> pd.DataFrame:
    """Label set x reader x context source x k: the mean U of each reader on each source (the study's
    systems and every ``Util:<reader>``), ``n``, the paired t-test against Rel (``p_rel``, marked ``†``) and against the
    reader's own oracle (``p_own``, marked ``*``); no mark on fewer than ``min_n`` paired queries."""
    rows = []
    for (labels, reader, k), cell in per_query.groupby(['labels', 'reader', 'k'], sort=False):
        wide = cell.pivot_table(index='qid', columns='system', values='utility', aggfunc='first')
        own = ORACLE_PREFIX + reader
        for source in wide.columns:
            u = wide[source].to_numpy(float)
            tests = {}
            for name, other in (('rel', 'Rel'), ('own', own)):
                pair = wide[[source, other]].dropna() if other in wide and other != source else wide.iloc[:0, :0]
                tests[name] = ((paired_ttest(pair[source].to_numpy(), pair[other].to_numpy()), len(pair))
                               if len(pair.columns) else (float('nan'), 0))
            mark = ''.join(m for m, (p, n) in ((BASELINE_MARK, tests['rel']), (OWN_MARK, tests['own']))
                           if p < alpha and n >= min_n)
            rows.append(dict(labels=labels, reader=reader, source=source, k=int(k),
                             utility=float(np.nanmean(u)) if np.isfinite(u).any() else float('nan'),
                             n=int(np.isfinite(u).sum()), p_rel=tests['rel'][0], p_own=tests['own'][0], mark=mark))
    return pd.DataFrame(rows, columns=['labels', 'reader', 'source', 'k', 'utility', 'n', 'p_rel', 'p_own', 'mark'])


def transfer_markdown(table: pd.DataFrame) -> str:
    """The transfer table as Markdown: a row per label set, reader and source, a column per k, marks after
    the means."""
    ks = sorted(table['k'].unique())
    lines = ['| Labels | Reader | Context source | ' + ' | '.join(f'k={k}' for k in ks) + ' |',
             '|---|---|---|' + '---:|' * len(ks)]
    for (labels, reader, source), rows in table.groupby(['labels', 'reader', 'source'], sort=False):
        cells = rows.set_index('k')
        values = [f'{cells.loc[k, "utility"]:.3f}{cells.loc[k, "mark"]}' if k in cells.index else '' for k in ks]
        lines.append(f'| {labels} | {reader} | {source} | ' + ' | '.join(values) + ' |')
    note = (f'\nMean utility over the queries; {BASELINE_MARK} differs from Rel, {OWN_MARK} differs from the reader\'s '
            f'own oracle (paired t-test, p < 0.05; no mark on fewer than {MIN_N} paired queries).\n')
    return '\n'.join(lines) + '\n' + note


def run_transfer(config: StudyConfig, max_docs: int = POOL_CAP, argv: Optional[list] = None) -> Transfer:
    """Each reader's document utility over the pool of ``config``'s study under each label set, each
    reader's oracle (from the first label set's gains), every reader on every oracle beside the study's
    systems at its ks, and the readers' agreement per label set."""
    check_int('transfer', 'max_docs', max_docs, 1)
    prepared = prepare(config, 'transfer', argv)
    collection = prepared.collections[config.datasets[0]]
    topics, qrels, studied = collection.topics, collection.qrels, collection.config
    labels = studied.label_sets[0]
    scorer_for = prepared.scorer_for(collection)
    readers = prepared.readers
    systems = prepared.systems(collection, next(iter(readers.values())))
    contexts = study_contexts(topics, qrels, systems, [max(studied.ks)], studied.label_sets, verbose=False)
    pool = utility_pool(topics, contexts[contexts['docno'].notna()], qrels, collection.dataset.texts,
                        max_docs=max_docs)
    inform(f'transfer: {len(pool)} pool documents over {pool["qid"].nunique()} queries, readers {list(readers)}')
    before = sum(reader.cache.generated for reader in readers.values())
    # Per label set (the answers are shared: only their scores differ); the oracles from the first.
    utility = pd.concat([DocumentUtility(reader, scorer_for(each)).transform(pool).assign(reader=name, labels=str(each))
                         for each in studied.label_sets for name, reader in readers.items()], ignore_index=True)
    first = utility[utility['labels'] == str(labels)]
    _say_where_no_document_counts(first)
    sources = dict(systems)  # the study's own, answered already, beside every reader's oracle
    sources.update({ORACLE_PREFIX + name: UtilityOracle(first[first['reader'] == name], name) for name in readers})
    studies = [run_study(topics, qrels, sources, reader, collection.dataset.texts, ks=studied.ks,
                         label_sets=studied.label_sets, scorer_for=scorer_for,
                         baseline='Rel' if 'Rel' in sources else None, reader_name=name, verbose=False)
               for name, reader in readers.items()]
    results = StudyResults.concat(studies)
    # The study's own cells, per reader (read_study folds the reader into a block name).
    studied_file = Path(config.out) / FRAME_FILES['per_query']
    study = pd.read_csv(studied_file, dtype={'qid': str}) if studied_file.is_file() else None
    agreement = [_agreement(utility[utility['labels'] == str(each)], each, study, config.seed)
                 for each in studied.label_sets]
    record = dict(prepared.record, transfer={'oracle_labels': str(labels), 'pool': POOL_RULE.format(max_docs=max_docs),
                                             'max_docs': max_docs, 'oracle': ORACLE_RULE, 'seed': config.seed})
    record['generated'] = sum(reader.cache.generated for reader in readers.values()) - before
    contexts_given = results.contexts if results.contexts is not None else pd.DataFrame()
    return Transfer(utility, results.per_query, contexts_given, transfer_table(results.per_query, min_n=config.min_n),
                    pd.concat(agreement, ignore_index=True), record)


def _say_where_no_document_counts(utility: pd.DataFrame) -> None:
    """Warns, naming the reader, where no pool document changed a reader's P (every gain 0): its answers do
    not read the context, so its oracle is empty and its rank correlations are undefined, not noise."""
    for reader, rows in utility.groupby('reader', sort=False):
        if len(rows) and (rows['gain'].fillna(0) == 0).all():
            warn(f'transfer: no pool document changes the answer quality of reader {reader} (gain 0 for all '
                 f'{len(rows)} documents): its answers do not depend on the context, so Util:{reader} gives no '
                 'document and its agreement with the other readers is undefined')


def _agreement(utility: pd.DataFrame, labels: LabelSet, study: Optional[pd.DataFrame], seed: int) -> pd.DataFrame:
    """``transfer.csv``'s rows for one label set: the readers' agreement, each reader's label AUC, and
    Kendall's tau between the readers' orderings of the study's cells (where the folder has per_query.csv)."""
    rows = [reader_agreement(utility, seed=seed).assign(p=np.nan)]
    auc = label_auc(utility, labels)
    rows.append(pd.DataFrame({'reader_a': auc['reader'], 'reader_b': 'human labels', 'statistic': 'label_auc',
                              'value': auc['auc'], 'low': np.nan, 'high': np.nan,
                              'n': auc['relevant'] + auc['nonrelevant'], 'p': np.nan}))
    if study is not None and 'reader' in study.columns:
        mine = study[study['labels'] == str(labels)]
        tau = cell_order_tau(mine.groupby(['reader', 'system', 'k'], as_index=False)['utility'].mean())
        rows.append(tau.rename(columns={'tau': 'value'}).assign(statistic='cell_order_tau', low=np.nan, high=np.nan))
    columns = ['reader_a', 'reader_b', 'statistic', 'value', 'low', 'high', 'n', 'p']
    return pd.concat(rows, ignore_index=True)[columns].assign(labels=str(labels))


def record_oracles(contexts: pd.DataFrame, path: Union[str, Path]) -> None:
    """Adds the contexts each reader was given by every ``Util:<reader>`` oracle (``contexts``' rows of
    those sources) to the study's ``contexts.csv`` at ``path``, in its columns, in place of the oracles'
    rows an earlier transfer added; the study's own rows are kept as written."""
    path = Path(path)
    rows = contexts[contexts['system'].str.startswith(ORACLE_PREFIX)]
    if path.is_file():
        study = pd.read_csv(path, dtype=str, keep_default_na=False)
        rows = pd.concat([study[~study['system'].str.startswith(ORACLE_PREFIX)], rows.reindex(columns=study.columns)],
                         ignore_index=True)
    rows.to_csv(path, index=False)


def save_transfer(found: Transfer, out: Union[str, Path]) -> List[str]:
    """Writes ``document_utility.csv``, ``transfer.csv``, ``transfer_table.csv`` and ``.md`` and the two
    figures (:data:`~pyterrier_utility.schema.TRANSFER_FILES`) into ``out``, adds the documents every
    reader's oracle gave each reader to its ``contexts.csv`` (:func:`record_oracles`), records the
    transfer's settings in its ``settings.json`` and writes the study's ``report.html`` again with its
    "Across readers" section; returns the file names."""
    out = Path(out)
    with lock_folder(out):
        record_oracles(found.contexts, out / FRAME_FILES['contexts'])
        columns = ['reader', 'labels', 'qid', 'docno', 'label', 'p0', 'p_doc', 'gain', 'relative_gain']
        found.document_utility[columns].to_csv(out / TRANSFER_FILES['document_utility'], index=False)
        found.agreement.to_csv(out / TRANSFER_FILES['transfer'], index=False)
        found.table.to_csv(out / TRANSFER_FILES['table'], index=False)
        (out / TRANSFER_FILES['table_md']).write_text(transfer_markdown(found.table))
        record = json.loads((out / SETTINGS_FILE).read_text())
        record['transfer'] = dict(found.settings['transfer'], generated=found.settings['generated'])
        (out / SETTINGS_FILE).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + '\n')
        written = [TRANSFER_FILES[name] for name in ('document_utility', 'transfer', 'table', 'table_md')]
        for name, draw, frame in (('agreement_figure', agreement_heatmap, found.agreement),
                                  ('gains_figure', gain_scatter, found.document_utility)):
            (out / TRANSFER_FILES[name]).unlink(missing_ok=True)
            if len(frame):
                pyplot().close(draw(frame, out / TRANSFER_FILES[name]))
                written.append(TRANSFER_FILES[name])
        if (out / FRAME_FILES['per_query']).is_file():  # a study's folder: its page gains the section
            write_report(out)
            written.append(REPORT_FILE)
    return sorted(written + [FRAME_FILES['contexts'], SETTINGS_FILE])
