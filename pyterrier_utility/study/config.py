"""Everything a study needs, as one frozen value: :class:`StudyConfig`, its fields and their checks.

The command line parses into it (:mod:`.merge`), a notebook builds it directly, ``settings.json`` is it
written whole (:mod:`.config_json`), and the ``paper`` preset is one instance of it
(:mod:`.presets`). It is validated once, when made; the study trusts it.
"""
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Optional, Tuple

from .._checks import check_int, check_k, check_system, check_window
from .._messages import either
from ..engines import ENGINE_OPTION_NAMES, OFFLINE, EngineOptions, engine_of
from ..errors import SettingError
from ..qualities import DEFAULT_QUALITY, QUALITIES_BY_NAME, quality_of
from ..settings import FIELDS, Decoding, LabelSet, is_int
from ..vocabulary import (
    AGGREGATIONS,
    BM25_ENGINES,
    CORRECTIONS,
    DEFAULT_ORDERINGS,
    DEFAULT_SYSTEMS,
    MIN_N,
    NDCG_ORDERS,
    ORACLE_MODES,
    ORACLES,
    ORDERING_NAMES,
    PROMPT_FORMAT_NAMES,
    RERANKERS,
    SUBMEASURES,
    SYSTEMS,
    UTILITY_GAINS,
)

#: The label set of a collection judged in two grades (MS MARCO dev_small: the paper's r_dev_small = 1).
BINARY_LABELS = LabelSet(exact=frozenset({1}))


