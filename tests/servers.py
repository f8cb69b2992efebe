"""Real OpenAI-compatible servers for the tests: ``transformers serve`` on 127.0.0.1, offline, on CPU."""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class ServedModel:
    """``transformers serve MODEL --port P --device cpu`` in a child process; its log in ``log``."""

    def __init__(self, model: Path, log: Path, port: int = None):
        self.model = str(model)
        self.port = port or free_port()
        self.log = log
        self.process = None

    @property
    def url(self) -> str:
        return f'http://127.0.0.1:{self.port}/v1'

    def start(self) -> 'ServedModel':
        cli = Path(sys.executable).with_name('transformers')
        env = dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1')
        with open(self.log, 'a') as log:
            self.process = subprocess.Popen([str(cli), 'serve', self.model, '--port', str(self.port),
                                             '--device', 'cpu', '--host', '127.0.0.1'],
                                            stdout=log, stderr=subprocess.STDOUT, env=env)
        return self

    def wait_ready(self, timeout: float = 180) -> 'ServedModel':
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f'transformers serve exited with {self.process.returncode}: '
                                   f'{self.log.read_text()[-2000:]}')
            try:
                if httpx.get(f'http://127.0.0.1:{self.port}/health', timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f'transformers serve on port {self.port} not ready in {timeout} s')

    def answered(self) -> int:
        """Completions the server answered with HTTP 200 (from its access log)."""
        return self.log.read_text().count('"POST /v1/completions HTTP/1.1" 200')

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
