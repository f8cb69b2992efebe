"""The files a study folder holds and their columns, each written once: the frames a study saves, the
tables, the files of the ``predict``, ``attribute`` and ``transfer`` commands, and per CSV file its
columns and those holding numbers.

The study's writers, its folder readers, the report and the commands import these names;
``tests/test_vocabulary.py`` fails when one of these lists is spelled out again elsewhere.

Example::

    from pyterrier_utility.schema import CSV_COLUMNS
    columns, numbers = CSV_COLUMNS['per_query.csv']
"""
from typing import Dict, Tuple

from .vocabulary import CORRELATION_METHODS, PREDICTION_TARGETS

#: One cell of the study: a system's contexts at k for one query.
CELL = ('system', 'k', 'qid')
#: ``per_query.csv``'s measures: nDCG@k, P_0, P_k (named for what they hold, the answer quality, whichever
#: quality ``settings.json`` records) and U; P is undefined for a query without a relevant document under a
#: label set, and U also when P_0 is 0, so those may be empty (NaN).
PER_QUERY_MEASURES = ('ndcg', 'quality_0shot', 'quality', 'utility')
#: P's columns in a study folder written before they were named for the answer quality: the readers of
#: ``per_query.csv`` and ``scores.csv`` rename them.
FORMER_COLUMNS = {'fbert': 'quality', 'fbert_0shot': 'quality_0shot'}
PER_QUERY_MAY_BE_EMPTY = PER_QUERY_MEASURES[1:]
#: ``per_query.csv``'s values of a row: the contexts given and the measures.
PER_QUERY_VALUES = ('n_docs',) + PER_QUERY_MEASURES
#: ``per_query.csv``'s columns, in order (after ``dataset`` and ``reader`` in a study over several
#: collections or readers).
PER_QUERY_COLUMNS = ('labels',) + CELL + PER_QUERY_VALUES
#: What identifies a row of ``per_query.csv``: no two rows may share it.
PER_QUERY_KEY = ('dataset', 'reader', 'labels') + CELL
#: ``per_query.csv``'s integer columns and their least value.
PER_QUERY_INTEGERS: Dict[str, int] = {'k': 1, 'n_docs': 0}
#: What a CSV file holds where a number is missing (NaN utility, an unjudged context).
MISSING = ('', 'nan', 'NaN')
#: What the reader says of each answer besides ``qanswer`` (:class:`~pyterrier_utility.backends.Answer`; ``tokens``:
#: how many it generated), and
#: what ``answers.csv`` holds it as: a number (NaN where unknown) or a flag (True, False, or empty where the
#: engine did not say). Studies from before these columns lack them.
ANSWER_INFO: Dict[str, str] = {'logprob': 'number', 'mean_logprob': 'number', 'tokens': 'number', 'truncated': 'flag'}
#: A correlation's fields: its method, coefficient, p-value and the pairs it is over.
CORRELATION_FIELDS = ('method', 'r', 'p', 'n')
#: The layout of ``correlations.csv`` and ``confidence_correlations.csv``.
CORRELATION_COLUMNS = ('labels',) + CELL[:2] + CORRELATION_FIELDS
#: The files of the ``predict`` command.
PREDICTION_FILES = {'signals': 'signals.csv', 'prediction': 'prediction.csv'}
#: ``signals.csv``'s first columns (a column per signal follows).
SIGNALS_COLUMNS = ('labels',) + CELL + PREDICTION_TARGETS
#: ``prediction.csv``'s columns: per method its coefficient, p-value and bootstrap 95% interval.
PREDICTION_COLUMNS = (('labels', 'level', 'system', 'k', 'signal', 'target', 'n')
                      + tuple(m + s for m in CORRELATION_METHODS for s in ('', '_p', '_low', '_high')))
#: ``health.csv``'s values per (dataset, reader,) system and k (:mod:`~pyterrier_utility.study.health`):
#: the answers, the shares empty, cut at max_new_tokens and copied from a document, and the mean tokens.
HEALTH_COLUMNS = ('answers', 'empty', 'cut', 'copied', 'mean_tokens')
#: The files of the ``attribute`` command: every coalition evaluated, each document's attribution, and the
#: qrels graded by it (:func:`~pyterrier_utility.methods.attribution.utility_qrels`).
ATTRIBUTION_FILES = {'coalitions': 'coalitions.csv', 'attribution': 'attribution.csv', 'qrels': 'utility.qrels',
                     'quality': 'attribution_quality.csv'}
#: What :class:`~pyterrier_utility.ContextAttribution` adds to each document of a context: its share
#: of v(all) - v(empty) by the method, the same divided by v(empty) (a share of U), the method, the
#: standard error where the method samples orders, and whether the method's shares always sum to
#: v(all) - v(empty) (``efficient``).
ATTRIBUTION_VALUES = ('phi', 'phi_utility', 'method', 'stderr', 'efficient')
#: ``coalitions.csv``: the value of each coalition (positions ascending, space-separated, '' for none),
#: the methods that read it (space-separated) and whether it is held out to judge them.
COALITION_COLUMNS = ('labels',) + CELL + ('coalition', 'value', 'methods', 'held_out')
#: ``attribution_quality.csv`` (``attribute --evaluate``): per context and method, the coalitions it read,
#: whether its phi are efficient, its linear datamodeling score on the held-out coalitions (and their
#: number), and against the exact Shapley values where known: mean absolute error, rank correlation,
#: the same top document (:mod:`~pyterrier_utility.methods.attribution.quality`).
QUALITY_COLUMNS = ('labels',) + CELL + ('method', 'coalitions', 'efficient', 'held_out', 'lds', 'mae', 'spearman',
                                        'top1')
