"""The documentation site and the report's verdict, read in headless Chromium as a user reads them:
options that can be copied into a terminal, the real signatures of the transformers, no page that
speaks of how it was written, and a report whose first words say whether its positive control held."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from pyterrier_utility.report.html import write_report

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    """The site as `make docs` builds it (warnings as errors), into a folder of its own."""
    out = tmp_path_factory.mktemp('site')
    subprocess.run([sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b', 'html', str(ROOT / 'docs'),
                    str(out)], cwd=ROOT, check=True)
    return out


def text_of(browser, page: Path) -> str:
    browser.load(page)
    return browser.evaluate('document.body.innerText')


@pytest.mark.slow
def test_the_command_page_keeps_its_double_dashes(site, browser):
    browser.load(site / 'pt_docs' / 'cli.html')
    names = browser.evaluate('[...document.querySelectorAll("kbd")].map(k => k.textContent)')
    options = [n for n in names if n.startswith(('-', '–'))]
    assert {'--preset', '--dataset', '--base-url', '--budget', '--repetition-penalty', '-k'} <= set(options)
    assert [n for n in options if not re.fullmatch(r'--?[a-z][a-z0-9-]*', n)] == []
    text = browser.evaluate('document.body.innerText')
    assert re.findall(r'–[a-z]\S*', text) == []  # an en dash before a word was a -- turned typographic
    assert 'BM25@1+STEP' in text and 'mailto:' not in browser.evaluate('document.body.innerHTML')
    assert browser.errors == []


@pytest.mark.slow
def test_the_api_reference_shows_the_readers_real_parameters(site, browser):
    browser.load(site / 'pt_docs' / 'reference.html')
    signature = browser.evaluate('document.getElementById("pyterrier_utility.Reader").innerText')
    assert 'pyterrier_utility.Reader(backend, *, n_samples=1, seed=0' in signature
    assert 'prompt_format' in signature and '*args' not in signature
    signatures = browser.evaluate('[...document.querySelectorAll("dl.class > dt")].map(d => d.innerText)')
    assert len(signatures) > 20 and [s for s in signatures if '(*args, **kwargs)' in s] == []


@pytest.mark.slow
def test_no_page_speaks_of_how_it_was_written_or_of_a_machines_paths(site, browser):
    pages = sorted(p for p in site.rglob('*.html') if '_static' not in p.parts)
    assert len(pages) > 15
    found = {}
    for page in pages:
        text = text_of(browser, page)
        hits = re.findall(r'\bsessions?\b|(?<![\w.~])/(?:work|root|home|tmp)/\S*', text, flags=re.I)
        if hits:
            found[str(page.relative_to(site))] = hits
    assert found == {}


def per_query(rel_minus_nrel) -> pd.DataFrame:
    """Rel and NRel over 8 queries at k = 1, 3 and 5: NRel's U drawn at random, Rel's that plus the
    difference given for each k and a little noise, so the paired tests have a variance."""
    rng = np.random.default_rng(0)
    rows = []
    for k, difference in zip((1, 3, 5), rel_minus_nrel):
        nrel = rng.uniform(-0.2, 0.2, 8)
        for system, utility in (('NRel', nrel), ('Rel', nrel + difference + rng.normal(0, 0.02, 8))):
            for q, u in enumerate(utility):
                rows.append(('label>=2', system, k, f'q{q}', k, 0.5, 0.5, 0.5 * (1 + u), u))
    return pd.DataFrame(rows, columns=['labels', 'system', 'k', 'qid', 'n_docs', 'ndcg', 'quality_0shot', 'quality',
                                       'utility'])


@pytest.mark.parametrize('differences, held', [((0.3, 0.2, 0.1), True), ((0.3, -0.15, 0.1), False)])
def test_the_report_opens_on_whether_its_positive_control_held(tmp_path, browser, differences, held):
    frame = per_query(differences)
    folder = tmp_path / 'study'
    folder.mkdir()
    frame.to_csv(folder / 'per_query.csv', index=False)
    browser.load(write_report(folder))
    verdict = browser.evaluate('document.querySelector("#verdict .control").innerText')
    means = frame.groupby(['k', 'system'])['utility'].mean().unstack()
    failing = [k for k, row in means.iterrows() if not row['Rel'] > row['NRel']]  # computed here, not by the report
    assert (failing == []) == held
    if held:
        assert verdict.startswith('Positive control held: Rel beats NRel at every k and label set')
    else:
        assert verdict.startswith('Positive control FAILED: Rel does not beat NRel at '
                                  + ', '.join(f'k={k} (label>=2)' for k in failing) + ';')
    state = browser.evaluate('document.querySelector("#verdict .control").className')
    assert state == ('control held' if held else 'control failed')
    colour = browser.evaluate('getComputedStyle(document.querySelector("#verdict .control")).backgroundColor')
    assert colour == ('rgb(229, 244, 234)' if held else 'rgb(253, 227, 222)')
    top = 'document.querySelector("{}").getBoundingClientRect().top'
    assert 0 < browser.evaluate(top.format('#verdict')) < browser.evaluate(top.format('#table1'))
    assert browser.evaluate('document.querySelector("#verdict .answer-health").innerText') \
        == 'Answer health unknown: health.csv is not in the study folder.'
    assert browser.errors == []
