"""The answer qualities P, each described once: its name (``--quality``), what it needs (the relevant
documents' texts, gold answers, a BERTScore model, a judge), its scorer, what the tables, the report and
``pt.Experiment`` call it, and what it computes, for the command line's help.

Everything that needs a quality's facts reads its description: ``--quality`` (its choices and help),
:class:`~pyterrier_utility.study.StudyConfig`'s checks (whether a BERTScore model is loaded, whether
BERTScore's settings apply), the queries a study answers (a quality against gold answers studies only
those that have some), the study's scorer of P, the measures of ``pt.Experiment``
(:func:`~pyterrier_utility.measures.quality_measures`, :attr:`~pyterrier_utility.UtilityEvaluator.measures`),
Table 1's headings and captions and the report. Adding a quality is its description and its scorer,
:func:`register`-ed. This module imports no scorer, so the command line's help and a study's checks run
before torch is loaded: the package's scorer classes register with their descriptions when their
modules are imported (:meth:`Quality.register`).

The frames and the study's files hold P in the columns ``quality`` (P_k; P of each answer in
``scores.csv``) and ``quality_0shot`` (P_0), whatever the quality, as a pyterrier run holds ``score`` whatever
the model; ``settings.json`` records the quality, whose measure names them wherever they are shown. A
study folder from before these names (``fbert``, ``fbert_0shot``) is read with them renamed
(:data:`~pyterrier_utility.schema.FORMER_COLUMNS`).

Example::

    from pyterrier_utility.qualities import quality_of
    quality_of('em').measure                 # 'EM'
    quality_of('fbert-docs').needs_bertscore  # True
"""
import difflib
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Dict, Optional, Tuple

from .errors import SettingError
from .vocabulary import QUALITY_NEEDS


@dataclass(frozen=True)
class ScoringInputs:
    """What a quality's scorer is built from (:meth:`Quality.build`): each quality reads what it needs.

    Attributes:
        dataset: the collection (its ``texts`` and ``gold_answers()``).
        qrels: its qrels.
        labels: the label set whose documents are the references (``None`` for a quality that reads no
            documents: one scorer serves every label set).
        bertscore: the BERTScore model (a :class:`~pyterrier_utility.BertScore`, or its name) where the
            quality needs one.
        submeasure, agg: BERTScore's precision, recall or F1, and the best or the mean over the references.
        judge: the judge's backend, where the quality needs one.
        nuggets: the nugget file (TREC RAG's JSONL), where the quality is scored by nuggets and they are given.
    """
    dataset: Any
    qrels: Any
    labels: Any = None
    bertscore: Any = None
    submeasure: str = 'F1'
    agg: str = 'max'
    judge: Any = None
    nuggets: Optional[str] = None


