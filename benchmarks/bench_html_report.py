"""The study report's size and load time in headless Chromium, for synthetic studies of growing size.

Each study has 6 systems, 3 values of k, 2 label sets and 5 samples per cell (the default study's
shape, 10 queries); the report is written from its folder, then opened in headless Chromium over
the DevTools protocol. Load: from navigation to the load event (the JSON parsed and the first page
of rows drawn), the median of 3 loads. Filter: setting the system filter and redrawing. Open:
opening a query (its contexts and answers).

Usage: PYTHONPATH=. python benchmarks/bench_html_report.py [--queries 10 100 1000]
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / 'tests'))

from support.browser import Browser, executable  # noqa: E402
from support.synthetic_study import write_study  # noqa: E402

from pyterrier_utility.report.html import write_report  # noqa: E402

IN_PAGE = '''(() => {{ const t = performance.now(); {action}; return performance.now() - t; }})()'''


def measure(browser: Browser, queries: int, folder: Path) -> dict:
    study = write_study(folder / f'study{queries}', queries=queries)
    start = time.perf_counter()
    path = write_report(study)
    written = time.perf_counter() - start
    loads = [browser.load(path) for _ in range(3)]
    assert not browser.errors, browser.errors
    rows = browser.evaluate('document.getElementById("count").textContent').split(' of ')[1]
    filter_ms = browser.evaluate(IN_PAGE.format(action='const s = document.getElementById("filter-system"); '
                                                's.value = "BM25"; s.dispatchEvent(new Event("change"))'))
    open_ms = browser.evaluate(IN_PAGE.format(action='document.querySelector("#rows tbody tr").click()'))
    return {'queries': queries, 'rows': rows, 'MB': path.stat().st_size / 1e6, 'write s': written,
            'load s': statistics.median(loads), 'filter ms': filter_ms, 'open ms': open_ms}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--queries', type=int, nargs='+', default=[10, 100, 1000])
    args = parser.parse_args()
    if executable() is None:
        sys.exit('no Chromium on PATH (apt-get install chromium)')
    print('| queries | per-query rows | page (MB) | write (s) | load (s) | filter (ms) | open a query (ms) |')
    print('|---:|---|---:|---:|---:|---:|---:|')
    with tempfile.TemporaryDirectory() as tmp, Browser(executable()) as browser:
        for queries in args.queries:
            m = measure(browser, queries, Path(tmp))
            print(f"| {m['queries']} | {m['rows']} | {m['MB']:.2f} | {m['write s']:.2f} | {m['load s']:.2f} | "
                  f"{m['filter ms']:.0f} | {m['open ms']:.0f} |", flush=True)


if __name__ == '__main__':
    main()