@dataclass(frozen=True)
class StudyConfig:
    """The settings of a study. The defaults are the offline main job (runnable on a CPU with
    nothing downloaded); :data:`~.presets.PRESETS` ``['paper']`` is the paper's study.

    Data: ``datasets`` (``'cranfield'`` or PyTerrier / ir_datasets ids), ``queries`` (the first N
    answerable ones; 0: all), ``ks`` (Table 1's), ``figure_ks`` (those of Figures 3 and 5, empty:
    ``ks``; the answers of a k in both are generated once), ``label_sets`` (relevant labels for P, one
    column block each),
    ``rel_labels`` (what the Rel oracle draws from). Systems: ``systems``, ``runs`` (name, path)
    pairs, ``orderings`` of the rankings (:data:`ORDERING_NAMES`), ``windows``
    (start ranks of deeper contexts: ``6`` gives ranks 6 .. 5 + k; ``-1`` the last window of the grid of
    ``window_grid``'s step, :func:`~pyterrier_utility._checks.check_window`), ``window_grid`` (``(tops, tails,
    step)``: windows from the top and the tail of each ranking, as the authors' ``compose_context``
    samples them), ``neural``, ``bm25``, ``index``,
    ``cosmix_threshold``, ``oracle`` ('sampled' as the paper's text says, or 'authors': their released
    runs' order), ``oracle_seed`` (the Rel/NRel samples), ``prompt_format`` ('plain', 'authors',
    'authors-short'). Readers: ``readers`` (several: each
    with its own 0-shot baseline, one generation cache, a ``reader`` column in the results), ``decoding``,
    ``samples`` per prompt, ``seed`` (sample j uses seed + j), and ``engine``, the engines' options
    (:class:`~pyterrier_utility.engines.EngineOptions`: ``base_urls``, ``concurrency``, ``endpoint``,
    ``tensor_parallel_size``, ``chat_template``, ``reproducible``, ``timeout``, ``max_retries``,
    ``retry_deadline``), which may also be given and read one by one (``concurrency=16``). Scoring and
    output: ``quality`` (what P is, a name of :data:`~pyterrier_utility.qualities.QUALITIES_BY_NAME`:
    FBERT against the relevant documents, EM, token F1 or BERTScore against the gold answers, or an LLM
    judge's grade; the label sets still drive Rel and nDCG), ``scorer`` (the BERTScore model),
    ``submeasure`` and ``agg`` (BERTScore's P, R or F1, the max or mean over the references), ``utility``
    (U's gain, :data:`UTILITY_GAINS`: ``'relative'``, (P_k - P_0) / P_0 as the paper, or ``'absolute'``,
    P_k - P_0), ``judge`` (the reader name of the judge of a quality graded by one, ``judge-docs`` or
    ``judge-gold``; default: the first reader), ``nuggets`` (a nugget file in TREC RAG's JSONL format, for a
    quality scored by nuggets; default: the judge makes them from the relevant documents), ``ndcg_order``,
    ``correction``,
    ``fig4_k``, ``out``, ``title`` (of ``report.html``; default: the name of ``out``), ``verbose``.
    ``decoding_given``: the decoding fields given explicitly (the command line's, by :func:`~.merge.resolve`),
    which hold for every reader; a field not given keeps a reader's own value where its engine has one
    (:meth:`decoding_for`).

    Example::

        config = StudyConfig(queries=3, ks=(1, 3), samples=2, out='results/small')
        results = pyterrier_utility.commands.run(config)
        PRESETS['paper'].replace(readers=('openai:meta-llama/Meta-Llama-3-8B-Instruct',),
                                 base_urls=('http://gpu1:8000/v1',))
    """
    datasets: Tuple[str, ...] = ('cranfield',)
    # 20 queries, 3 samples: the smallest design measured whose positive control held on every
    # sampling (benchmarks/bench_study_size.py; the docs' Getting started).
    queries: int = 20
    ks: Tuple[int, ...] = (1, 3, 5)
    figure_ks: Tuple[int, ...] = ()
    label_sets: Tuple[LabelSet, ...] = (LabelSet(minimum=2), LabelSet(minimum=3))
    rel_labels: LabelSet = LabelSet(minimum=2)
    systems: Tuple[str, ...] = DEFAULT_SYSTEMS
    runs: Tuple[Tuple[str, str], ...] = ()
    orderings: Tuple[str, ...] = DEFAULT_ORDERINGS
    windows: Tuple[int, ...] = ()
    window_grid: Tuple[int, ...] = ()
    neural: str = 'dense'
    bm25: str = 'pisa'
    index: Optional[str] = None
    cosmix_threshold: float = 0.65
    oracle: str = 'sampled'
    oracle_seed: int = 0
    prompt_format: str = OFFLINE.prompt_format
    readers: Tuple[str, ...] = ('gemma3-270m',)
    decoding: Decoding = OFFLINE.decoding
    samples: int = 3
    seed: int = 0
    engine: EngineOptions = EngineOptions()
    quality: str = DEFAULT_QUALITY
    scorer: str = 'minilm'
    submeasure: str = 'F1'
    agg: str = 'max'
    utility: str = 'relative'
    judge: Optional[str] = None
    nuggets: Optional[str] = None
    ndcg_order: str = 'context'
    correction: Optional[str] = None
    min_n: int = MIN_N
    fig4_k: int = 5
    out: str = 'results/study'
    title: Optional[str] = None
    verbose: bool = False
    preset: Optional[str] = None
    decoding_given: Tuple[str, ...] = ()

    def __post_init__(self):
        if isinstance(self.readers, str):
            object.__setattr__(self, 'readers', (self.readers,))
        for name in ('datasets', 'ks', 'figure_ks', 'systems', 'runs', 'orderings', 'windows', 'window_grid',
                     'readers', 'decoding_given'):
            object.__setattr__(self, name, tuple(tuple(x) if name == 'runs' else x for x in getattr(self, name)))
        object.__setattr__(self, 'label_sets', tuple(LabelSet.parse(x) for x in self.label_sets))
        object.__setattr__(self, 'rel_labels', LabelSet.parse(self.rel_labels))
        if not isinstance(self.decoding, Decoding):
            raise SettingError(f'StudyConfig: decoding must be a Decoding, got {self.decoding!r}')
        if not isinstance(self.engine, EngineOptions):
            raise SettingError(f'StudyConfig: engine must be an EngineOptions, got {self.engine!r}')
        self._check_values()
        self._check_engine()

    def _check_values(self) -> None:
        def require(ok, message):
            if not ok:
                raise SettingError(f'StudyConfig: {message}')
        require(bool(self.datasets), 'give at least one dataset')
        require(bool(self.readers) and len(set(self.readers)) == len(self.readers),
                f'give one reader or several different ones, got {list(self.readers)}')
        require(bool(self.ks), 'give at least one k')
        for k in self.ks:
            check_k('StudyConfig', k)
        for k in self.figure_ks:
            check_k('StudyConfig figure_ks', k)
        require(bool(self.label_sets), 'give at least one label set')
        for name, minimum in (('queries', 0), ('seed', 0), ('oracle_seed', 0), ('samples', 1), ('min_n', 1)):
            check_int('StudyConfig', name, getattr(self, name), minimum)
        check_k('StudyConfig fig4_k', self.fig4_k)
        for system in self.systems:
            check_system('StudyConfig', system)
        clash = sorted({name for name, _ in self.runs} & set(SYSTEMS))
        require(not clash, f'runs named {clash} clash with built-in systems; name them otherwise')
        require(bool(self.systems) or bool(self.runs), 'give at least one system or run')
        require('original' in self.orderings and set(self.orderings) <= set(ORDERING_NAMES),
                f"orderings must include 'original' and come from {list(ORDERING_NAMES)}, got {list(self.orderings)}")
        for start in self.windows:
            check_window('StudyConfig', start)
        grid = self.window_grid
        require(not grid or (len(grid) == 3 and all(is_int(x) for x in grid)
                             and grid[0] >= 1 and grid[1] >= 0 and grid[2] >= 1),
                f'window_grid is (tops >= 1, tails >= 0, step >= 1), got {list(self.window_grid)}')
        require(self.ndcg_order in NDCG_ORDERS, f'ndcg_order must be {either(NDCG_ORDERS)}, got {self.ndcg_order!r}')
        require(self.quality in QUALITIES_BY_NAME,
                f'quality must be one of {list(QUALITIES_BY_NAME)}, got {self.quality!r}')
        require(self.judge is None or quality_of(self.quality).needs_judge,
                f'judge is the judge of a quality graded by one, not of quality {self.quality!r}')
        if self.judge is not None:
            engine_of(self.judge)
        require(self.nuggets is None or quality_of(self.quality).needs_nuggets,
                f'nuggets are those of a quality scored by nuggets, not of quality {self.quality!r}')
        require(self.utility in UTILITY_GAINS, f'utility must be {either(UTILITY_GAINS)}, got {self.utility!r}')
        require(self.submeasure in SUBMEASURES and self.agg in AGGREGATIONS,
                f'submeasure must be one of {list(SUBMEASURES)} and agg one of {list(AGGREGATIONS)}, '
                f'got {self.submeasure!r}, {self.agg!r}')
        require(self.bertscore_needed or (self.submeasure, self.agg) == ('F1', 'max'),
                f'submeasure and agg are those of BERTScore; quality {self.quality!r} computes no BERTScore')
        require(self.correction is None or self.correction in CORRECTIONS,
                f'correction must be one of {list(CORRECTIONS)}, got {self.correction!r}')
        require(self.oracle in ORACLE_MODES, f'oracle must be one of {list(ORACLE_MODES)}, got {self.oracle!r}')
        require(self.prompt_format in PROMPT_FORMAT_NAMES,
                f'prompt_format must be one of {list(PROMPT_FORMAT_NAMES)}, got {self.prompt_format!r}')
        require(self.neural in RERANKERS, f'neural must be {either(RERANKERS)}, got {self.neural!r}')
        require(self.bm25 in BM25_ENGINES, f'bm25 must be {either(BM25_ENGINES)}, got {self.bm25!r}')

    @property
    def bertscore_needed(self) -> bool:
        """Whether P is computed with a BERTScore model (``scorer``): its quality's description says."""
        return quality_of(self.quality).needs_bertscore

    @property
    def judge_reader(self) -> str:
        """The reader name of the judge of a quality graded by one: ``judge``, else the first reader."""
        return self.judge or self.readers[0]

    @property
    def all_ks(self) -> Tuple[int, ...]:
        """Every k the study answers: Table 1's and the figures', each once."""
        return tuple(sorted(set(self.ks) | set(self.figure_ks)))

    @property
    def study_windows(self) -> Tuple[int, ...]:
        """The windows of each ranking the study answers (see :func:`~.sweep.window`): ``windows``, and
        ``window_grid``'s as the authors' ``compose_context(tops, tails, step)`` samples them: the
        first ``tops`` windows every ``step`` ranks from the top (their start ranks; the first is the
        top k) and the last ``tails`` of that grid (-tails .. -1)."""
        if not self.window_grid:
            return self.windows
        tops, tails, step = self.window_grid
        grid = [1 + i * step for i in range(1, tops)] + [-j for j in range(tails, 0, -1)]
        return tuple(dict.fromkeys(list(self.windows) + grid))

    @property
    def window_step(self) -> int:
        """The step of ``window_grid`` (1 without one)."""
        return self.window_grid[2] if self.window_grid else 1

    @property
    def offline(self) -> bool:
        """Whether every reader is an offline model (the offline conveniences are theirs)."""
        return all(engine_of(r).offline for r in self.readers)

    def _check_engine(self) -> None:
        """A setting a reader's engine cannot honour is an error, never dropped."""
        self.decoding_notes()
        for reader in self.readers + ((self.judge,) if self.judge else ()):
            engine = engine_of(reader)
            refused = self.engine.refused_by(engine)
            if refused:
                raise SettingError(f'the reader {reader!r} cannot honour '
                                   + ', '.join(f'{name} (--{name.replace("_", "-")})' for name in refused))

    def decoding_notes(self) -> Dict[str, Dict[str, str]]:
        """reader -> the decoding settings its engine applies its own way, and how
        (:class:`~pyterrier_utility.engines.Engine`'s ``own_way``); a :class:`SettingError` names a
        setting a reader's engine cannot honour at all."""
        notes = {}
        for reader in self.readers:
            engine = engine_of(reader)
            own = self.decoding.check_honoured(f'the reader {reader!r}', engine.honours, dict(engine.own_way))
            if own:
                notes[reader] = own
        return notes

    def for_collection(self, name: str, labels: Iterable[int]) -> Tuple['StudyConfig', Optional[str]]:
        """The config a collection whose judgements hold ``labels`` is studied under, and a sentence
        saying what changed (``None``: nothing).

        A collection judged in two grades (labels 0 and 1, or 1 alone, as MS MARCO dev_small) is
        studied as the paper studies dev_small: under the one label set {1} (the paper's
        r_dev_small = 1), whatever ``label_sets`` say, and without the Rel and NRel oracles (the
        paper runs none there: "only 1.1 relevant documents per query"). A :class:`SettingError`
        says so when nothing else is left to study.

        Example::

            config, note = PRESETS['paper'].for_collection('irds:msmarco-passage/dev/small', [1])
        """
        labels = sorted(set(int(x) for x in labels))
        if not labels or not set(labels) <= {0, 1}:
            return self, None
        dropped = [s for s in self.systems if s in ORACLES]
        systems = tuple(s for s in self.systems if s not in ORACLES)
        if not systems and not self.runs:
            raise SettingError(f'{name} is judged in two grades (labels {labels}): it is studied without the oracles '
                               f'{dropped}, and no other system is asked for; add --systems BM25 Neural or a --run')
        changed = [f'P counts label 1 (one label set, {BINARY_LABELS})'] if self.label_sets != (BINARY_LABELS,) else []
        if dropped:
            changed.append(f'{" and ".join(dropped)} left out (too few relevant documents per query to draw from; '
                           'the paper runs no oracle on MS MARCO dev_small)')
        note = f'{name} is judged in two grades (labels {labels}): ' + '; '.join(changed) if changed else None
        return self.replace(label_sets=(BINARY_LABELS,), systems=systems), note

    def replace(self, **changes) -> 'StudyConfig':
        """A copy with some settings changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def backend_options(self, reader: str) -> Dict[str, Any]:
        """The keyword arguments of :func:`pyterrier_utility.backends.get_backend` for ``reader``."""
        return dict(decoding=self.decoding_for(reader), **self.engine.for_engine(engine_of(reader)))

    def decoding_for(self, reader: str) -> Decoding:
        """The decoding ``reader`` answers with: :attr:`decoding`, with the values its engine gives it
        (:meth:`~pyterrier_utility.engines.Engine.decoding_of`) where no field was given or changed."""
        engine, own = engine_of(reader), engine_of(reader).decoding_of(reader)
        changes = {name: getattr(own, name) for name in FIELDS if name not in self.decoding_given
                   and getattr(own, name) != getattr(engine.decoding, name)
                   and getattr(self.decoding, name) == getattr(engine.decoding, name)}
        return self.decoding.replace(**changes)

    def __getattr__(self, name: str) -> Any:
        # An engine option read by its name (config.concurrency), as it may be given.
        if name in ENGINE_OPTION_NAMES:
            return getattr(object.__getattribute__(self, 'engine'), name)
        raise AttributeError(f'{type(self).__name__!r} object has no attribute {name!r}')



def _taking_engine_options_by_name(init):
    """``StudyConfig``'s ``__init__`` also taking the engine options one by one (``concurrency=16``, as
    ``settings.json``, the command line and :meth:`StudyConfig.replace` give them), into ``engine``."""
    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        named = {name: kwargs.pop(name) for name in ENGINE_OPTION_NAMES if name in kwargs}
        engine = kwargs.get('engine', EngineOptions())
        if named and isinstance(engine, EngineOptions):  # any other engine is refused by __post_init__
            kwargs['engine'] = engine.replace(**named)
        init(self, *args, **kwargs)
    return __init__


StudyConfig.__init__ = _taking_engine_options_by_name(StudyConfig.__init__)  # type: ignore[method-assign]


def figure4_k(fig4_k: int, answered: Iterable[int], table_ks: Iterable[int]) -> int:
    """The k of Figure 4 (nDCG@k against utility): ``fig4_k`` where the study answered it, else the
    largest k of Table 1.

    Example::

        figure4_k(5, answered=(1, 3), table_ks=(1, 3))   # 3
    """
    return fig4_k if fig4_k in set(answered) else max(table_ks)
