"""Builds the documentation on its own (``make docs``): the pages are in ``pyterrier_utility/pt_docs/``
(``docs/pt_docs`` links there), laid out so that PyTerrier's documentation can embed them as it does
its extensions'. Nothing here loads a model or reaches the network: autodoc only imports the package,
and maths is written into the pages as MathML, which browsers draw without a script or a font download."""
import inspect
import sys
from pathlib import Path

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.inspect import stringify_signature

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyterrier_utility import __version__  # noqa: E402

project = 'pyterrier-utility'
author = 'the pyterrier_utility authors'
copyright = f'2026, {author}'
release = __version__

extensions = ['sphinx.ext.autodoc', 'sphinx.ext.napoleon', 'myst_parser', 'sphinxarg.ext']
source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}
root_doc = 'index'
exclude_patterns = ['_build']
# Options such as --base-url are copied from the pages into a terminal: no en dashes, no curly quotes.
smartquotes = False

autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# dollarmath: $U = (P_k - P_0) / P_0$ in the Markdown pages; no linkify, so BM25@1+STEP stays text.
myst_enable_extensions = ['colon_fence', 'dollarmath']

# PyTerrier's own documentation uses the Read the Docs theme.
html_theme = 'sphinx_rtd_theme'
html_title = f'pyterrier-utility {release}'
html_static_path = ['_static']
html_css_files = ['custom.css']
html_math_renderer = 'mathml'


def class_signature(app, what, name, obj, options, signature, return_annotation):
    """A transformer's signature as its ``__init__`` declares it: autodoc reads ``pt.Transformer.__new__``
    (``*args, **kwargs``) first, Python's :func:`inspect.signature` the constructor a user calls."""
    if what != 'class' or signature not in ('(*args, **kwargs)', None):
        return None
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    return stringify_signature(sig, show_annotation=False, show_return_annotation=False), return_annotation


class NoMailto(SphinxPostTransform):
    """Text such as ``BM25@1+STEP`` in an option's help stays text: docutils reads it as an e-mail address."""
    default_priority = 100

    def run(self, **kwargs):
        for node in list(self.document.findall(nodes.reference)):
            if node.get('refuri', '').startswith('mailto:'):
                node.replace_self(nodes.Text(node.astext()))


def mathml(latex: str, display: str) -> str:
    return convert(latex, display=display)


def visit_inline_math(self, node):
    self.body.append(f'<span class="math">{mathml(node.astext(), "inline")}</span>')
    raise nodes.SkipNode


def visit_block_math(self, node):
    self.body.append(f'<div class="math">{mathml(node.astext(), "block")}</div>')
    raise nodes.SkipNode


def setup(app):
    app.connect('autodoc-process-signature', class_signature)
    app.add_post_transform(NoMailto)
    app.add_html_math_renderer('mathml', (visit_inline_math, None), (visit_block_math, None))
