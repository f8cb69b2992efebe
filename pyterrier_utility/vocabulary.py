"""The study's words, each written once: the names a setting may take (every choice list of the command
line and of :class:`~pyterrier_utility.study.config.StudyConfig`), the systems, orderings, oracles
and signals, and the few numbers the command line's help shows as defaults. The files a study
writes and their columns are :mod:`~pyterrier_utility.schema`'s; the answer qualities are described in
:mod:`~pyterrier_utility.qualities`, as the engines in :mod:`~pyterrier_utility.engines`.

As ir_measures declares a measure's parameters once and everything else reads them, the command line,
the config, the tables, the figures and the report import these names; the test
``tests/test_vocabulary.py`` fails when one of these lists is spelled out again elsewhere. This module
imports nothing from the package, so every module may import it.

Example::

    from pyterrier_utility.vocabulary import SYSTEMS, DEFAULT_SYSTEMS
    [s for s in SYSTEMS if s not in DEFAULT_SYSTEMS]  # ['COSMix']
"""
# Readers (their engines are described in :mod:`~pyterrier_utility.engines`).
#: How a server is asked: the raw prompt (``/v1/completions``) or a chat message (``/v1/chat/completions``).
ENDPOINTS = ('completions', 'chat')
#: What a reader in this process computes in (``--dtype``): ``exact`` is the offline Gemma's integer products.
DTYPE_CHOICES = ('auto', 'exact', 'bfloat16', 'float32')
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
#: The prompt layouts (:data:`~pyterrier_utility.prompt_formats.PROMPT_FORMATS`): this project's, the authors'
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
#: What an answer quality P may be computed from (:class:`~pyterrier_utility.qualities.Quality`'s ``needs``):
#: the relevant documents' texts, gold answers, a BERTScore model, a judge, nuggets.
QUALITY_NEEDS = ('documents', 'gold', 'bertscore', 'judge', 'nuggets')
#: What utility U measures: the relative gain (P_k - P_0) / P_0 (the paper's) or the absolute gain P_k - P_0
#: (the authors' later work; :func:`~pyterrier_utility.scoring.utility.utility`).
UTILITY_GAINS = ('relative', 'absolute')
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
#: The largest k at which ``attribute --evaluate`` computes the exact Shapley values as the reference
#: its methods are judged against (2^8 = 256 coalitions per context).
MAX_REFERENCE_K = 8

# What predicts utility (the predict command, :mod:`~pyterrier_utility.commands.predicting`).
#: What the signals are correlated with: U (per_query.csv's ``utility``, under the study's gain), the absolute
#: gain P_k - P_0 (the authors' utility) and P_k (``quality``).
PREDICTION_TARGETS = ('utility', 'gain', 'quality')
#: The levels of ``prediction.csv``'s rows: over the queries of one (labels, system, k) cell, or over the
#: cells of a label set (Kendall's tau between the orderings of the cells by mean signal and mean target).
PREDICTION_LEVELS = ('query', 'system')
#: The signals the ``predict`` command's linear regression combines unless told otherwise: the authors'
#: unsupervised predictors and the answer's confidence (their BERT-QPP, perplexity and QualT5 are not computed).
PREDICTION_COMBINATION = ('nqc_authors', 'max_score', 'spatial', 'a_pair_ratio', 'answer_confidence')
#: The signal name of the linear regression over several signals, evaluated out of fold.
COMBINED = 'combined'
# Each document's utility for each reader (the transfer command).
#: The most documents per query whose utility for each reader ``transfer`` measures by default (its pool).
POOL_CAP = 50
