"""Headless Chromium for the tests, driven over its DevTools protocol (a websocket): load a page,
evaluate JavaScript in it, collect its console errors, take screenshots; run as a script, it saves a screenshot of
a page (the README's and the docs')."""
import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import List, Optional

import websocket

NAMES = ('chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable')


def executable() -> Optional[str]:
    """The first Chromium on PATH ($CHROMIUM wins), or None."""
    if os.environ.get('CHROMIUM'):
        return os.environ['CHROMIUM']
    return next((path for path in map(shutil.which, NAMES) if path), None)


class Browser:
    """One headless Chromium with one page; use as a context manager.

    Example::

        with Browser(executable()) as browser:
            browser.load(Path('report.html'))
            print(browser.evaluate('document.title'), browser.errors)
    """

    def __init__(self, path: str, width: int = 1400, height: int = 1000, timeout: float = 60):
        self.path, self.width, self.height, self.timeout = path, width, height, timeout
        self.ids = itertools.count(1)
        self.events: List[dict] = []

    def __enter__(self) -> 'Browser':
        self.profile = tempfile.mkdtemp(prefix='pu-chromium-')
        self.process = subprocess.Popen(
            [self.path, '--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--no-default-browser-check',
             '--remote-debugging-port=0', f'--user-data-dir={self.profile}',
             f'--window-size={self.width},{self.height}', 'about:blank'],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        port_file = Path(self.profile) / 'DevToolsActivePort'
        deadline = time.time() + self.timeout
        while not (port_file.exists() and port_file.read_text().count('\n') >= 1):
            if self.process.poll() is not None or time.time() > deadline:
                self.__exit__()
                raise RuntimeError(f'{self.path} did not start: {self.process.stderr.read().decode()[-2000:]}')
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/json/list', timeout=10) as answer:
            page = next(t for t in json.load(answer) if t['type'] == 'page')
        self.socket = websocket.create_connection(page['webSocketDebuggerUrl'], timeout=self.timeout,
                                                  suppress_origin=True)
        for domain in ('Page', 'Runtime', 'Log'):
            self.send(f'{domain}.enable')
        self.send('Emulation.setDeviceMetricsOverride', width=self.width, height=self.height, deviceScaleFactor=1,
                  mobile=False)
        return self

    def __exit__(self, *exc) -> None:
        if getattr(self, 'socket', None):
            self.socket.close()
        self.process.kill()
        self.process.wait()
        self.process.stderr.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def send(self, method: str, **params) -> dict:
        """Sends one command and returns its result; events that arrive meanwhile are kept."""
        call = next(self.ids)
        self.socket.send(json.dumps({'id': call, 'method': method, 'params': params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get('id') == call:
                if 'error' in message:
                    raise RuntimeError(f'{method}: {message["error"]}')
                return message['result']
            self.events.append(message)

    def wait_event(self, method: str) -> dict:
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            for event in self.events:
                if event.get('method') == method:
                    self.events.remove(event)
                    return event
            self.events.append(json.loads(self.socket.recv()))
        raise TimeoutError(f'no {method} within {self.timeout} s')

    def load(self, path: Path) -> float:
        """Opens a file and waits for its load event; returns the seconds from navigation to load."""
        self.events = [e for e in self.events if e.get('method') != 'Page.loadEventFired']
        start = time.perf_counter()
        self.send('Page.navigate', url=path.resolve().as_uri())
        self.wait_event('Page.loadEventFired')
        return time.perf_counter() - start

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page; a thrown error fails with its message."""
        result = self.send('Runtime.evaluate', expression=expression, returnByValue=True, awaitPromise=True)
        if 'exceptionDetails' in result:
            raise RuntimeError(f'{expression}: {result["exceptionDetails"]}')
        return result['result'].get('value')

    @property
    def errors(self) -> List[str]:
        """Console errors, uncaught exceptions and failed loads the page reported so far."""
        out = []
        for event in self.events:
            method, params = event.get('method'), event.get('params', {})
            if method == 'Runtime.consoleAPICalled' and params['type'] in ('error', 'assert'):
                out.append(' '.join(str(a.get('value', a.get('description'))) for a in params['args']))
            elif method == 'Runtime.exceptionThrown':
                out.append(json.dumps(params['exceptionDetails'])[:2000])
            elif method == 'Log.entryAdded' and params['entry']['level'] == 'error':
                out.append(params['entry']['text'])
        return out

    def screenshot(self) -> bytes:
        """A PNG of the viewport."""
        return base64.b64decode(self.send('Page.captureScreenshot', format='png')['data'])


def main(argv: Optional[List[str]] = None) -> None:
    """Saves the first screen (1400x1000) of a page as a PNG, after running an optional script in it.

    Example (the README's screenshots)::

        python tests/support/browser.py results/study/report.html pyterrier_utility/pt_docs/report.png
        python tests/support/browser.py results/study/report.html pyterrier_utility/pt_docs/report-query.png \\
            'document.querySelector("#rows tbody tr").click()'
    """
    import sys
    page, out, *script = sys.argv[1:] if argv is None else argv
    with Browser(executable()) as browser:
        browser.load(Path(page))
        for expression in script:
            browser.evaluate(expression)
        Path(out).write_bytes(browser.screenshot())
        if browser.errors:
            raise SystemExit(f'{page}: {browser.errors}')


if __name__ == '__main__':
    main()
