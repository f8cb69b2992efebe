"""A command of ``pyterrier-utility`` run in a child process and stopped with Ctrl-C as a terminal gives it
(SIGINT to the child's whole process group, its replica processes included), for the tests of what a
command says and keeps when interrupted."""
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, List, Sequence

import psutil

from pyterrier_utility.cache.store import AnswerStore

TESTS = Path(__file__).resolve().parents[1]
#: The child: ``setup`` (Python lines) stands in what the test needs, then the command runs.
CHILD = '''
import atexit, faulthandler, functools, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks for every thread's stack if it lingers
# Ctrl-C as in a terminal: a suite started in the background of a non-interactive shell inherits SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.path.insert(0, {tests!r})
import pyterrier_utility as pu
from pyterrier_utility import cli
{setup}
# Called once the command has returned and every thread that could hold the process has ended; what follows
# is the interpreter's own teardown of torch, pandas and PyTerrier, which this does not time.
atexit.register(lambda: print('exiting at', time.time(), file=sys.stderr, flush=True))
sys.exit(cli.main({argv!r}))
'''
#: A progress bar's line (the bar a study shows is redrawn as it closes).
PROGRESS = re.compile(r'^[\w ]+: +\d+%\|')
#: Seconds the child may take to reach the moment it is interrupted at (importing torch and PyTerrier,
#: preparing the collection and reader, generating): only a hang guard.
UNTIMED = 300
#: Seconds after the Ctrl-C past which the child is asked for its threads' stacks.
LINGER = 30


@dataclass
class Interrupted:
    """What an interrupted command did: its exit status, the seconds from the Ctrl-C to its exit handlers
    (infinite where they never ran), the lines it wrote on stderr after the Ctrl-C (the exit handlers' own
    line and the progress bars' left out), all it wrote there, and what it left running."""
    returncode: int
    seconds: float
    after: List[str]
    stderr: str
    #: The processes of the child's group still running 5 s after it ended (its replicas, say).
    left: List[int]


def answers_in(path: Path) -> int:
    """The answers a generation cache file holds (0 before it exists)."""
    return len(AnswerStore(path)) if path.is_file() else 0


def interrupt_command(argv: Sequence[str], setup: str, ready: Callable[[], bool]) -> Interrupted:
    """Runs ``pyterrier-utility argv`` in a child process after ``setup``, and sends Ctrl-C to its process
    group once ``ready()`` holds."""
    script = CHILD.format(tests=str(TESTS), setup=setup, argv=list(argv))
    paths = [str(TESTS.parent), str(TESTS)] + [p for p in os.environ.get('PYTHONPATH', '').split(os.pathsep) if p]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths))  # replica processes import the tests' backends
    proc = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    lines: List[tuple] = []
    reader = threading.Thread(target=lambda: lines.extend((time.time(), line.rstrip('\n')) for line in proc.stderr))
    reader.start()
    try:
        guard = time.monotonic() + UNTIMED
        while not ready() and proc.poll() is None and time.monotonic() < guard:
            time.sleep(0.05)
        assert proc.poll() is None and ready(), 'the child ended, or never got there:\n' + \
            '\n'.join(line for _, line in lines)[-6000:]
        interrupted = time.time()
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=LINGER)
        except subprocess.TimeoutExpired:  # still running: where each thread waits goes into the failure
            proc.send_signal(signal.SIGUSR1)
            proc.wait(timeout=UNTIMED)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join()
    deadline = time.monotonic() + 5
    while (left := _running_in_group(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    exiting = [float(line.split()[-1]) for _, line in lines if line.startswith('exiting at ')]
    after = [line for t, line in lines if t >= interrupted and not line.startswith('exiting at ')
             and not PROGRESS.match(line)]
    return Interrupted(proc.returncode, exiting[0] - interrupted if exiting else float('inf'), after,
                       '\n'.join(line for _, line in lines), left)


def _running_in_group(group: int) -> List[int]:
    """The processes of process group ``group`` still running (not zombies waiting to be reaped)."""
    found = []
    for process in psutil.process_iter(['status']):
        try:
            if os.getpgid(process.pid) == group and process.info['status'] != psutil.STATUS_ZOMBIE:
                found.append(process.pid)
        except (ProcessLookupError, PermissionError):
            pass
    return found
