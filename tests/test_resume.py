"""A study killed with SIGKILL in the middle of generation resumes without redoing finished work."""
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

JOB = Path(__file__).parent / 'support' / 'study_job.py'
OUTPUTS = ('per_query.csv', 'answers.csv', 'table1.csv', 'table1.md', 'correlations.csv')


def run(out: Path, delay: float = 0.0) -> None:
    subprocess.run([sys.executable, str(JOB), str(out), str(delay)], check=True, capture_output=True)


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.slow
def test_killed_study_resumes_without_regenerating_and_gives_identical_results(tmp_path):
    whole = tmp_path / 'whole'
    run(whole)
    total = lines(whole / 'generated.log')
    assert total > 20

    killed = tmp_path / 'killed'
    proc = subprocess.Popen([sys.executable, str(JOB), str(killed), '0.1'],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while lines(killed / 'generated.log') < 12 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, 'the job finished before it could be killed'
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    db = sqlite3.connect(killed / 'generations.sqlite')
    assert db.execute('PRAGMA integrity_check').fetchone() == ('ok',)
    stored = db.execute('SELECT COUNT(*) FROM answers').fetchone()[0]
    db.close()
    assert 0 < stored < total
    assert not (killed / 'per_query.csv').exists()

    (killed / 'generated.log').rename(killed / 'before_kill.log')
    run(killed)
    assert lines(killed / 'generated.log') == total - stored  # nothing stored is generated again
    for name in OUTPUTS:
        assert (killed / name).read_bytes() == (whole / name).read_bytes(), name


@pytest.mark.slow
def test_rerun_generates_nothing_and_writes_identical_bytes(tmp_path):
    out = tmp_path / 'run'
    run(out)
    first = {name: (out / name).read_bytes() for name in OUTPUTS}
    generated = lines(out / 'generated.log')
    run(out)
    assert lines(out / 'generated.log') == generated
    assert first == {name: (out / name).read_bytes() for name in OUTPUTS}
