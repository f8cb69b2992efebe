"""The notebook is committed executed: every code cell ran, none failed, the figures are drawn."""
from pathlib import Path

import nbformat

NOTEBOOK = Path(__file__).parent.parent / 'notebooks' / 'utility_study.ipynb'


def test_notebook_is_executed_without_errors_and_has_its_figures():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == 'code']
    assert code and all(c.execution_count is not None for c in code)
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))  # in order, from a fresh kernel
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == 'error']
    images = [o for o in outputs if 'image/png' in o.get('data', {})]
    assert len(images) == 3  # Figures 3, 4 and 5
    text = ''.join(o.get('data', {}).get('text/markdown', '') for o in outputs)
    assert '| k | 0-shot FBERT | BM25 | BM25-r | Neural | Neural-r | Rel | NRel |' in text
