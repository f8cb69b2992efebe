"""Builds the documentation on its own (``make docs``): the pages are in ``pyterrier_utility/pt_docs/``
(``docs/pt_docs`` links there), laid out so that PyTerrier's documentation can embed them as it does
its extensions'. Nothing here loads a model or reaches the network: autodoc only imports the package."""
import sys
from pathlib import Path

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

autodoc_member_order = 'bysource'
autodoc_typehints = 'description'
napoleon_google_docstring = True
napoleon_numpy_docstring = False
myst_enable_extensions = ['colon_fence']

html_theme = 'alabaster'
html_title = f'pyterrier-utility {release}'
