"""Answer quality as TREC RAG's nugget recall (the AutoNuggetizer framework: Pradeep et al., "Initial Nugget
Evaluation Results for the TREC 2024 RAG Track with the AutoNuggetizer Framework", arXiv 2411.09607; its
implementation, castorini/nuggetizer).

Three steps, each a judge's reply to one of the track's prompts (nuggetizer's ``creator``, ``scorer`` and
``assigner`` templates, reproduced exactly as facts of the evaluation; each prompt is its system message,
a blank line, then its user message, as one prompt for any backend of the Reader):

1. **Nuggets** are made from a query's relevant documents, highest label first, ten documents per prompt,
   the list updated prompt by prompt (at most :data:`MAX_NUGGETS`); or read from a nugget file in the
   track's JSONL format (:func:`read_nuggets`).
2. **Importance:** each nugget is labelled ``vital`` or ``okay``, ten per prompt (a nugget file's labels
   are kept); vital first, at most :data:`MAX_NUGGETS` are kept.
3. **Assignment:** for each answer, each nugget is labelled ``support``, ``partial_support`` or
   ``not_support``, ten per prompt.

The scores are the track's (nuggetizer's ``calculate_nugget_scores``): over all nuggets or the vital ones,
strict (support counts 1) or with partial credit (partial support counts 0.5). Where nuggetizer falls
back to a default (the last list where a creation reply does not parse, ``okay`` where an importance
reply does not, 0 where a query has no vital nugget), this scorer gives NaN with a warning naming the
queries: a reply that does not parse is a reply not given, never a default label.

Example::

    from pyterrier_utility.scoring.nuggets import NuggetScorer, read_nuggets
    scorer = NuggetScorer(backend, {'1': 'what is lift?'}, nuggets=read_nuggets('nuggets.jsonl')[None])
    scorer.score_with_reference(['1'], ['the upward force on a wing'])[0]   # array([V_strict])
"""
import ast
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import pandas as pd
from pyterrier_rag.backend import Backend

from .._messages import warn_qids
from ..datasets.texts import texts_of
from ..errors import SettingError
from ..qualities import NUGGET_QUALITIES, Quality, ScoringInputs, quality_of
from ..schema import NUGGET_ASSIGNMENT_COLUMNS, NUGGET_COLUMNS
from ..verdict import Verdict

#: A nugget's importance: must be in a good answer, or worthwhile but not essential.
IMPORTANCE = ('vital', 'okay')
#: An answer's support of a nugget (the track's three grades) and the credit each gives.
CREDIT = {'support': 1.0, 'partial_support': 0.5, 'not_support': 0.0}
#: The most nuggets a query keeps (nuggetizer's ``creator_max_nuggets`` and ``scorer_max_nuggets``).
MAX_NUGGETS = 30
#: Relevant documents per creation prompt (nuggetizer's ``creator_window_size``).
DOCUMENT_WINDOW = 10
#: Nuggets per importance or assignment prompt (nuggetizer's ``scorer_window_size``, ``assigner_window_size``).
NUGGET_WINDOW = 10
#: The replies' lengths: a list of at most :data:`MAX_NUGGETS` nuggets of 1 to 12 words, and a list of
#: at most :data:`NUGGET_WINDOW` labels.
CREATOR_TOKENS = 640
LABEL_TOKENS = 96

#: nuggetizer's creator template (``prompts/prompt_templates/creator_template.yaml``).
CREATOR_PROMPT = (
    'You are NuggetizeLLM, an intelligent assistant that can update a list of atomic nuggets to best provide all '
    'the information required for the query.\n\n'
    'Update the list of atomic nuggets of information (1-12 words), if needed, so they best provide the '
    'information required for the query. Leverage only the initial list of nuggets (if exists) and the provided '
    'context (this is an iterative process).  Return only the final list of all nuggets in a Pythonic list format '
    '(even if no updates). Make sure there is no redundant information. Ensure the updated nugget list has at most '
    '{max_nuggets} nuggets (can be less), keeping only the most vital ones. Order them in decreasing order of '
    'importance. Prefer nuggets that provide more interesting information.\n\n'
    'Search Query: {query}\nContext:\n{context}\nSearch Query: {query}\nInitial Nugget List: {nuggets}\n'
    'Initial Nugget List Length: {nuggets_length}\n\n'
    'Only update the list of atomic nuggets (if needed, else return as is). Do not explain. Always answer in short '
    'nuggets (not questions). List in the form ["a", "b", ...] and a and b are strings with no mention of ".\n'
    'Updated Nugget List:')