@dataclass(frozen=True)
class Quality:
    """One answer quality P, described once.

    Attributes:
        name: its name on the command line (``--quality NAME``) and in ``settings.json``.
        measure: what the tables, the report and ``pt.Experiment`` call P_k (``EM``); FBERT names BERTScore
            against the relevant documents only.
        description: what it computes, for ``--quality``'s help and the measures' descriptions.
        needs: what it is computed from (:data:`~pyterrier_utility.vocabulary.QUALITY_NEEDS`): the relevant
            documents' texts (``'documents'``: a scorer per label set), gold answers (``'gold'``: only the
            queries that have some are studied), a BERTScore model (``'bertscore'``: ``--scorer``,
            ``--submeasure`` and ``--agg`` apply), a judge (``'judge'``), nuggets (``'nuggets'``: made by the
            judge from the relevant documents, or read from ``--nuggets``).
        zero_shot_measure: what ``pt.Experiment`` calls P_0 (default: ``MEASURE_0shot``).
        latex: P's name in a LaTeX caption (default: :attr:`measure`, escaped).
        scorer: its scorer class, with a ``for_quality(quality, inputs)`` class method returning an
            :class:`~pyterrier_utility.protocols.AnswerScorer`; given here, or registered by its module
            (:meth:`register`).

    Example::

        register(Quality('length', 'Length', 'words in the answer, at most 10, over 10', scorer=LengthScorer))
    """
    name: str
    measure: str
    description: str
    needs: AbstractSet[str] = frozenset()
    zero_shot_measure: Optional[str] = None
    latex: Optional[str] = None
    scorer: Optional[Any] = field(default=None, compare=False)

    def __post_init__(self):
        object.__setattr__(self, 'needs', frozenset(self.needs))
        unknown = sorted(self.needs - set(QUALITY_NEEDS))
        if unknown:
            raise SettingError(f'Quality {self.name!r}: needs must come from {list(QUALITY_NEEDS)}, got {unknown}')

    def register(self, scorer: Any) -> Any:
        """Makes ``scorer`` (a class with a ``for_quality(quality, inputs)`` class method) this quality's
        scorer; a class decorator in the scorer's module::

            @FBERT_DOCS.register
            class FBertScorer(pt.Transformer):
                ...
        """
        object.__setattr__(self, 'scorer', scorer)
        return scorer

    def build(self, inputs: ScoringInputs) -> Any:
        """The scorer of P from ``inputs``, by its scorer class's ``for_quality``."""
        if self.scorer is None:
            raise SettingError(f'the quality {self.name!r} has no scorer: build it with '
                               'pyterrier_utility.study.scorers.scorer_factory, which imports every scorer')
        return self.scorer.for_quality(self, inputs)

    @property
    def p0_measure(self) -> str:
        """What ``pt.Experiment`` calls P_0."""
        return self.zero_shot_measure or f'{self.measure}_0shot'

    @property
    def needs_documents(self) -> bool:
        """P is computed against the documents of a label set: one scorer per label set."""
        return 'documents' in self.needs

    @property
    def needs_gold(self) -> bool:
        """P is computed against gold answers: only the queries with some are studied."""
        return 'gold' in self.needs

    @property
    def needs_bertscore(self) -> bool:
        """P is computed with a BERTScore model, whose submeasure and aggregation apply."""
        return 'bertscore' in self.needs

    @property
    def needs_judge(self) -> bool:
        """P is a judge's grade."""
        return 'judge' in self.needs

    @property
    def needs_nuggets(self) -> bool:
        """P is scored by nuggets (``--nuggets`` gives them; else the judge makes them)."""
        return 'nuggets' in self.needs


#: Every quality, by name, in the order the command line lists them (:func:`register` adds one).
QUALITIES_BY_NAME: Dict[str, Quality] = {}


def register(quality: Quality) -> Quality:
    """Adds ``quality`` to :data:`QUALITIES_BY_NAME`: ``--quality`` offers it, a study computes P by it,
    and the tables, the report and ``pt.Experiment`` name P by its :attr:`~Quality.measure`. A name or a
    measure already taken is refused.

    Example::

        register(Quality('length', 'Length', 'words in the answer, at most 10, over 10', scorer=LengthScorer))
    """
    names = {quality.measure, quality.p0_measure}
    taken = [q.name for q in QUALITIES_BY_NAME.values() if q.name == quality.name or names & {q.measure, q.p0_measure}]
    if taken:
        raise SettingError(f'the quality {quality.name!r} ({quality.measure}) clashes with the quality {taken[0]!r}: '
                           'give it a name and a measure of its own')
    QUALITIES_BY_NAME[quality.name] = quality
    return quality


def quality_of(name: str) -> Quality:
    """The :class:`Quality` named ``name``; a :class:`~pyterrier_utility.errors.SettingError` lists the
    names and the nearest one to a mistyped name."""
    if name in QUALITIES_BY_NAME:
        return QUALITIES_BY_NAME[name]
    near = difflib.get_close_matches(str(name), list(QUALITIES_BY_NAME), n=1)
    hint = f' (did you mean {near[0]!r}?)' if near else ''
    raise SettingError(f'unknown quality {name!r}{hint}; choose from {", ".join(QUALITIES_BY_NAME)}')


