"""The study's words and files, each written once: the names a setting may take (every choice list of
the command line and of :class:`~pyterrier_utility.study.config.StudyConfig`), the systems,
orderings and oracles, and the files a study writes with their columns.

As ir_measures declares a measure's parameters once and everything else reads them, the command line,
the config, the tables, the figures, the report and the folder readers import these names; the
test ``tests/test_vocabulary.py`` fails when one of these lists is spelled out again elsewhere. This
module imports nothing from the package, so every module may import it.

Example::

    from pyterrier_utility.vocabulary import CSV_COLUMNS, SYSTEMS
    columns, numbers = CSV_COLUMNS['per_query.csv']
"""
from typing import Dict, Tuple

# Readers (their engines are described in :mod:`~pyterrier_utility.engines`).
#: How a server is asked: the raw prompt (``/v1/completions``) or a chat message (``/v1/chat/completions``).
ENDPOINTS = ('completions', 'chat')
#: The Ray clusters ``--ray`` names without an address: the one this machine is a node of (``ray start``),
#: or a new one started by the command, every node on 127.0.0.1 (:func:`~pyterrier_utility.backends._ray.connect`).
RAY_ADDRESSES = ('auto', 'local')
#: Seconds a cluster named by its address (``HOST:PORT``) has to accept a connection before the run
#: stops naming it (Ray itself retries for minutes, printing each attempt).
RAY_CONNECT_TIMEOUT = 10

# Systems and the contexts they give.
#: The systems a study can run (besides saved runs), in the order they are reported.
SYSTEMS = ('BM25', 'Neural', 'Rel', 'NRel', 'COSMix')
#: The ``system`` of the answers given no context (``k`` 0), and Table 1's column of them.
ZERO_SHOT = '0-shot'
#: The systems a study runs unless told otherwise (:func:`~pyterrier_utility.study.default_systems`).
DEFAULT_SYSTEMS = SYSTEMS[:4]
#: The retrieval systems (an index, a re-ranker), also reported in their other orderings (reversed by default).
REVERSED_SYSTEMS = ('BM25', 'Neural')
#: The oracles: left out of the figures' lines and the best-system marks, and of a collection judged
#: in two grades.
ORACLES = ('Rel', 'NRel')
#: The neural re-rankers of BM25: the MiniLM bi-encoder (offline) or MonoT5 (the paper's).
RERANKERS = ('dense', 'monot5')
#: BM25's engines: PISA (offline) or Terrier (Java, the paper's).
BM25_ENGINES = ('pisa', 'terrier')
#: The prompt layouts (:data:`~pyterrier_utility.prompts.PROMPT_FORMATS`): this project's, the authors'
#: exact one, their short-answer one, and this project's with a worked example first (base models).
PROMPT_FORMAT_NAMES = ('plain', 'authors', 'authors-short', 'example')
#: How the Rel and NRel oracles choose documents: a random sample (the paper's text) or every judged
#: document by label (the authors' released runs).
ORACLE_MODES = ('sampled', 'authors')
#: The orderings of a ranking a study can report (``study.sweep.ORDERINGS`` gives each a transformer).
ORDERING_NAMES = ('original', 'reversed', 'lim', 'lim-r', 'lim-authors', 'lim-authors-r')
#: The orderings reported unless told otherwise.
DEFAULT_ORDERINGS = ORDERING_NAMES[:2]
#: nDCG@k of a reordered system: over the contexts as the reader sees them, or in retrieval order.
NDCG_ORDERS = ('context', 'retrieval')

# Scoring and statistics.
#: BERTScore's submeasures: precision (answer tokens matched in the reference), recall (reference
#: tokens matched in the answer) and their harmonic mean, as bert_score returns them.
SUBMEASURES = ('P', 'R', 'F1')
#: How the scores against several references make one: the best one (the paper) or their mean.
AGGREGATIONS = ('max', 'mean')
#: The answer qualities against gold answers: exact match, token F1, BERTScore (``submeasure``, ``agg``).
GOLD_QUALITIES = ('em', 'f1', 'bertscore-gold')
#: The measures of answer quality P: FBERT against the relevant documents (the paper), or against the
#: gold answers of a QA collection (:class:`~pyterrier_utility.GoldAnswerScorer`).
QUALITIES = ('fbert-docs',) + GOLD_QUALITIES
#: The qualities computed from an answer's words alone: no BERTScore model is loaded for them.
WORD_QUALITIES = GOLD_QUALITIES[:2]
#: The multiple-testing corrections offered (statsmodels' ``multipletests`` methods).
CORRECTIONS = ('bonferroni', 'sidak', 'holm-sidak', 'holm', 'simes-hochberg', 'hommel', 'fdr_bh', 'fdr_by',
               'fdr_tsbh', 'fdr_tsbky')
