"""A simulated OpenAI-compatible endpoint on 127.0.0.1, standing in for a GPU server in tests and benchmarks.

It is a simulation, not a model: each request waits a fixed ``latency`` while holding one of
``capacity`` slots (a GPU server's batch), and answers ``"simulated answer <hash of prompt and seed>"``.
It records every request body, can fail the requests a ``fail`` function picks with an HTTP status
(with a ``Retry-After`` header when given, and the body ``error`` gives for the status), hold the
requests a ``hold`` function picks for some seconds (a hung server; released when the server stops),
send its answers one byte every ``trickle`` seconds, report a ``finish_reason`` per prompt, and
answer with as many choices as ``choices`` says for a prompt (a server that ignores ``n``). With
``logprobs``, a request that asks for ``logprobs`` gets the log-probability of each word of its
answer (word i: -(i + 1) / 8), as completions (``token_logprobs``) or chat (``content[i].logprob``)
report them; without, the field is ignored. It serves at most ``max_requests`` requests (then HTTP
410), so a test or benchmark cannot loop against it without bound.
"""
import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, List, Optional


def simulated_answer(prompt: str, seed) -> str:
    return 'simulated answer ' + hashlib.sha256(f'{prompt}|{seed}'.encode()).hexdigest()[:10]


class SimulatedServer:
    """``with SimulatedServer(latency=0.05, capacity=16) as server: ... server.url ...``"""

    def __init__(self, latency: float = 0.0, capacity: int = 1024, max_requests: int = 20000,
                 fail: Optional[Callable[[dict, int], Optional[int]]] = None, text: Callable = simulated_answer,
                 retry_after: Optional[str] = None, hold: Optional[Callable[[dict, int], float]] = None,
                 trickle: float = 0.0, finish_reason: Callable[[str], str] = lambda prompt: 'stop',
                 logprobs: bool = False, error: Callable[[int], dict] = lambda status: {
                     'error': f'simulated failure {status}'},
                 choices: Callable[[str], int] = lambda prompt: 1):
        self.latency = latency
        self.slots = threading.Semaphore(capacity)
        self.max_requests = max_requests
        self.fail = fail
        self.text = text
        self.retry_after = retry_after
        self.hold = hold
        self.trickle = trickle
        self.finish_reason = finish_reason
        self.logprobs = logprobs
        self.error = error
        self.choices = choices
        self.stopped = threading.Event()
        self.bodies: List[dict] = []
        self.headers: List[dict] = []
        self.paths: List[str] = []
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'
            disable_nagle_algorithm = True  # one small response must not wait for a delayed ACK

            def log_message(self, *args):
                pass

            def _reply(self, status: int, payload: dict, headers: Optional[dict] = None) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if not owner.trickle:
                    self.wfile.write(data)
                    return
                for i in range(len(data)):
                    if owner.stopped.wait(owner.trickle):
                        return
                    self.wfile.write(data[i:i + 1])
                    self.wfile.flush()

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
                with owner._lock:
                    number = len(owner.bodies)
                    owner.bodies.append(body)
                    owner.headers.append(dict(self.headers))
                    owner.paths.append(self.path)
                if number >= owner.max_requests:
                    return self._reply(410, {'error': 'simulated server: request budget spent'})
                status = owner.fail(body, number) if owner.fail else None
                if status:
                    headers = {'Retry-After': owner.retry_after} if owner.retry_after else {}
                    return self._reply(status, owner.error(status), headers)
                if owner.hold and owner.stopped.wait(owner.hold(body, number)):
                    self.close_connection = True
                    return
                with owner.slots:
                    time.sleep(owner.latency)
                prompt = body['messages'][0]['content'] if 'messages' in body else body['prompt']
                text = owner.text(prompt, body.get('seed'))
                choice = ({'index': 0, 'message': {'role': 'assistant', 'content': text}} if 'messages' in body
                          else {'index': 0, 'text': text})
                if owner.logprobs and body.get('logprobs') not in (None, False):
                    words = text.split(' ')
                    values = [-(i + 1) / 8 for i in range(len(words))]
                    choice['logprobs'] = ({'content': [{'token': w, 'logprob': v, 'top_logprobs': []}
                                                       for w, v in zip(words, values)]} if 'messages' in body
                                          else {'tokens': words, 'token_logprobs': values, 'top_logprobs': None})
                choice['finish_reason'] = owner.finish_reason(prompt)
                self._reply(200, {'choices': [dict(choice, index=i) for i in range(owner.choices(prompt))]})

        self._server = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f'http://127.0.0.1:{self._server.server_address[1]}/v1'

    def __enter__(self) -> 'SimulatedServer':
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()
        self._server.shutdown()
        self._server.server_close()


if __name__ == '__main__':
    # A server in its own process (benchmarks): python simulated_server.py LATENCY CAPACITY MAX_REQUESTS SECONDS
    import sys
    latency, capacity = float(sys.argv[1]), int(sys.argv[2])
    max_requests, seconds = int(sys.argv[3]), float(sys.argv[4])
    with SimulatedServer(latency=latency, capacity=capacity, max_requests=max_requests) as server:
        print(server.url, flush=True)
        time.sleep(seconds)
