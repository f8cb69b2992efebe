"""Settings as values: how a reader decodes (:class:`Decoding`), which labels count as relevant
(:class:`LabelSet`) and where a study's readers run (:class:`Placement`). Each is validated once, when
it is made, and trusted everywhere after; cache keys, ``settings.json`` and help texts are derived
from them.
"""
import dataclasses
import math
import numbers
import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple, TypeGuard, Union

import pandas as pd

from .errors import SettingError

#: The stop sequence the study's prompts ask for ("End your answer with STOP").
STOP = ('STOP',)
#: Stop sequences for base (non-instruction) models, which ignore "STOP" and go on to invent the
#: next "Question:" or "Context": the answer is what comes before.
BASE_MODEL_STOP = ('STOP', '\nQuestion:', '\nContext')
#: Stop sequences for a base model that answers in one line, as the worked example of the
#: ``'example'`` prompt format does (few-shot prompts of base models end an answer at its line's end):
#: STOP, or the end of the line (which also ends a new "Question:" or "Context" line).
ONE_LINE_STOP = ('STOP', '\n')


def is_int(value) -> TypeGuard[numbers.Integral]:
    """An integer, and not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _stop_tuple(stop) -> Tuple[str, ...]:
    """Stop sequences as a tuple: a single string is one stop sequence (never split into characters)."""
    if stop is None:
        return ()
    if isinstance(stop, str):
        stop = [stop]
    try:
        stop = tuple(stop)
    except TypeError:
        stop = None
    if stop is None or not all(isinstance(s, str) and s for s in stop):
        raise SettingError(f'Decoding: stop must be a string or a sequence of non-empty strings, got {stop!r}')
    return stop


@dataclass(frozen=True)
class Decoding:
    """How a reader decodes: every setting that changes an answer besides the model, prompt and seed.

    The defaults are the settings the authors' code passes for the paper's reader (temperature 0.3,
    top-k 50, up to 300 new tokens, stopping at "STOP"; github.com/DanielTian97/rag-utility,
    ``tools/llama_tools.py``); :data:`AUTHORS_DECODING` adds what their engine applied by default. A
    backend declares the fields it honours (``DECODING_FIELDS``); a value it cannot honour is an
    error when the backend is built, never dropped.

    Args:
        temperature: sampling temperature, >= 0 (0: greedy, seeds are then irrelevant).
        top_k: sample among the ``top_k`` most likely tokens (0: all; ``None``: not sent to a server).
        top_p: nucleus sampling in (0, 1] (``None``: off).
        min_p: keep the tokens whose probability is at least ``min_p`` times the most likely one's,
            in [0, 1] (``None``: off).
        max_new_tokens: the most tokens per answer, >= 1.
        repetition_penalty: > 0 (``None`` or 1: none).
        repeat_last_n: the repetition penalty counts the last ``repeat_last_n`` tokens of prompt and
            answer, >= 1, as llama.cpp's ``penalty_last_n`` (``None``: every prompt and answer token).
        stop: stop sequences, removed from the answer (a string is one sequence).

    Example::

        paper = Decoding()
        offline = Decoding(max_new_tokens=32, repetition_penalty=1.2, stop=BASE_MODEL_STOP)
        greedy = paper.replace(temperature=0)
        llama_cpp = paper.replace(top_p=0.95, min_p=0.05, repetition_penalty=1.1, repeat_last_n=64)
    """
    temperature: float = 0.3
    top_k: Optional[int] = 50
    top_p: Optional[float] = None
    min_p: Optional[float] = None
    max_new_tokens: int = 300
    repetition_penalty: Optional[float] = None
    repeat_last_n: Optional[int] = None
    stop: Tuple[str, ...] = STOP

    def __post_init__(self):
        def fail(message):
            raise SettingError(f'Decoding: {message}')
        if not (_is_number(self.temperature) and self.temperature >= 0):
            fail(f'temperature must be a number >= 0 (0 decodes greedily), got {self.temperature!r}')
        if not (self.top_k is None or (is_int(self.top_k) and self.top_k >= 0)):
            fail(f'top_k must be an integer >= 0 (0: all tokens), got {self.top_k!r}')
        if not (self.top_p is None or (_is_number(self.top_p) and 0 < self.top_p <= 1)):
            fail(f'top_p must be in (0, 1], got {self.top_p!r}')
        if not (self.min_p is None or (_is_number(self.min_p) and 0 <= self.min_p <= 1)):
            fail(f'min_p must be in [0, 1], got {self.min_p!r}')
        if not (self.repeat_last_n is None or (is_int(self.repeat_last_n) and self.repeat_last_n >= 1)):
            fail(f'repeat_last_n must be an integer >= 1 (None: every token), got {self.repeat_last_n!r}')
        if not (is_int(self.max_new_tokens) and self.max_new_tokens >= 1):
            fail(f'max_new_tokens must be an integer >= 1, got {self.max_new_tokens!r}')
        if not (self.repetition_penalty is None or (_is_number(self.repetition_penalty)
                                                    and self.repetition_penalty > 0)):
            fail(f'repetition_penalty must be a number > 0 (1: none), got {self.repetition_penalty!r}')
        object.__setattr__(self, 'temperature', float(self.temperature))
        object.__setattr__(self, 'top_k', None if self.top_k is None else int(self.top_k))
        object.__setattr__(self, 'top_p', None if self.top_p is None else float(self.top_p))
        object.__setattr__(self, 'min_p', None if self.min_p is None else float(self.min_p))
        object.__setattr__(self, 'repeat_last_n', None if self.repeat_last_n is None else int(self.repeat_last_n))
        object.__setattr__(self, 'max_new_tokens', int(self.max_new_tokens))
        if self.repetition_penalty is not None:
            object.__setattr__(self, 'repetition_penalty', float(self.repetition_penalty))
        object.__setattr__(self, 'stop', _stop_tuple(self.stop))

    @property
    def greedy(self) -> bool:
        """True when answers do not depend on the seed."""
        return self.temperature == 0

    def replace(self, **changes) -> 'Decoding':
        """A copy with some fields changed (validated again)."""
        unknown = sorted(set(changes) - set(self.fields()))
        if unknown:
            raise SettingError(f'Decoding has no setting {unknown}; its settings are {list(self.fields())}')
        return dataclasses.replace(self, **changes)

    def fields(self) -> Tuple[str, ...]:
        """The names of its settings, in order (:data:`FIELDS`, and any a subclass adds)."""
        return tuple(f.name for f in dataclasses.fields(self))

    @property
    def penalised(self) -> bool:
        """True when a repetition penalty applies (one of 1 changes nothing)."""
        return self.repetition_penalty not in (None, 1.0)

    def as_dict(self) -> Dict[str, object]:
        """The settings as plain JSON values (the part of a cache key and of ``settings.json``).

        A setting added after answers were first cached (:data:`ADDED_FIELDS`) is left out while
        it is ``None``, so the keys of answers generated before it existed stay what they were."""
        return {name: list(value) if isinstance(value, tuple) else value
                for name, value in dataclasses.asdict(self).items()
                if not (name in ADDED_FIELDS and value is None)}

    def check_honoured(self, owner: str, fields: Iterable[str],
                       own_way: Optional[Dict[str, str]] = None) -> Dict[str, str]:
        """Raises a :class:`SettingError` naming every setting ``owner`` cannot honour: a field
        outside ``fields`` that is set (not ``None``, not a repetition penalty of 1, not a penalty
        window without a penalty) and that ``owner`` does not apply its own way. Returns, for the
        set fields it applies its own way (``own_way``: field -> how), how it applies them."""
        fields, own_way = set(fields), dict(own_way or {})
        given = [name for name in self.fields() if getattr(self, name) != UNSET.get(name, object())
                 and not (name in ('repetition_penalty', 'repeat_last_n') and not self.penalised)]
        refused = [name for name in given if name not in fields and name not in own_way]
        if refused:
            raise SettingError(f'{owner} cannot honour {", ".join(f"{n}={getattr(self, n)!r}" for n in refused)}; '
                               f'it honours {sorted(fields)}')
        return {name: own_way[name] for name in given if name not in fields}


#: What the authors' reader applied (github.com/DanielTian97/rag-utility, ``tools/llama_tools.py``):
#: the settings their code passes to llama-cpp-python, and the library's defaults for the rest at the
#: version their ``rag-utility.yml`` pins (0.2.75; :data:`AUTHORS_DECODING_SOURCES` says which is which).
#: :class:`Decoding`'s defaults are their code's settings; the rest are the library's.
AUTHORS_DECODING = Decoding(top_p=0.95, min_p=0.05, repetition_penalty=1.1, repeat_last_n=64)
_THEIR_CODE = "authors' code (tools/llama_tools.py"
_LIBRARY_DEFAULT = 'llama-cpp-python 0.2.75 default (their rag-utility.yml pins it)'
#: Where each value of :data:`AUTHORS_DECODING` comes from.
AUTHORS_DECODING_SOURCES = {
    'temperature': "authors' code (--temperature default of rag-random_kshot.py, passed by tools/llama_tools.py)",
    'top_k': f'{_THEIR_CODE}: top_k=50)',
    'top_p': f'{_LIBRARY_DEFAULT}: create_completion(top_p=0.95)',
    'min_p': f'{_LIBRARY_DEFAULT}: create_completion(min_p=0.05)',
    'max_new_tokens': f'{_THEIR_CODE}: max_tokens=300)',
    'repetition_penalty': f'{_LIBRARY_DEFAULT}: create_completion(repeat_penalty=1.1)',
    'repeat_last_n': f'{_LIBRARY_DEFAULT}: Llama(last_n_tokens_size=64), the sampler\'s penalty_last_n',
    'stop': f'{_THEIR_CODE}: stop=["STOP"])',
}

#: The fields of :class:`Decoding`, in order.
FIELDS = tuple(f.name for f in dataclasses.fields(Decoding))
#: The value of each optional field that means "not set".
UNSET = {'top_k': None, 'top_p': None, 'min_p': None, 'repetition_penalty': None, 'repeat_last_n': None}
#: Fields added to :class:`Decoding` after generation caches existed: absent from a key while unset.
ADDED_FIELDS = ('min_p', 'repeat_last_n')


@dataclass(frozen=True)
class LabelSet:
    """The relevance labels that make a document relevant: a minimum (``label >= 2``) or an exact set
    (``label in {2, 3}``).

    Made once from any of its spellings (:meth:`parse`: ``2``, ``{2, 3}``, ``'2'``, ``'2,3'``,
    ``'label>=2'``, ``'label in {2,3}'``); ``str()`` gives the spelling used in tables.

    Example::

        dl = LabelSet.parse('2,3')
        dl.relevant_docnos(qrels)            # qid -> docnos labelled 2 or 3
        dl.answerable(topics, qrels)         # the topics with at least one of them
    """
    minimum: Optional[int] = None
    exact: Optional[FrozenSet[int]] = None

    def __post_init__(self):
        if (self.minimum is None) == (self.exact is None):
            raise SettingError('LabelSet: give a minimum label or an exact set of labels, not both or neither')
        if self.minimum is not None and not is_int(self.minimum):
            raise SettingError(f'LabelSet: the minimum label must be an integer, got {self.minimum!r}')
        if self.exact is not None:
            values = list(self.exact)
            if not values or not all(is_int(v) for v in values):
                raise SettingError(f'LabelSet: a set of labels must hold integers, got {self.exact!r}')
            object.__setattr__(self, 'exact', frozenset(int(v) for v in values))
        else:
            object.__setattr__(self, 'minimum', int(self.minimum))

    @classmethod
    def parse(cls, value: Union['LabelSet', int, str, Iterable[int]]) -> 'LabelSet':
        """A label set from any of its spellings; a :class:`SettingError` says which are accepted."""
        if isinstance(value, LabelSet):
            return value
        if is_int(value):
            return cls(minimum=int(value))
        if isinstance(value, str):
            text = value.strip()
            match = re.fullmatch(r'label\s*>=\s*(-?\d+)', text) or re.fullmatch(r'(-?\d+)', text)
            if match:
                return cls(minimum=int(match.group(1)))
            match = re.fullmatch(r'label in \{(.*)\}', text)
            parts = (match.group(1) if match else text).split(',')
            if all(re.fullmatch(r'\s*-?\d+\s*', p) for p in parts) and (match or len(parts) > 1):
                return cls(exact=frozenset(int(p) for p in parts))
        elif not isinstance(value, (bytes, bool, float)) and value is not None:
            try:
                values = list(value)  # type: ignore[arg-type]  # any iterable a user gives, checked below
            except TypeError:
                values = None
            if values and all(is_int(v) for v in values):
                return cls(exact=frozenset(int(v) for v in values))
        raise SettingError(f'labels must be a minimum label (2, "2", "label>=2") or a non-empty set of labels '
                           f'({{2, 3}}, "2,3", "label in {{2,3}}"), got {value!r}')

    def __str__(self) -> str:
        if self.minimum is not None:
            return f'label>={self.minimum}'
        return 'label in {' + ','.join(str(x) for x in sorted(self.exact or ())) + '}'

    def contains(self, labels: pd.Series) -> pd.Series:
        """Whether each label is relevant."""
        if self.minimum is not None:
            return labels >= self.minimum
        return labels.isin(sorted(self.exact or ()))

    def relevant_docnos(self, qrels: pd.DataFrame) -> Dict[str, List[str]]:
        """qid -> the docnos judged relevant, in qrels order."""
        rel = qrels[self.contains(qrels['label'])]
        return {str(q): list(g['docno'].astype(str)) for q, g in rel.groupby('qid', sort=False)}

    def answerable(self, topics: pd.DataFrame, qrels: pd.DataFrame) -> pd.DataFrame:
        """The topics with at least one relevant document: answer quality is undefined for the others."""
        keep = set(self.relevant_docnos(qrels))
        return topics[topics['qid'].astype(str).isin(keep)].reset_index(drop=True)

    def excluded(self, labels: Iterable[int]) -> List[int]:
        """Those of ``labels`` above every label of this set's that this set leaves out: a set that
        drops a collection's top grade (e.g. ``{2, 3}`` on a collection with label 4)."""
        labels = sorted(set(int(x) for x in labels))
        inside = [x for x in labels if self.contains(pd.Series([x])).iloc[0]]
        if not inside:
            return []
        return [x for x in labels if x > min(inside) and x not in inside]