#: The fewest paired queries a significance mark is given on: a paired t-test over 2-4 queries has 1-3
#: degrees of freedom, and its p-value says little (this project's choice).
MIN_N = 5
#: The correlation methods of ``correlations.csv`` (pandas' and scipy's names), in the order written.
CORRELATION_METHODS = ('pearson', 'spearman', 'kendall')

# Attribution of utility to the documents of a context.
#: The estimators of each document's share (:mod:`~pyterrier_utility.methods.attribution.games`):
#: exact Shapley; Shapley by permutation sampling, Kernel SHAP and truncated Monte Carlo; ContextCite's
#: linear surrogate; leave-one-out; each document alone.
ATTRIBUTION_METHODS = ('shapley', 'permutation', 'kernelshap', 'tmc', 'contextcite', 'loo', 'single')
#: What :class:`~pyterrier_utility.ContextAttribution` adds to each document of a context: its share
#: of v(all) - v(empty) by the method, the same divided by v(empty) (a share of U), the method, the
#: standard error where the method samples orders, and whether the method's shares always sum to
#: v(all) - v(empty) (``efficient``).
ATTRIBUTION_VALUES = ('phi', 'phi_utility', 'method', 'stderr', 'efficient')
#: The largest k at which ``attribute --evaluate`` computes the exact Shapley values as the reference
#: its methods are judged against (2^8 = 256 coalitions per context).
MAX_REFERENCE_K = 8

# The files of a study folder.
#: One cell of the study: a system's contexts at k for one query.
CELL = ('system', 'k', 'qid')
#: ``per_query.csv``'s measures; P is undefined for a query without a relevant document under a
#: label set, and U also when the 0-shot FBERT is 0, so those may be empty (NaN).
PER_QUERY_MEASURES = ('ndcg', 'fbert_0shot', 'fbert', 'utility')
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
# What predicts utility (the predict command, :mod:`~pyterrier_utility.commands.predicting`).
#: What the signals are correlated with: U (per_query.csv's ``utility``, the relative gain), the absolute
#: gain P_k - P_0 (the authors' utility) and P_k (``fbert``).
PREDICTION_TARGETS = ('utility', 'gain', 'fbert')
#: The levels of ``prediction.csv``'s rows: over the queries of one (labels, system, k) cell, or over the
#: cells of a label set (Kendall's tau between the orderings of the cells by mean signal and mean target).
PREDICTION_LEVELS = ('query', 'system')
#: The signals the ``predict`` command's linear regression combines unless told otherwise: the authors'
#: unsupervised predictors and the answer's confidence (their BERT-QPP, perplexity and QualT5 are not computed).
PREDICTION_COMBINATION = ('nqc_authors', 'max_score', 'spatial', 'a_pair_ratio', 'answer_confidence')
#: The signal name of the linear regression over several signals, evaluated out of fold.
COMBINED = 'combined'
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
#: Per CSV file of a study: its columns (after ``dataset``, ``reader`` where named) and those of them
#: holding numbers (the rest are text).
CSV_COLUMNS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    'per_query.csv': (PER_QUERY_COLUMNS, tuple(PER_QUERY_INTEGERS) + PER_QUERY_MEASURES),
    'answers.csv': (CELL + ('sample', 'qanswer'), ('k', 'sample')),
    'scores.csv': (('labels',) + CELL + ('sample', 'fbert', 'best_docno'), ('k', 'sample', 'fbert')),
    'contexts.csv': (CELL + ('position', 'docno', 'label', 'text'), ('k', 'position', 'label')),
    'queries.csv': (('qid', 'query'), ()),
    'correlations.csv': (CORRELATION_COLUMNS, ('k',) + CORRELATION_FIELDS[1:]),
    'confidence_correlations.csv': (CORRELATION_COLUMNS, ('k',) + CORRELATION_FIELDS[1:]),  # r(confidence, U)
    'health.csv': (CELL[:2] + HEALTH_COLUMNS, ('k',) + HEALTH_COLUMNS),
    ATTRIBUTION_FILES['coalitions']: (COALITION_COLUMNS, ('k', 'value')),
    ATTRIBUTION_FILES['attribution']: (ATTRIBUTION_COLUMNS, ('k', 'position', 'phi', 'phi_utility', 'stderr')),
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
              'fig*.png', 'fig*.pdf') + tuple(PREDICTION_FILES.values()) + tuple(TRANSFER_FILES.values()))
#: The most documents per query whose utility for each reader ``transfer`` measures by default (its pool).
POOL_CAP = 50