#: nuggetizer's scorer template (``prompts/prompt_templates/scorer_template.yaml``).
IMPORTANCE_PROMPT = (
    'You are NuggetizeScoreLLM, an intelligent assistant that can label a list of atomic nuggets based on their '
    'importance for a given search query.\n\n'
    'Based on the query, label each of the {num_nuggets} nuggets either a vital or okay based on the following '
    'criteria. Vital nuggets represent concepts that must be present in a "good" answer; on the other hand, okay '
    'nuggets contribute worthwhile information about the target but are not essential. Return the list of labels '
    'in a Pythonic list format (type: List[str]). The list should be in the same order as the input nuggets. Make '
    'sure to provide a label for each nugget.\n\n'
    'Search Query: {query}\nNugget List: {nuggets}\n\n'
    'Only return the list of labels (List[str]). Do not explain.\nLabels:')
#: nuggetizer's assigner template, three grades (``prompts/prompt_templates/assigner_template.yaml``).
ASSIGNMENT_PROMPT = (
    'You are NuggetizeAssignerLLM, an intelligent assistant that can label a list of atomic nuggets based on if '
    'they are captured by a given passage.\n\n'
    'Based on the query and passage, label each of the {num_nuggets} nuggets either as support, partial_support, '
    'or not_support using the following criteria. A nugget that is fully captured in the passage should be labeled '
    'as support. A nugget that is partially captured in the passage should be labeled as partial_support. If the '
    'nugget is not captured at all, label it as not_support. Return the list of labels in a Pythonic list format '
    '(type: List[str]). The list should be in the same order as the input nuggets. Make sure to provide a label for '
    'each nugget.\n\n'
    'Search Query: {query}\nPassage: {context}\nNugget List: {nuggets}\n'
    'Only return the list of labels (List[str]). Do not explain.\nLabels:')


@dataclass(frozen=True)
class Nugget:
    """A nugget: its text and its importance (``'vital'``, ``'okay'``, or ``None`` for the judge to label)."""
    text: str
    importance: Optional[str] = None


#: qid -> its nuggets.
Nuggets = Dict[str, List[Nugget]]


def parse_list(reply: str, allowed: Optional[Sequence[str]] = None, length: Optional[int] = None
               ) -> Optional[List[str]]:
    """The Python list of strings a reply gives (a code fence around it allowed, as nuggetizer strips one);
    with ``allowed``, each lower-cased and one of them; with ``length``, exactly that many. ``None`` for
    anything else: no list, a list of anything but non-empty strings, a label outside ``allowed``, too
    few or too many.

    Example::

        parse_list("['vital', 'Okay']", IMPORTANCE, 2)   # ['vital', 'okay']
        parse_list("['vital']", IMPORTANCE, 2)           # None
    """
    text = reply.replace('```python', '').replace('```', '').strip()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        return None
    items = [x.strip() for x in value]
    if allowed is not None:
        items = [x.lower() for x in items]
        if not set(items) <= set(allowed):
            return None
    return items if length is None or len(items) == length else None