def quality_names() -> Tuple[str, ...]:
    """The names of every quality, in the command line's order."""
    return tuple(QUALITIES_BY_NAME)


def quality_help() -> str:
    """``--quality``'s help: every quality with what it computes."""
    return 'answer quality P: ' + '; '.join(f'{q.name}, {q.description}' for q in QUALITIES_BY_NAME.values())


#: The paper's FBERT: BERTScore of the answer against the query's relevant documents, their best F1 by default.
FBERT_DOCS = register(Quality('fbert-docs', 'FBERT', 'BERTScore against the relevant documents (the paper: their '
                              'best F1)', needs={'documents', 'bertscore'}, zero_shot_measure='FBERT0',
                              latex='$F_{\\mathrm{BERT}}$'))
#: Exact match against the best gold answer, with SQuAD's normalisation (pyterrier-rag's ``EM``).
EM = register(Quality('em', 'EM', "exact match against a QA collection's gold answers", needs={'gold'}))
#: Token F1 against the best gold answer (HotpotQA's, pyterrier-rag's ``F1``).
F1 = register(Quality('f1', 'F1', 'token F1 against the gold answers', needs={'gold'}))
#: BERTScore against the gold answers (``submeasure`` aggregated by ``agg``).
BERTSCORE_GOLD = register(Quality('bertscore-gold', 'BERTScore', 'BERTScore against the gold answers',
                                  needs={'gold', 'bertscore'}))
#: An LLM judge's grade of the answer, 1 to 10, against the relevant documents (pyterrier-rag's ``LLMasJudge``
#: pointwise prompt; :class:`~pyterrier_utility.scoring.judge.JudgeScorer`).
JUDGE_DOCS = register(Quality('judge-docs', 'Judge', "an LLM judge's grade, 1 to 10, against the relevant documents "
                              "(--judge; pyterrier-rag's LLMasJudge prompt)", needs={'documents', 'judge'}))
#: An LLM judge's grade of the answer, 1 to 10, against the gold answers.
JUDGE_GOLD = register(Quality('judge-gold', 'JudgeGold', "an LLM judge's grade, 1 to 10, against the gold answers",
                              needs={'gold', 'judge'}))
#: TREC RAG's nugget scores (:class:`~pyterrier_utility.scoring.nuggets.NuggetScorer`): quality name ->
#: (its measure, its key of :func:`~pyterrier_utility.scoring.nuggets.nugget_scores`); V and A for the vital
#: and all nuggets, strict where partial support gives no credit.
NUGGET_QUALITIES = {'nuggets-vital-strict': ('NuggetV_strict', 'vital_strict'), 'nuggets-vital': ('NuggetV', 'vital'),
                    'nuggets-all-strict': ('NuggetA_strict', 'all_strict'), 'nuggets-all': ('NuggetA', 'all')}
_NUGGET_WORDS = {'vital_strict': 'the share of vital nuggets the answer supports',
                 'vital': 'the vital nuggets the answer supports, partial support counting 0.5',
                 'all_strict': 'the share of nuggets the answer supports',
                 'all': 'the nuggets the answer supports, partial support counting 0.5'}
for _name, (_measure, _key) in NUGGET_QUALITIES.items():
    _latex = '$\\mathrm{' + _measure.split('_')[0] + '}' + ('_{\\mathrm{strict}}$' if 'strict' in _key else '$')
    register(Quality(_name, _measure, f"TREC RAG's nugget recall: {_NUGGET_WORDS[_key]} (the judge makes nuggets "
                     'from the relevant documents, or --nuggets gives them; --judge)',
                     needs={'documents', 'judge', 'nuggets'}, latex=_latex))
#: The quality P is unless told otherwise: the paper's.
DEFAULT_QUALITY = FBERT_DOCS.name
