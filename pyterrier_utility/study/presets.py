"""Named configurations: the paper's study (:data:`PAPER`, ``--preset paper``) with where its decoding
comes from, and the defaults of the commands other than ``study`` (``experiment``, ``attribute``,
``report``)."""
from typing import Dict

from ..settings import AUTHORS_DECODING, AUTHORS_DECODING_SOURCES, LabelSet
from .config import StudyConfig

#: The paper's study. From the paper's text (Tian, Ganguly & Macdonald, ECIR 2025): TREC DL'19 and
#: DL'20 judged queries and MS MARCO dev_small over MS MARCO passages, BM25 (PyTerrier's Terrier
#: BM25) and MonoT5 over BM25's top 100, both reversed, Rel and NRel oracles (none on dev_small,
#: whose binary labels :meth:`StudyConfig.for_collection` studies as the paper does), k = 2, 5, 10,
#: 15 (Table 1; Figures 3 and 5 over every k from 1 to 15, the paper's "wider range"),
#: Llama-3-8B-Instruct, 5 samples, BERTScore with bert-large-uncased, relevance labels {2, 3}
#: and {3} (dev_small: {1}). From the authors'
#: code (github.com/DanielTian97/rag-utility): the decoding their engine applied
#: (:data:`~pyterrier_utility.settings.AUTHORS_DECODING`: their settings and llama-cpp-python's
#: defaults), their prompt layout (``tools/prompt_tools.py``: prompt format 'authors') and their
#: oracle (``res/oracle_dl_19.csv``: every judged document by label, highest first: oracle 'authors').
#: This project's choices: Rel draws from labels 2 and up; every query is used.
PAPER = StudyConfig(
    datasets=('irds:msmarco-passage/trec-dl-2019/judged', 'irds:msmarco-passage/trec-dl-2020/judged',
              'irds:msmarco-passage/dev/small'),
    queries=0, ks=(2, 5, 10, 15), label_sets=(LabelSet(exact=frozenset({2, 3})), LabelSet(exact=frozenset({3}))),
    rel_labels=LabelSet(minimum=2), neural='monot5', bm25='terrier', prompt_format='authors', oracle='authors',
    readers=('vllm:meta-llama/Meta-Llama-3-8B-Instruct',), decoding=AUTHORS_DECODING, samples=5,
    scorer='bert-large-uncased', out='results/paper', preset='paper', figure_ks=tuple(range(1, 16)))
#: Named configurations (``--preset``).
PRESETS: Dict[str, StudyConfig] = {'paper': PAPER}
#: Where a preset's decoding values come from, printed with them.
DECODING_SOURCES: Dict[str, Dict[str, str]] = {'paper': AUTHORS_DECODING_SOURCES}
#: The defaults of the one-k ``experiment`` command.
EXPERIMENT = StudyConfig(queries=6, ks=(3,), label_sets=(LabelSet(minimum=2),), samples=1,
                         decoding=StudyConfig.decoding.replace(max_new_tokens=40), out='results/experiment')
#: The defaults of the ``attribute`` command: the study's decoding and label sets (so a study with the same
#: options shares its answers), few queries, one k and two systems (2^k coalitions per context).
ATTRIBUTE = StudyConfig(queries=2, ks=(4,), systems=('BM25', 'Rel'), samples=2, out='results/attribution')
#: The defaults of the ``report`` command: the study's tables and figures, written to their own folder.
REPORT = StudyConfig(out='results/report')
