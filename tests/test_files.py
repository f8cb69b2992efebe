"""What several processes share in the cache folder is built by one of them, whole, while the others wait."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pyterrier_utility._files import built_once

ROOT = Path(__file__).resolve().parents[1]

# A slow fake model conversion: three files written one by one into the folder it is given, each
# build logged with the builder's process id once the first file is written; the process then
# prints what it reads.
BUILDER = '''
import os, sys, time
from pathlib import Path
from pyterrier_utility._files import built_once
target, log, pause = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])

def build(staging):
    staging.mkdir()
    for name in ('config.json', 'model.safetensors', 'tokenizer.json'):
        (staging / name).write_text(name)
        if name == 'config.json':
            with open(log, 'a') as f:
                f.write(f'{os.getpid()}\\n')
        time.sleep(pause)

built_once(target, build, 'the fake model', done=lambda p: (p / 'config.json').exists())
print(sorted(p.name for p in target.iterdir()))
'''
WHOLE = "['config.json', 'model.safetensors', 'tokenizer.json']\n"


def start(target: Path, log: Path, pause: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, '-c', BUILDER, str(target), str(log), str(pause)], cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def wait_for(log: Path, proc: subprocess.Popen) -> None:
    deadline = time.time() + 60
    while not (log.exists() and log.read_text()) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()


def test_one_process_builds_while_the_other_waits_and_both_read_the_whole_result(tmp_path):
    target, log = tmp_path / 'models' / 'fake', tmp_path / 'builds.log'
    first = start(target, log, 1.0)
    wait_for(log, first)  # the first is building
    second = start(target, log, 1.0)
    (out1, err1), (out2, err2) = first.communicate(timeout=120), second.communicate(timeout=120)
    assert (first.returncode, second.returncode) == (0, 0), err1 + err2
    assert log.read_text() == f'{first.pid}\n'  # built once
    assert out1 == out2 == WHOLE
    assert err2.count('waiting for another process building the fake model') == 1
    assert 'waiting' not in err1
    assert sorted(p.name for p in target.parent.iterdir()) == ['.fake.lock', 'fake']


def test_what_a_killed_builder_left_is_built_again_whole(tmp_path):
    target, log = tmp_path / 'models' / 'fake', tmp_path / 'builds.log'
    killed = start(target, log, 30.0)
    wait_for(log, killed)
    os.kill(killed.pid, signal.SIGKILL)
    killed.communicate()
    assert not target.exists() and (target.parent / '.fake.staging' / 'config.json').exists()
    later = start(target, log, 0.0)  # the killed builder's lock went with it
    out, err = later.communicate(timeout=60)
    assert later.returncode == 0, err
    assert out == WHOLE and 'waiting' not in err
    assert log.read_text() == f'{killed.pid}\n{later.pid}\n'
    assert not (target.parent / '.fake.staging').exists()


def test_an_unfinished_target_is_replaced_and_a_finished_one_kept(tmp_path):
    target = tmp_path / 'index'
    target.mkdir()
    (target / 'half-written').write_text('x')  # built in place by a process that died
    done = lambda p: (p / 'pt_meta.json').exists()  # noqa: E731
    built_once(target, lambda p: p.mkdir() or (p / 'pt_meta.json').write_text('{}'), 'an index', done=done)
    assert sorted(p.name for p in target.iterdir()) == ['pt_meta.json']
    built_once(target, lambda p: pytest.fail('built twice'), 'an index', done=done)
    file = built_once(tmp_path / 'one.npy', lambda p: p.write_bytes(b'whole'), 'a file')
    assert file.read_bytes() == b'whole' and not (tmp_path / '.one.npy.staging').exists()
