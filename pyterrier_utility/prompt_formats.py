"""Prompt formats: the k-shot and 0-shot templates, the layout of one context and how an answer is
read back, as one named value (:data:`PROMPT_FORMATS`).

Every answer, so every P and U, depends on the exact prompt string; the formats keep the layouts
apart by name, with their source:

- ``'plain'``: this project's layout: Figure 2's words (Tian et al., ECIR 2025), unquoted, one
  part per line, "Answer:" on the line of "Now start your answer." (Figure 2 sets it on a line of
  its own).
- ``'authors'``: the layout the authors' code builds (github.com/DanielTian97/rag-utility,
  ``tools/prompt_tools.py``: ``compose_context``, ``prompt_assembler``, ``prompt_assembler_0``
  with ``long_answer=True``): texts and query in double quotes, ``;`` after each context, a space
  before the first newline, "Answer: " on its own line.
- ``'authors-short'``: the same file's ``long_answer=False`` prompts (their NQ runs): an answer
  "within 5 words" between ``<answer>`` and ``</answer>``, the prompt ending in ``<answer>``,
  generation stopped at ``</answer>`` (``tools/llama_tools.py``).
- ``'example'``: ``'plain'`` with one worked example before the question, for base models (the
  offline readers), which continue a document rather than follow an instruction: the instruction
  once, then a made-up example in the same layout (:data:`EXAMPLE`: a context or two, a question
  and a short answer ending in STOP), a blank line, and the query's own part. The example's text is
  fixed text of the format (part of every prompt, so of every cache key), never scored, and written
  for this format: its topic (honeybees) lies outside the collections the study is run on. Its stops
  are a base model's (:data:`~pyterrier_utility.settings.BASE_MODEL_STOP`): after its answer the
  model goes on with the next example's ``Context`` or ``Question:`` line, where the answer ends.
"""
from dataclasses import dataclass
from typing import Dict, Optional, Sequence, Tuple, Union

from .errors import SettingError
from .settings import BASE_MODEL_STOP, STOP

__all__ = ['EXAMPLE', 'PROMPT_FORMATS', 'PromptFormat', 'prompt_format']


@dataclass(frozen=True)
class PromptFormat:
    """How a query and its context texts become a prompt, and an answer is read back.

    Args:
        name: the format's name.
        kshot: the k-shot template, with ``{contexts}`` (the context lines joined by newlines) and
            ``{query}``.
        zero_shot: the 0-shot template, with ``{query}``.
        context: one context, with ``{i}`` (1-based) and ``{text}``.
        stop: the stop sequences the format's text asks for (``None``: it asks for none): a reader
            with this format always stops at them.
        backend_stops: whether the backend's own stop sequences apply as well (a base model's
            ``'\\nQuestion:'``, see :data:`~pyterrier_utility.settings.BASE_MODEL_STOP`); ``False``:
            the format's alone, as the authors' short answers stop at ``</answer>`` only.
        answer_tags: ``(open, close)``: the answer is the text between them (the prompt may end
            with ``open``; the text after ``close`` is dropped).

    Example::

        fmt = PROMPT_FORMATS['authors']
        fmt.build('what is a sigmet', ['A warning.', 'Weather advisory.'])
    """
    name: str
    kshot: str
    zero_shot: str
    context: str
    stop: Optional[Tuple[str, ...]] = None
    backend_stops: bool = True
    answer_tags: Optional[Tuple[str, str]] = None

    def __post_init__(self):
        for field, template, needs in (('kshot', self.kshot, ('{contexts}', '{query}')),
                                       ('zero_shot', self.zero_shot, ('{query}',)),
                                       ('context', self.context, ('{text}',))):
            if not isinstance(template, str) or not all(n in template for n in needs):
                raise SettingError(f'PromptFormat {self.name!r}: {field} must be a string with '
                                   f'{", ".join(needs)}, got {template!r}')
        if self.stop is not None:
            object.__setattr__(self, 'stop', tuple(self.stop))

    def build(self, query: str, texts: Sequence[str] = ()) -> str:
        """The prompt for a query and its context texts (none: the 0-shot prompt). Texts are inserted
        as data: braces inside them are kept verbatim."""
        if not len(texts):
            return self.zero_shot.format(query=query)
        contexts = '\n'.join(self.context.format(i=i, text=t) for i, t in enumerate(texts, 1))
        return self.kshot.format(contexts=contexts, query=query)

    def stops(self, backend_stops: Sequence[str]) -> Tuple[str, ...]:
        """The stop sequences a generation with this format uses: the format's own first (what its text
        asks for), then the backend's where the format takes them, each once."""
        return tuple(dict.fromkeys((*(self.stop or ()), *(backend_stops if self.backend_stops else ()))))

    def extract(self, answer: str) -> str:
        """The answer in a generation: between the answer tags where the format has them."""
        if self.answer_tags is None:
            return answer
        opening, closing = self.answer_tags
        answer = answer.split(closing, 1)[0]
        return answer.split(opening, 1)[-1].strip()