def nugget_scores(importance: Sequence[str], assignment: Sequence[str]) -> Dict[str, float]:
    """The track's four scores of one answer from its nuggets' importance and assignment: ``all`` and
    ``vital`` (support 1, partial support 0.5), ``all_strict`` and ``vital_strict`` (support alone); a
    score over no nugget (no vital one) is NaN.

    Example::

        nugget_scores(['vital', 'okay'], ['partial_support', 'support'])
        # {'all': 0.75, 'all_strict': 0.5, 'vital': 0.5, 'vital_strict': 0.0}
    """
    credit = np.array([CREDIT[a] for a in assignment], dtype=float)
    vital = np.array([i == 'vital' for i in importance], dtype=bool)

    def mean(values: np.ndarray) -> float:
        return float(values.mean()) if len(values) else float('nan')
    return {'all': mean(credit), 'all_strict': mean(credit == 1.0), 'vital': mean(credit[vital]),
            'vital_strict': mean(credit[vital] == 1.0)}


def read_nuggets(path: Union[str, Path]) -> Dict[Optional[str], Nuggets]:
    """A nugget file in TREC RAG's JSONL format: per line ``{"qid": ..., "query": ..., "nuggets": [{"text": ...,
    "importance": "vital" | "okay"}, ...]}`` (nuggetizer's output; an importance left out is labelled by the
    judge). A line may name the label set its nuggets were made from (``"labels"``, as a study's
    ``nuggets.jsonl`` does); returns label set (``None``: every one) -> qid -> nuggets. A faulty line is
    refused, naming the file and the line.

    Example::

        read_nuggets('nuggets.jsonl')[None]['1'][0].text
    """
    path = Path(path)
    if not path.is_file():
        raise SettingError(f'the nugget file {path} does not exist')
    found: Dict[Optional[str], Nuggets] = {}
    for number, line in enumerate(path.read_text(encoding='utf-8').splitlines(), 1):
        if not line.strip():
            continue

        def refuse(why: str):
            raise SettingError(f'{path}, line {number}: {why}')
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            refuse(f'not JSON ({e.msg})')
        if not isinstance(record, dict) or 'qid' not in record or not isinstance(record.get('nuggets'), list):
            refuse('a line is an object with a "qid" and a list of "nuggets"')
        labels = record.get('labels')
        qid = str(record['qid'])
        nuggets = []
        for item in record['nuggets']:
            if not isinstance(item, dict) or not isinstance(item.get('text'), str) or not item['text'].strip():
                refuse(f'qid {qid}: each nugget is an object with a non-empty "text"')
            importance = item.get('importance')
            if importance is not None and str(importance).lower() not in IMPORTANCE:
                refuse(f'qid {qid}: importance {importance!r} is not one of {list(IMPORTANCE)}')
            nuggets.append(Nugget(item['text'].strip(), None if importance is None else str(importance).lower()))
        per_query = found.setdefault(None if labels is None else str(labels), {})
        if qid in per_query:
            refuse(f'qid {qid} has nuggets on an earlier line' + (f' for labels {labels}' if labels else ''))
        per_query[qid] = nuggets
    return found


def write_nuggets(nuggets: pd.DataFrame, queries: Optional[pd.DataFrame], path: Union[str, Path]) -> None:
    """Writes a study's ``nuggets`` frame (``labels``, ``qid``, ``nugget``, ``text``, ``importance``;
    ``dataset`` first where it has one) as TREC RAG's JSONL, a line per (dataset,) label set and query, its
    text from ``queries`` (``qid``, ``query``, (``dataset``)), which :func:`read_nuggets` (``--nuggets``)
    reads back."""
    keys = [c for c in ('dataset', 'labels') if c in nuggets.columns] + ['qid']
    by = [c for c in ('dataset',) if c in nuggets.columns] + ['qid']
    texts = {} if queries is None else {tuple(str(x) for x in key): text for *key, text in
                                        queries[by + ['query']].itertuples(index=False, name=None)}
    with open(path, 'w', encoding='utf-8') as f:
        for key, group in nuggets.groupby(keys, sort=False):
            record = dict(zip(keys, key))
            record['query'] = texts.get(tuple(str(record[c]) for c in by), '')
            record['nuggets'] = [dict(text=t, importance=i) for t, i in zip(group['text'], group['importance'])]
            f.write(json.dumps(record, ensure_ascii=False) + '\n')


