"""The parameters of the ``predict`` command's signals and meta-evaluation, as one frozen value (read by
the command line without loading PyTerrier)."""
from dataclasses import asdict, dataclass
from typing import Optional, Tuple


@dataclass(frozen=True)
class PredictionParameters:
    """The parameters of the signals and of their meta-evaluation.

    Attributes:
        depth: the retrieved documents per query (the study's systems' depth); NQC, SMV and the
            authors' NQC read the top ``depth`` scores.
        wig_k: WIG's documents.
        apair_k: A-Pair-Ratio's documents.
        folds: the folds of the out-of-fold regression (KFold over queries, shuffled with ``seed``).
        seed: the seed of the folds and of the bootstrap.
        n_resamples: bootstrap resamples per interval.
        combine: the signals of the regression; each system's combination is over those that apply
            to it (an oracle has no ranking scores), and one that applies to no system is refused.
            ``None``: :data:`~pyterrier_utility.vocabulary.PREDICTION_COMBINATION`, where one that
            applies to no system is left out.
        perplexity: also the reader's perplexity of the contexts (its model loaded in process, one
            forward pass per distinct document and context; nothing generated).
        udcg: also UDCG (Trappolini et al., EACL 2026) of the contexts, per label set (the reader's
            model loaded in process, one prefill per distinct query and document; nothing generated).

    Example::

        PredictionParameters(folds=10, seed=1)
    """
    depth: int = 100
    wig_k: int = 5
    apair_k: int = 50
    folds: int = 5
    seed: int = 0
    n_resamples: int = 1000
    combine: Optional[Tuple[str, ...]] = None
    perplexity: bool = False
    udcg: bool = False

    def as_dict(self) -> dict:
        return dict(asdict(self), combine=None if self.combine is None else list(self.combine))