# The stop sequence these prompts ask for, which their formats own (the authors' stop=["STOP"]).
_END = f'End your answer with {STOP[0]}.'
_KSHOT = ('You are an expert at answering questions based on your own knowledge and related context. '
          f'Please answer this question based on the given context. {_END}')
_ZEROSHOT = f'You are an expert at answering questions based on your own knowledge. Please answer this question. {_END}'
_KSHOT_SHORT = ('You are an expert at answering questions based on your own knowledge and related context. '
                'Please answer this question based on the given context within 5 words. You should put your '
                'answer inside <answer> and </answer>. ')
_ZEROSHOT_SHORT = ('You are an expert at answering questions based on your own knowledge. Please answer this '
                   'question within 5 words. You should put your answer inside <answer> and </answer>. ')

#: The worked example of the ``'example'`` format: made up for it (a well-known fact, plainly worded),
#: outside the study's collections; its answer uses the first context, not the second.
EXAMPLE = {
    'contexts': ('A honeybee that has found food returns to the hive and performs a waggle dance. The angle '
                 'of the dance from the vertical shows the direction of the food relative to the sun, and '
                 'the length of the waggle run shows how far away it is.',
                 'Honey is made from nectar, which worker bees store in wax cells until enough water has '
                 'evaporated from it.'),
    'query': 'how do honeybees tell each other where food is',
    'answer': 'A bee that has found food performs a waggle dance in the hive: its angle gives the direction '
              'of the food relative to the sun and the length of its waggle run gives the distance.',
}
_PLAIN_KSHOT = '{contexts}\nQuestion: {query}\nNow start your answer. Answer:'
_PLAIN_ZEROSHOT = 'Question: {query}\nNow start your answer. Answer:'


def _worked(instruction: str, part: str, contexts: str) -> str:
    """An ``'example'`` template: the instruction, the worked example laid out as ``part`` (its
    contexts ``contexts``), its answer and STOP, a blank line, then ``part`` for the query."""
    example = part.format(contexts=contexts, query=EXAMPLE['query'])
    return f'{instruction}\n\n{example} {EXAMPLE["answer"]} {STOP[0]}\n\n{part}'


_EXAMPLE_CONTEXTS = '\n'.join(f'Context {i}: {t}' for i, t in enumerate(EXAMPLE['contexts'], 1))

#: The formats by name; see the module's docstring for the source of each.
PROMPT_FORMATS: Dict[str, PromptFormat] = {f.name: f for f in (
    PromptFormat('plain', _KSHOT + '\n' + _PLAIN_KSHOT, _ZEROSHOT + '\n' + _PLAIN_ZEROSHOT, 'Context {i}: {text}',
                 stop=STOP),
    PromptFormat('authors', _KSHOT + ' \n{contexts}\nQuestion: "{query}"\nNow start your answer. \nAnswer: ',
                 _ZEROSHOT + ' \nQuestion: "{query}"\nNow start your answer. \nAnswer: ', 'Context {i}: "{text}";',
                 stop=STOP),
    PromptFormat('authors-short',
                 _KSHOT_SHORT + ' \n{contexts}\nQuestion: "{query}"\nNow start your answer. \nAnswer: <answer>',
                 _ZEROSHOT_SHORT + ' \nQuestion: "{query}"\nNow start your answer. \nAnswer: <answer>',
                 'Context {i}: "{text}";', stop=('</answer>',), backend_stops=False,
                 answer_tags=('<answer>', '</answer>')),
    PromptFormat('example', _worked(_KSHOT, _PLAIN_KSHOT, _EXAMPLE_CONTEXTS),
                 _worked(_ZEROSHOT, _PLAIN_ZEROSHOT, ''), 'Context {i}: {text}', stop=BASE_MODEL_STOP),
)}


def prompt_format(value: Union[str, PromptFormat]) -> PromptFormat:
    """A :class:`PromptFormat` from itself or its name in :data:`PROMPT_FORMATS`."""
    if isinstance(value, PromptFormat):
        return value
    if value not in PROMPT_FORMATS:
        raise SettingError(f'prompt format must be one of {sorted(PROMPT_FORMATS)} or a PromptFormat, got {value!r}')
    return PROMPT_FORMATS[value]
