"""The pieces every page of the report is built of: a number as a cell shows it, a table of escaped
cells, the Markdown tables a study writes (``table1_paper.md``, ``transfer_table.md``) as HTML, and a
PNG as an inline figure."""
import base64
import html
import math
import re
from typing import List, Optional

#: Beside an answer the engine cut at max_new_tokens (report.js marks it the same way).
CUT_MARK = ' <span class="cut" title="generation stopped at max_new_tokens">cut</span>'


def cell_number(value, digits: int = 3) -> str:
    """A number as a table cell shows it: ``digits`` decimals, a dash where it is missing or not finite."""
    return '–' if value is None or not math.isfinite(value) else f'{value:.{digits}f}'


def html_table(header: List[str], rows: List[List[str]], attrs: str = '', row_attrs: Optional[List[str]] = None) -> str:
    """An HTML table of already-escaped cells."""
    head = ''.join(f'<th>{h}</th>' for h in header)
    body = ''.join(f'<tr{row_attrs[i] if row_attrs else ""}>' + ''.join(f'<td>{c}</td>' for c in row) + '</tr>'
                   for i, row in enumerate(rows))
    return f'<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def markdown_html(text: str) -> str:
    """The paragraphs and pipe tables of a Markdown text (as ``table1_paper.md``) as HTML, escaped.

    Args:
        text: Markdown with paragraphs and ``| a | b |`` tables (a ``|---:|`` line after the header).

    Example::

        markdown_html('Mean utility\\n\\n| k | U |\\n|---|---:|\\n| 1 | 0.2 |')
    """
    blocks = []
    for block in re.split(r'\n\s*\n', text.strip()):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if len(lines) >= 2 and all(line.startswith('|') for line in lines) and set(lines[1]) <= set('|-: '):
            cells = [[html.escape(c.strip()) for c in line.strip('|').split('|')] for line in lines]
            align = ['right' if c.strip().endswith(':') else 'left' for c in lines[1].strip('|').split('|')]
            rows = [[f'<span class="{a}">{c}</span>' for a, c in zip(align, row)] for row in cells[2:]]
            blocks.append(html_table(cells[0], rows, ' class="table1"'))
        else:
            blocks.append(f'<p>{html.escape(" ".join(lines))}</p>')
    return '\n'.join(blocks)


def figure_html(name: str, png: bytes) -> str:
    """A PNG as a figure of the page (a data URI: the page needs no other file), captioned ``name``."""
    return (f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{base64.b64encode(png).decode()}">'
            f'<figcaption>{html.escape(name)}</figcaption></figure>')
