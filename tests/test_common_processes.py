"""verlsweep.common.processes: whether a process is alive (a zombie and a recycled pid are not) and which
processes are this user's (where the supervisor and the orphan stop look for a trial's strays)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import psutil
import pytest

from verlsweep.common.processes import is_alive, own_processes, pid_alive, same_start

SLEEP = [sys.executable, "-c", "import time; time.sleep(30)"]


@pytest.fixture
def child():
    proc = subprocess.Popen(SLEEP)
    yield proc
    proc.kill()
    proc.wait()


def test_a_running_child_is_alive_and_started_when_psutil_says(child):
    p = psutil.Process(child.pid)
    assert is_alive(p)
    assert same_start(p, p.create_time())
    assert pid_alive(child.pid) and pid_alive(child.pid, p.create_time())


def test_a_recorded_start_time_that_differs_means_another_process(child):
    """A pid recycled by another process is not the one recorded."""
    created = psutil.Process(child.pid).create_time()
    assert not pid_alive(child.pid, created - 10.0)


def test_a_zombie_is_dead_though_its_pid_exists(child):
    child.kill()
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    assert psutil.pid_exists(child.pid)                 # not reaped yet: kill -0 would still succeed
    assert not is_alive(psutil.Process(child.pid))
    assert not pid_alive(child.pid)


def test_a_pid_nobody_has_is_not_alive():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    assert not pid_alive(dead.pid)


def test_own_processes_lists_this_users_children_but_never_this_process(child):
    pids = {p.pid for p in own_processes()}
    assert child.pid in pids
    assert os.getpid() not in pids


def test_own_processes_skips_the_pids_given_even_as_they_are_added(child):
    other = subprocess.Popen(SLEEP)
    try:
        found: dict[int, object] = {child.pid: None}
        seen = []
        for proc in own_processes(skip=found):
            seen.append(proc.pid)
            found[proc.pid] = proc                      # what the callers do: gather while iterating
        assert child.pid not in seen
        assert other.pid in seen
    finally:
        other.kill()
        other.wait()


def test_own_processes_leaves_out_other_users():
    """Every process it yields has this user's real uid (root's init, for one, never shows)."""
    uid = os.getuid()
    procs = list(own_processes())
    assert procs
    assert all(p.uids().real == uid for p in procs if p.is_running())
    if uid != 0:
        assert 1 not in {p.pid for p in procs}


NS_LAST_PID = "/proc/sys/kernel/ns_last_pid"     # the pid the kernel handed out last (root may set it)


def _start_on_pid(pid: int) -> subprocess.Popen | None:
    """A new process on `pid`, or None where the kernel's next pid cannot be set (not root, not Linux);
    another process may take the pid first, so a few tries."""
    for _ in range(20):
        try:
            with open(NS_LAST_PID, "w") as f:
                f.write(str(pid - 1))
        except OSError:
            return None
        proc = subprocess.Popen(SLEEP)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
    return None


def test_a_live_process_on_a_recycled_pid_is_listed_alive_though_an_earlier_listing_saw_the_pids_old_owner():
    """psutil.process_iter keeps the objects of earlier calls: one made for a process that has since ended
    answers is_running() False for the live process now holding its pid (pid_max is 32768 in many
    containers), which every caller's is_alive filter would drop: a trial's stray never stopped."""
    first = subprocess.Popen(SLEEP)
    assert first.pid in {p.pid for p in own_processes()}
    first.kill()
    first.wait()
    second = _start_on_pid(first.pid)
    if second is None:
        pytest.skip(f"cannot set {NS_LAST_PID} here (needs root on Linux): no pid can be recycled on purpose")
    try:
        listed = [p for p in own_processes() if p.pid == second.pid]
        assert len(listed) == 1 and is_alive(listed[0])
    finally:
        second.kill()
        second.wait()
