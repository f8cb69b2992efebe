"""The notebook is committed executed: every code cell ran, none failed, the figures are drawn, and its
two routes to the same numbers (Table 1 from ``run_study``, and ``pt.Experiment`` over the same
systems, reader and scorer) agree."""
import io
import re
from pathlib import Path

import nbformat
import pandas as pd
import pytest

NOTEBOOK = Path(__file__).parent.parent / 'notebooks' / 'utility_study.ipynb'


def code_cells():
    return [c for c in nbformat.read(NOTEBOOK, as_version=4).cells if c.cell_type == 'code']


def table1(markdown: str, labels: str) -> pd.DataFrame:
    """The Table 1 block of a label set as printed, indexed by k (significance marks dropped)."""
    block = markdown.split(f'**{labels}**')[1].split('\n\n')[1]
    header, _, *rows = [[c.strip() for c in line.strip('|').split('|')] for line in block.strip().splitlines()]
    return pd.DataFrame([[float(re.sub(r'[^0-9.+-]', '', c)) for c in row[1:]] for row in rows],
                        columns=header[1:], index=[int(row[0]) for row in rows])


def test_notebook_is_executed_without_errors_and_has_its_figures():
    code = code_cells()
    assert code and all(c.execution_count is not None for c in code)
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))  # in order, from a fresh kernel
    outputs = [o for c in code for o in c.outputs]
    assert not [o for o in outputs if o.output_type == 'error']
    images = [o for o in outputs if 'image/png' in o.get('data', {})]
    assert len(images) == 3  # Figures 3, 4 and 5


def test_table1_and_pt_experiment_report_the_same_utility():
    code = code_cells()
    markdown = ''.join(o.get('data', {}).get('text/markdown', '') for c in code for o in c.outputs)
    cell = next(c for c in code if 'pt.Experiment(pipelines' in c.source)
    result = next(o for o in cell.outputs if o.output_type == 'execute_result')
    experiment = pd.read_html(io.StringIO(result['data']['text/html']), index_col=0)[0].set_index('name')
    k = int(next(c for c in experiment.columns if c.startswith('nDCG@')).split('@')[1])
    table = table1(markdown, 'label>=2')  # the notebook's FBertScorer counts labels >= 2 relevant
    # The same systems (the reversed ones beside theirs), the same 0-shot FBERT at every k, the same
    # mean utility at the experiment's k; both printed to three decimals.
    assert list(table.columns) == ['0-shot FBERT', *experiment.index]
    assert table['0-shot FBERT'].tolist() == pytest.approx([experiment['FBERT0'].iloc[0]] * len(table), abs=1.5e-3)
    assert table.loc[k, list(experiment.index)].tolist() == pytest.approx(experiment['Utility'].tolist(), abs=1.5e-3)