class NuggetScorer:
    """P(a): one of TREC RAG's nugget scores of each answer (:data:`~pyterrier_utility.qualities.NUGGET_QUALITIES`),
    its nuggets made from the query's relevant documents by ``backend`` or given, labelled and assigned by
    ``backend`` (the module's three prompts); an :class:`~pyterrier_utility.protocols.AnswerScorer`. Every
    reply is asked greedily through the generation cache
    (:class:`~pyterrier_utility.verdict.Verdict`): scoring again generates nothing. A query whose nuggets
    cannot be made or labelled (a reply that gives no list of the asked form), an answer whose assignment
    does not parse and a score over no nugget are NaN, with a warning naming the queries.

    Args:
        backend: the judge: any backend of the Reader.
        queries: qid -> the query's text.
        documents: qid -> the texts the nuggets are made from (highest label first), where they are made.
        nuggets: qid -> the nuggets given (for these queries none are made).
        source: where the nuggets given come from, in messages (a nugget file: no nuggets are made, and
            the queries it has none for are NaN).
        quality: the score it computes (a name of :data:`~pyterrier_utility.qualities.NUGGET_QUALITIES`).
        labels: the label set the documents are relevant under, recorded in :meth:`frames`.

    Example::

        scorer = NuggetScorer(pyterrier_utility.backends.gemma3_270m(), {'1': 'what is lift?'},
                              {'1': ['Lift is the upward force on a wing.']})
        scorer.score_with_reference(['1'], ['the upward force on a wing'])[0]
        nuggets, assignments = scorer.frames()
    """

    def __init__(self, backend: Backend, queries: Mapping[str, str],
                 documents: Optional[Mapping[str, Sequence[str]]] = None, *, nuggets: Optional[Nuggets] = None,
                 quality: str = 'nuggets-vital-strict', labels: Optional[str] = None, source: Optional[str] = None):
        if quality not in NUGGET_QUALITIES:
            raise SettingError(f'NuggetScorer: quality must be one of {list(NUGGET_QUALITIES)}, got {quality!r}')
        self.creator = Verdict(backend, CREATOR_PROMPT, parse_list, max_new_tokens=CREATOR_TOKENS, greedy=True,
                               owner='NuggetScorer')
        self.labeller = Verdict(backend, IMPORTANCE_PROMPT, str, max_new_tokens=LABEL_TOKENS, greedy=True,
                                owner='NuggetScorer')
        self.assigner = Verdict(backend, ASSIGNMENT_PROMPT, str, max_new_tokens=LABEL_TOKENS, greedy=True,
                                owner='NuggetScorer')
        self.queries = {str(q): str(t) for q, t in queries.items()}
        self.documents = {str(q): [str(t) for t in texts] for q, texts in (documents or {}).items() if len(texts)}
        self.given = {str(q): list(n) for q, n in (nuggets or {}).items()}
        self.quality, self.labels, self.source = quality, labels, source
        self._nuggets: Dict[str, Optional[List[Nugget]]] = {}
        self._assigned: Dict[Tuple[str, str], Optional[List[str]]] = {}

    @classmethod
    def for_quality(cls, quality: Quality, inputs: ScoringInputs) -> 'NuggetScorer':
        """The scorer of ``quality`` from a study's inputs: its judge, the dataset's queries, and the nuggets
        of ``inputs.nuggets`` (a nugget file: those of the label set where it names one) or, without one,
        the texts of the relevant documents of ``inputs.labels``, highest label first, to make them from."""
        topics = inputs.dataset.get_topics()
        queries = dict(zip(topics['qid'].astype(str), topics['query'].astype(str)))
        name = str(inputs.labels)
        given: Optional[Nuggets] = None
        if inputs.nuggets is not None:
            read = read_nuggets(inputs.nuggets)
            given = read.get(name, read.get(None))
            if given is None:
                raise SettingError(f'the nugget file {inputs.nuggets} has nuggets for labels {sorted(map(str, read))}, '
                                   f'none for labels {name}')
            return cls(inputs.judge, queries, nuggets=given, quality=quality.name, labels=name,
                       source=f'the nugget file {inputs.nuggets}')
        qrels = inputs.qrels[inputs.labels.contains(inputs.qrels['label'])]
        qrels = qrels.assign(docno=qrels['docno'].astype(str), qid=qrels['qid'].astype(str))
        ranked = qrels.sort_values('label', ascending=False, kind='stable')
        texts = texts_of(inputs.dataset.texts, list(ranked['docno']))
        documents = {q: [t for t in (texts.get(d) for d in g['docno']) if isinstance(t, str) and t.strip()]
                     for q, g in ranked.groupby('qid', sort=False)}
        return cls(inputs.judge, queries, documents, nuggets=given, quality=quality.name, labels=name)

    @property
    def measure(self) -> str:
        """The name of what it scores, in messages."""
        return NUGGET_QUALITIES[self.quality][0]

    @property
    def references(self) -> str:
        """What answers are scored against, in messages."""
        return 'nuggets'

    def nuggets_of(self, qids: Sequence[str]) -> Dict[str, Optional[List[Nugget]]]:
        """qid -> its nuggets, labelled (made and labelled once per query; ``None`` where they cannot be)."""
        todo = [q for q in dict.fromkeys(str(q) for q in qids) if q not in self._nuggets]
        made = self._made([q for q in todo if q not in self.given and q in self.documents])
        for q in todo:
            self._nuggets[q] = list(self.given[q]) if q in self.given else made.get(q)
        self._label([q for q in todo if self._nuggets[q]])
        return {q: self._nuggets[str(q)] for q in qids}

    def _made(self, qids: List[str]) -> Dict[str, Optional[List[Nugget]]]:
        """Nuggets made window by window of each query's documents, every query's window asked together."""
        lists: Dict[str, Optional[List[str]]] = {q: [] for q in qids}
        start = 0
        while True:
            asked = [q for q in qids if lists[q] is not None and start < len(self.documents[q])]
            if not asked:
                break
            items = []
            for q in asked:
                window = self.documents[q][start:start + DOCUMENT_WINDOW]
                current = lists[q] or []
                items.append(dict(query=self.queries.get(q, ''), max_nuggets=MAX_NUGGETS, nuggets=current,
                                  nuggets_length=len(current),
                                  context='\n'.join(f'[{i + 1}] {t}' for i, t in enumerate(window))))
            for q, reply in zip(asked, self.creator.ask(items)):
                lists[q] = None if reply is None else reply[:MAX_NUGGETS]
            start += DOCUMENT_WINDOW
        failed = {q for q, n in lists.items() if n is None}
        warn_qids(f'the judge gave no list of nuggets: {self.measure} is NaN', failed)
        return {q: None if n is None else [Nugget(t) for t in n] for q, n in lists.items()}

    def _label(self, qids: List[str]) -> None:
        """Each nugget without an importance labelled, every query's windows asked together; vital first, at
        most :data:`MAX_NUGGETS` kept."""
        windows = []
        for q in qids:
            nuggets = self._nuggets[q] or []
            open_ = [i for i, n in enumerate(nuggets) if n.importance is None]
            windows += [(q, open_[s:s + NUGGET_WINDOW]) for s in range(0, len(open_), NUGGET_WINDOW)]
        replies = self.labeller.ask([dict(query=self.queries.get(q, ''), num_nuggets=len(w),
                                          nuggets=[(self._nuggets[q] or [])[i].text for i in w]) for q, w in windows])
        failed = set()
        for (q, window), reply in zip(windows, replies):
            labels = parse_list(reply, IMPORTANCE, len(window))
            labelled = self._nuggets[q]
            if labels is None or labelled is None:
                failed.add(q)
                continue
            for i, label in zip(window, labels):
                labelled[i] = Nugget(labelled[i].text, label)
        for q in failed:
            self._nuggets[q] = None
        warn_qids(f'the judge did not label each nugget vital or okay: {self.measure} is NaN', failed)
        for q in qids:
            kept = self._nuggets[q]
            if kept is not None:
                self._nuggets[q] = sorted(kept, key=lambda n: n.importance != 'vital')[:MAX_NUGGETS]

    def _assign(self, pairs: List[Tuple[str, str]]) -> None:
        """Each (qid, answer)'s support of each of its query's nuggets, every window asked together."""
        windows = []
        for q, a in pairs:
            nuggets = self._nuggets[q] or []
            windows += [((q, a), nuggets[s:s + NUGGET_WINDOW]) for s in range(0, len(nuggets), NUGGET_WINDOW)]
        replies = self.assigner.ask([dict(query=self.queries.get(q, ''), context=a, num_nuggets=len(w),
                                          nuggets=[n.text for n in w]) for (q, a), w in windows])
        found: Dict[Tuple[str, str], Optional[List[str]]] = {pair: [] for pair in pairs}
        for (pair, window), reply in zip(windows, replies):
            labels = parse_list(reply, tuple(CREDIT), len(window))
            done = found[pair]
            found[pair] = None if labels is None or done is None else done + labels
        self._assigned.update(found)

    def score_with_reference(self, qids: Sequence, answers: Sequence[str]) -> Tuple[np.ndarray, List[Optional[str]]]:
        """Each (qid, answer)'s nugget score, and ``None`` for each as its reference document."""
        qids = [str(q) for q in qids]
        answers = ['' if a is None or (isinstance(a, float) and np.isnan(a)) else str(a) for a in answers]
        nuggets = self.nuggets_of(qids)
        why = f'{self.source} has none for it' if self.source else 'no relevant documents to make nuggets from'
        missing = {q for q in qids if q not in self.given and q not in self.documents}
        warn_qids(f'{self.measure} is NaN ({why})', missing)
        warn_qids(f'{self.measure} is NaN (no nuggets)', {q for q in qids if nuggets[q] == []})
        pairs = [p for p in dict.fromkeys(zip(qids, answers)) if nuggets[p[0]] and p not in self._assigned]
        self._assign(pairs)
        key = NUGGET_QUALITIES[self.quality][1]
        scores, unassigned, no_vital = [], set(), set()
        for q, a in zip(qids, answers):
            assigned = self._assigned.get((q, a)) if nuggets[q] else None
            if nuggets[q] and assigned is None:
                unassigned.add(q)
            value = (nugget_scores([n.importance or '' for n in nuggets[q] or []], assigned)[key]
                     if assigned is not None else float('nan'))
            if assigned is not None and np.isnan(value):
                no_vital.add(q)
            scores.append(value)
        warn_qids(f'the judge gave no support label to each nugget of an answer: {self.measure} is NaN', unassigned)
        warn_qids(f'{self.measure} is NaN (no vital nugget)', no_vital)
        return np.array(scores, dtype=float), [None] * len(qids)

    def frames(self) -> Tuple[pd.DataFrame, pd.DataFrame]:
        """What it found: the nuggets (``labels``, ``qid``, ``nugget`` (1 = the first), ``text``,
        ``importance``) and the assignments (``labels``, ``qid``, ``qanswer``, ``nugget``, ``assignment``)."""
        nuggets = pd.DataFrame([dict(labels=self.labels, qid=q, nugget=i, text=n.text, importance=n.importance)
                                for q, found in self._nuggets.items() for i, n in enumerate(found or [], 1)],
                               columns=list(NUGGET_COLUMNS))
        assignments = pd.DataFrame([dict(labels=self.labels, qid=q, qanswer=a, nugget=i, assignment=label)
                                    for (q, a), found in self._assigned.items()
                                    for i, label in enumerate(found or [], 1)],
                                   columns=list(NUGGET_ASSIGNMENT_COLUMNS))
        return nuggets, assignments


for _name in NUGGET_QUALITIES:
    quality_of(_name).register(NuggetScorer)
