"""Writes the docs' and the README's pictures of a study's report from its folder: the report's first
screen (``report.png``) and a query opened in it (``report-query.png``), each 1400 x 1000, in headless
Chromium. The report is rendered afresh from the folder's files, so the pictures show the page as the
installed version writes it.

Example (the main job's folder, into the docs)::

    python docs/screenshot_report.py results/study
    python docs/screenshot_report.py results/study --out /tmp/pictures
"""
import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / 'tests' / 'support')]

from browser import Browser, executable  # noqa: E402

from pyterrier_utility.report.html import write_report  # noqa: E402

#: Opens the first query of the explorer (report.js renders the rows once the page has loaded).
OPEN_QUERY = 'document.querySelector("#rows tbody tr").click()'


def screenshots(folder: Path, out: Path) -> list:
    """``out/report.png`` and ``out/report-query.png`` from the report of the study in ``folder``."""
    chromium = executable()
    if chromium is None:
        raise SystemExit('no Chromium on PATH (apt-get install chromium, or set $CHROMIUM)')
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tempfile.TemporaryDirectory() as tmp, Browser(chromium, width=1400, height=1000) as browser:
        page = write_report(folder, Path(tmp) / 'report.html')
        for name, script in (('report.png', None), ('report-query.png', OPEN_QUERY)):
            browser.load(page)
            if script:
                browser.evaluate(script)
                browser.evaluate('document.getElementById("query").scrollIntoView()')
            (out / name).write_bytes(browser.screenshot())
            written.append(out / name)
        if browser.errors:
            raise SystemExit(f'{page}: {browser.errors}')
    return written


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="The report's pictures of a study folder, in headless Chromium.")
    parser.add_argument('folder', type=Path, help='a study folder (per_query.csv and the files beside it)')
    parser.add_argument('--out', type=Path, default=ROOT / 'pyterrier_utility' / 'pt_docs',
                        help='where report.png and report-query.png are written (default: the docs, pt_docs/)')
    args = parser.parse_args(argv)
    for path in screenshots(args.folder, args.out):
        print(path)


if __name__ == '__main__':
    main()
