"""Stop what a dead sweep's trial left running: its verl driver, Ray daemons and workers.

A sweep killed by the OOM killer, a lost SSH session or `kill -9` cannot stop its trial; the trial's
process session (verlsweep.trial.supervise) lives on and keeps the devices, so the next trial would
fail for a reason that is not its config. While a trial runs its supervisor records what identifies
its processes (`Identity`: in the trial dir and in the Optuna trial's user attrs); the next sweep on
the study stops exactly those.

A process is the trial's only if it matches the record: the same pid *and* start time *and* command
line (a recycled pid has another start time), or it carries the trial's own random marker in its
environment (Ray's later workers inherit it; verlsweep.trial.supervise). Never by name: another
user's, or another sweep's, `python -m verl.trainer.main_ppo` looks the same.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from verlsweep.common.files import write_atomic
from verlsweep.common.names import PROCESSES_FILE
from verlsweep.common.processes import is_alive, own_processes, same_start
from verlsweep.trial.supervise import MARK_ENV, RAY_TMP_PREFIX, remove_tree, signal_all, wait_gone


@dataclass
class Identity:
    """What identifies one trial's processes."""

    host: str
    session: int                                  # session id = the trial leader's pid
    mark: str                                     # MARK_ENV value of every process of the trial
    ray_tmp: str | None = None                    # the trial's private RAY_TMPDIR
    trial_dir: str | None = None
    processes: list[dict[str, Any]] = field(default_factory=list)   # {pid, create_time, cmdline}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Identity:
        known = {k: data[k] for k in ("host", "session", "mark", "ray_tmp", "trial_dir", "processes") if k in data}
        return cls(**known)

    def write(self, trial_dir: Path) -> Path:
        path = trial_dir / PROCESSES_FILE
        write_atomic(path, json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def describe(procs: Iterable[psutil.Process]) -> list[dict[str, Any]]:
    out = []
    for proc in procs:
        try:
            out.append({"pid": proc.pid, "create_time": proc.create_time(), "cmdline": proc.cmdline()})
        except psutil.Error:
            continue
    return out


def read(trial_dir: str | os.PathLike | None) -> Identity | None:
    if not trial_dir:
        return None
    path = Path(trial_dir) / PROCESSES_FILE
    try:
        return Identity.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _matches_record(proc: psutil.Process, record: dict[str, Any]) -> bool:
    try:
        return same_start(proc, float(record["create_time"])) and proc.cmdline() == list(record["cmdline"])
    except (psutil.Error, KeyError, TypeError, ValueError):
        return False


def find(identity: Identity) -> list[psutil.Process]:
    """The identity's processes that are still alive on this host (none on another host)."""
    if identity.host != socket.gethostname():
        return []
    found: dict[int, psutil.Process] = {}
    for record in identity.processes:
        try:
            proc = psutil.Process(int(record["pid"]))
        except (psutil.Error, KeyError, TypeError, ValueError):
            continue
        if _matches_record(proc, record):
            found[proc.pid] = proc
    for proc in own_processes(skip=found) if identity.mark else ():
        try:
            if proc.environ().get(MARK_ENV) == identity.mark:
                found[proc.pid] = proc
        except (psutil.Error, OSError):
            continue
    return [p for p in found.values() if is_alive(p)]


def stop(identity: Identity, grace_s: float) -> list[dict[str, Any]]:
    """SIGTERM every matching process, `grace_s` to exit, SIGKILL the rest; remove the trial's Ray
    temp dir. Returns what was found alive ({pid, create_time, cmdline}); [] when nothing was."""
    procs = find(identity)
    found = describe(procs)
    if procs:
        signal_all(procs, signal.SIGTERM)
        left = wait_gone(procs, grace_s)
        for _ in range(3):    # a second look: a dying Ray driver may have started one more worker
            left = list({p.pid: p for p in left + find(identity)}.values())
            if not left:
                break
            signal_all(left, signal.SIGKILL)
            left = wait_gone(left, 5.0)
    if identity.host == socket.gethostname():
        remove_ray_tmp(identity.ray_tmp)
    return found


def remove_ray_tmp(path: str | None) -> None:
    """Only a dir this project made (tempfile.mkdtemp(prefix=RAY_TMP_PREFIX)): the path comes from the
    study's storage, and a stray value there must never remove anything else."""
    if not path:
        return
    p = Path(path)
    if p.name.startswith(RAY_TMP_PREFIX) and p.parent == Path(tempfile.gettempdir()):
        remove_tree(str(p))
