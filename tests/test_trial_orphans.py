"""verlsweep.trial.orphans: finding a dead sweep's trial processes by what was recorded of them (pid +
start time + command line) and by the mark in their environment, and removing only a Ray temp dir this
project made. tests/test_reconcile.py drives the whole stop through the sweep's reconcile."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from verlsweep.trial import orphans
from verlsweep.trial.supervise import MARK_ENV, RAY_TMP_PREFIX

SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]


def _start(mark: str | None = None) -> subprocess.Popen:
    env = dict(os.environ, **({MARK_ENV: mark} if mark else {}))
    return subprocess.Popen(SLEEP, env=env)


@pytest.fixture
def procs():
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _identity(mark: str = "", records: list[int] = ()) -> orphans.Identity:
    return orphans.Identity(host=socket.gethostname(), session=0, mark=mark,
                            processes=orphans.describe(psutil.Process(p) for p in records))


def test_find_takes_a_recorded_process_only_when_its_start_and_command_line_still_match(procs):
    procs.append(_start())
    pid = procs[0].pid
    assert [p.pid for p in orphans.find(_identity(records=[pid]))] == [pid]
    recycled = _identity(records=[pid])
    recycled.processes[0]["create_time"] -= 60          # another process now holds that pid
    assert orphans.find(recycled) == []
    other_cmd = _identity(records=[pid])
    other_cmd.processes[0]["cmdline"] = ["something", "else"]
    assert orphans.find(other_cmd) == []


def test_find_takes_every_process_carrying_the_mark_and_nothing_else(procs):
    procs += [_start("trial-7"), _start("trial-8"), _start()]
    found = {p.pid for p in orphans.find(_identity(mark="trial-7"))}
    assert found == {procs[0].pid}


def test_find_looks_at_nothing_on_another_host(procs):
    procs.append(_start("trial-9"))
    who = _identity(mark="trial-9", records=[procs[0].pid])
    who.host = "not-" + socket.gethostname()
    assert orphans.find(who) == []


def test_an_identity_round_trips_through_its_file(tmp_path):
    who = orphans.Identity(host="h", session=12, mark="m", ray_tmp="/tmp/x", trial_dir=str(tmp_path),
                           processes=[{"pid": 1, "create_time": 2.0, "cmdline": ["a"]}])
    who.write(tmp_path)
    assert orphans.read(tmp_path) == who
    assert orphans.read(tmp_path / "missing") is None
    assert orphans.read(None) is None


def test_remove_ray_tmp_removes_only_a_dir_this_project_made(tmp_path):
    ours = Path(tempfile.mkdtemp(prefix=RAY_TMP_PREFIX))
    (ours / "session").mkdir()
    foreign = tmp_path / f"{RAY_TMP_PREFIX}elsewhere"       # the right name in the wrong place
    foreign.mkdir()
    orphans.remove_ray_tmp(str(foreign))
    orphans.remove_ray_tmp(str(tmp_path))
    orphans.remove_ray_tmp(None)
    assert foreign.exists() and tmp_path.exists()
    orphans.remove_ray_tmp(str(ours))
    assert not ours.exists()