#: ``attribution.csv``: one row per document of a context, and whether it is relevant under the row's label set.
ATTRIBUTION_COLUMNS = ('labels',) + CELL + ('position', 'docno') + ATTRIBUTION_VALUES + ('relevant',)
#: What a study scored by nuggets writes besides (:class:`~pyterrier_utility.scoring.nuggets.NuggetScorer`):
#: its nuggets in TREC RAG's JSONL (``--nuggets`` reads them back) and each answer's support of each nugget.
NUGGET_FILES = {'nuggets': 'nuggets.jsonl', 'assignments': 'nugget_assignments.csv'}
#: A nugget scorer's frames: each nugget of a label set and query, and each answer's support of each.
NUGGET_COLUMNS = ('labels', 'qid', 'nugget', 'text', 'importance')
NUGGET_ASSIGNMENT_COLUMNS = ('labels', 'qid', 'qanswer', 'nugget', 'assignment')
#: Per CSV file of a study: its columns (after ``dataset``, ``reader`` where named) and those of them
#: holding numbers (the rest are text).
CSV_COLUMNS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    'per_query.csv': (PER_QUERY_COLUMNS, tuple(PER_QUERY_INTEGERS) + PER_QUERY_MEASURES),
    'answers.csv': (CELL + ('sample', 'qanswer'), ('k', 'sample')),
    'scores.csv': (('labels',) + CELL + ('sample', 'quality', 'best_docno'), ('k', 'sample', 'quality')),
    'contexts.csv': (CELL + ('position', 'docno', 'label', 'text'), ('k', 'position', 'label')),
    'queries.csv': (('qid', 'query'), ()),
    'correlations.csv': (CORRELATION_COLUMNS, ('k',) + CORRELATION_FIELDS[1:]),
    'confidence_correlations.csv': (CORRELATION_COLUMNS, ('k',) + CORRELATION_FIELDS[1:]),  # r(confidence, U)
    'health.csv': (CELL[:2] + HEALTH_COLUMNS, ('k',) + HEALTH_COLUMNS),
    ATTRIBUTION_FILES['coalitions']: (COALITION_COLUMNS, ('k', 'value')),
    ATTRIBUTION_FILES['attribution']: (ATTRIBUTION_COLUMNS, ('k', 'position', 'phi', 'phi_utility', 'stderr')),
    NUGGET_FILES['assignments']: (NUGGET_ASSIGNMENT_COLUMNS, ('nugget',)),
    ATTRIBUTION_FILES['quality']: (QUALITY_COLUMNS, ('k', 'coalitions', 'held_out', 'lds', 'mae', 'spearman')),
}
#: The frames of a study (:class:`~pyterrier_utility.study.StudyResults`' attributes) and the files
#: they are saved as.
FRAME_FILES = {'per_query': 'per_query.csv', 'answers': 'answers.csv', 'contexts': 'contexts.csv',
               'scores': 'scores.csv', 'queries': 'queries.csv', 'token_logprobs': 'token_logprobs.csv'}
#: The tables made from ``per_query.csv`` (``report`` makes them again).
TABLE_FILES = ('table1.csv', 'table1.md', 'table1_paper.md', 'table1.tex', 'correlations.csv')
HEALTH_FILE = 'health.csv'
#: The generation cache every run into a folder shares (never removed with an earlier run's files).
GENERATIONS_FILE = 'generations.sqlite'
SETTINGS_FILE = 'settings.json'
REPORT_FILE = 'report.html'
#: The files ``transfer`` writes into a study's folder: each document's utility for each reader, the
#: readers' agreement, the transfer table, and the two figures of the report's section on them.
TRANSFER_FILES = {'document_utility': 'document_utility.csv', 'transfer': 'transfer.csv',
                  'table': 'transfer_table.csv', 'table_md': 'transfer_table.md',
                  'agreement_figure': 'transfer_agreement.png', 'gains_figure': 'transfer_gains.png'}
#: Everything a study run writes into its folder (patterns for the figures), and what ``predict`` and
#: ``transfer`` add to it; a run removes those of an earlier run it does not write again, so that no
#: page shows what another study found.
OUTPUTS = (tuple(FRAME_FILES.values()) + TABLE_FILES
           + ('confidence_correlations.csv', HEALTH_FILE, 'cosmix_branches.csv', SETTINGS_FILE, REPORT_FILE,
              'fig*.png', 'fig*.pdf') + tuple(NUGGET_FILES.values()) + tuple(PREDICTION_FILES.values())
           + tuple(TRANSFER_FILES.values()))