#: What any function taking labels accepts: a :class:`LabelSet` or one of its spellings.
LabelsLike = Union[LabelSet, int, str, Iterable[int]]


@dataclass(frozen=True)
class Placement:
    """Where a study's readers run: on this machine, or each as a pool of Ray actors
    (:class:`~pyterrier_utility.backends.RayBackend`). On this machine, a reader computed on its CPU
    (the offline and ``huggingface:`` readers) runs as replica threads of one torch thread each
    (:class:`~pyterrier_utility.backends.ThreadBackend`), one per thread torch would use unless
    ``replicas`` says how many (1: in this process); other readers run in this process. It changes
    where answers are computed, not what they are, so it is no part of a study's config;
    ``settings.json`` records it with the engine.

    Args:
        ray: the Ray cluster (:data:`~pyterrier_utility.vocabulary.RAY_ADDRESSES` or
            ``[ray://]HOST:PORT``); ``None``: this machine.
        replicas: copies of each reader, >= 1: Ray actors with ``ray``, else threads of this process;
            ``None``: 1 on Ray, one per thread torch would use for a reader computed on this CPU.
        replica_gpus: GPUs per copy on Ray, >= 0.

    Example::

        pyterrier_utility.commands.run(config, placement=Placement(ray='auto', replicas=2))
    """
    ray: Optional[str] = None
    replicas: Optional[int] = None
    replica_gpus: float = 0

    def __post_init__(self):
        if self.replicas is not None and not (is_int(self.replicas) and self.replicas >= 1):
            raise SettingError(f'Placement: replicas must be an integer >= 1, got {self.replicas!r}')
        if not (_is_number(self.replica_gpus) and self.replica_gpus >= 0):
            raise SettingError(f'Placement: replica_gpus must be a number >= 0, got {self.replica_gpus!r}')
        if self.ray is None and self.replica_gpus != 0:
            raise SettingError('Placement: replica_gpus are those of a Ray cluster: give ray too')
