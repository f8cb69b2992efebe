"""A small collection folder (``--dataset FOLDER``): two queries, each with one relevant document and one
judged not relevant, no gold answers."""
from pathlib import Path

DOCS = {'d1': 'the wing lift is caused by pressure', 'd2': 'heat flows through slabs',
        'd3': 'shock waves form at mach one', 'd4': 'boundary layers thicken downstream'}
TOPICS = {'q1': 'what causes wing lift', 'q2': 'when do shock waves form'}
QRELS = [('q1', 'd1', 2), ('q1', 'd2', 0), ('q2', 'd3', 2), ('q2', 'd4', 0)]


def write_folder(path: Path) -> str:
    """The collection written into ``path`` (docs.tsv, topics.tsv, qrels); its path as a string."""
    path.mkdir()
    (path / 'docs.tsv').write_text(''.join(f'{d}\t{t}\n' for d, t in DOCS.items()))
    (path / 'topics.tsv').write_text(''.join(f'{q}\t{t}\n' for q, t in TOPICS.items()))
    (path / 'qrels').write_text(''.join(f'{q} 0 {d} {label}\n' for q, d, label in QRELS))
    return str(path)
