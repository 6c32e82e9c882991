"""Sweep sessions: which sweep processes work on a study, and whether each is still alive.

Optuna's heartbeat covers trials only; between batches (asking, writing outputs) a sweep has no
running trial, yet its MLflow parent run must not be ended by another process. So each sweep
process records itself as a study user attr `verlsweep.session.<id>` (host, pid and the pid's start
time, last beat) and beats with its trials. A session is alive when its process exists on this
host (pid and start time match, and it is not a zombie), or, on another host, while its beat is younger than the grace
period. Each trial it asks carries its session id (trial system attr `verlsweep.session`).
"""
from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass
from typing import Any

import psutil

from verlsweep.common.processes import pid_alive

PREFIX = "verlsweep.session."
TRIAL_ATTR = "verlsweep.session"


@dataclass
class Session:
    id: str
    host: str
    pid: int
    create_time: float
    started: float
    beat: float
    ended: str | None = None          # the end status, once the session ended cleanly

    @property
    def key(self) -> str:
        return PREFIX + self.id

    def label(self) -> str:
        return f"sweep session {self.id} (pid {self.pid} on {self.host})"


def new() -> Session:
    now = time.time()
    me = psutil.Process()
    return Session(id=uuid.uuid4().hex[:12], host=socket.gethostname(), pid=os.getpid(),
                   create_time=me.create_time(), started=now, beat=now)


def save(storage: Any, study_id: int, session: Session) -> None:
    storage.set_study_user_attr(study_id, session.key, asdict(session))


def beat(storage: Any, study_id: int, session: Session) -> None:
    session.beat = time.time()
    save(storage, study_id, session)


def all_of(storage: Any, study_id: int) -> dict[str, Session]:
    out = {}
    for key, value in storage.get_study_user_attrs(study_id).items():
        if key.startswith(PREFIX) and isinstance(value, dict):
            try:
                session = Session(**value)
            except TypeError:
                continue
            out[session.id] = session
    return out


def alive(session: Session, grace_s: float, now: float | None = None) -> bool:
    if session.ended:
        return False
    if session.host == socket.gethostname():      # a zombie sweep (killed, not yet reaped) is dead
        return pid_alive(session.pid, session.create_time)
    return (now or time.time()) - session.beat <= grace_s


def live(storage: Any, study_id: int, grace_s: float, *, besides: str | None = None) -> list[Session]:
    return [s for s in all_of(storage, study_id).values() if s.id != besides and alive(s, grace_s)]
