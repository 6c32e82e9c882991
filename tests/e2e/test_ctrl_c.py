"""Ctrl-C during a sweep with trials in flight, then the same command again: each trial counted once,
one line and exit 130 (128 + SIGINT), and the resume finishes the study's n_trials, no more."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.test_study_loop_sweeps import command

pytestmark = pytest.mark.slow


def _status(tmp_path: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "verlsweep.report", "--status", str(tmp_path / "sweep")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_ctrl_c_with_three_trials_in_flight_counts_each_once_exits_130_and_the_resume_ends_at_n_trials(tmp_path):
    args = command(tmp_path, "hydra/launcher=joblib", "hydra.launcher.n_jobs=3", "hydra.sweeper.n_jobs=3",
                   "hydra.sweeper.n_trials=6", "+app.step_seconds=2", f"+app.events={tmp_path / 'events'}")
    sweep = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             start_new_session=True)
    deadline = time.monotonic() + 300
    events = tmp_path / "events"
    while time.monotonic() < deadline and (not events.exists() or events.read_text().count("start") < 3):
        time.sleep(0.2)
    assert events.read_text().count("start") == 3
    os.killpg(sweep.pid, signal.SIGINT)       # as a terminal's Ctrl-C: the sweep and its workers
    out, err = sweep.communicate(timeout=300)

    assert sweep.returncode == 130, err[-3000:]
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == ("verlsweep: interrupted (Ctrl-C); t00, t01, t02 stopped in flight, "
                                            "re-run once when the same command runs again (n_trials is the total)")
    assert len(re.findall(r"│ +\d+ │ interrupted ", out)) == 3, out[-3000:]     # not their waiting re-runs too
    assert "0 of 6 trials done, 3 waiting" in _status(tmp_path)

    again = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    shown = [int(n) for n in re.findall(r"^\[(\d+)/6\]", again.stdout, re.MULTILINE)]
    assert shown and max(shown) == 6, again.stdout[-3000:]
    status = _status(tmp_path)
    assert "6 of 6 trials done" in status and "(3 stopped and re-run)" in status
