"""Whether a process is alive: one answer for sweep sessions, the orphan stop and trial supervision;
and which processes are this user's (`own_processes`), where both look for a trial's strays.

A zombie is dead here. A process that was killed stays a zombie until its parent waits for it; when
the parent died first, the process is re-parented to init, and the init of many containers (this
project's CI machine among them) never waits. A zombie holds no memory, no device and no port, yet
`kill -0` and `psutil.pid_exists` succeed on it, so they cannot tell. The process state can
(psutil's `status()`, the third field of `/proc/<pid>/stat`).

A recycled pid is not the process that was recorded: `psutil.Process.is_running` compares the start
time psutil read when the object was made, and `same_start` compares a start time recorded elsewhere
(a session's or a trial's record in the study storage).
"""
from __future__ import annotations

import os
from collections.abc import Container, Iterator

import psutil

START_TOLERANCE_S = 0.05        # psutil's create_time is rounded to the clock tick


def is_alive(proc: psutil.Process) -> bool:
    """The process exists, is the one `proc` was made for, and is not a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def same_start(proc: psutil.Process, create_time: float) -> bool:
    """`proc` started at the recorded `create_time` (so it is that process, not a recycled pid)."""
    try:
        return abs(proc.create_time() - create_time) <= START_TOLERANCE_S
    except psutil.Error:
        return False


def pid_alive(pid: int, create_time: float | None = None) -> bool:
    """A live, non-zombie process has `pid` (and started at `create_time`, where one was recorded)."""
    try:
        proc = psutil.Process(pid)
    except psutil.Error:
        return False
    return is_alive(proc) and (create_time is None or same_start(proc, create_time))


def own_processes(skip: Container[int] = ()) -> Iterator[psutil.Process]:
    """This user's processes (by real uid), other than this process and the pids in `skip` (read as the
    iteration goes: a dict being filled from the loop skips what it gathered)."""
    me, uid = os.getpid(), os.getuid()
    # process_iter keeps the objects of its earlier calls: one made for a process that has since ended
    # says is_running() False for the live process that recycled its pid (pid_max is 32768 in many
    # containers), and every caller's is_alive would drop that process
    psutil.process_iter.cache_clear()
    for proc in psutil.process_iter(["uids"]):
        if proc.pid == me or proc.pid in skip:
            continue
        uids = proc.info.get("uids")
        if uids is not None and uids.real == uid:
            yield proc
