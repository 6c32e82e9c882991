"""Trials of dead sweeps: found, their processes stopped, their outcome decided from their own files.

A trial is a dead sweep's when it is RUNNING and its sweep session is dead (its pid gone on this
host), or, for a session on another host or none recorded, when Optuna's heartbeat says it is
stale (optuna/storages/_heartbeat.py fail_stale_trials uses the same storage query). A trial of a
live session is never touched, even with a late heartbeat (a suspended sweep resumes).

Its outcome, in order of proof:
  1. result.json in its dir: the runner returned and wrote it; the sweep died before telling it.
     Told exactly as the sweep would have (constraint, pruned, ...), no re-run.
  2. its trial.log holds a line the classifier knows (an OOM, an HCCL timeout): told as that outcome.
  3. otherwise `orphaned`: FAIL, and its params re-run once (RetryHeartbeatStaleTrialCallback).
"""
from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from verlsweep.common import optuna_private
from verlsweep.common.names import JOB_DIR_ATTR, LOG_FILE, PROCESSES_ATTR, RESULT_FILE
from verlsweep.common.result import OUTCOMES, TrialResult
from verlsweep.reconcile import sessions
from verlsweep.trial import classify, orphans

log = logging.getLogger("verlsweep.reconcile")

ORPHANED = "orphaned"

# tell(trial, result) -> the state told; raises when the trial was finished meanwhile
Tell = Callable[[FrozenTrial, TrialResult], TrialState]
Retry = Callable[[optuna.Study, FrozenTrial], None]


@dataclass
class Settled:
    number: int
    outcome: str
    state: TrialState
    stopped: list[dict[str, Any]] = field(default_factory=list)
    proof: str = ""


def stale(study: optuna.Study, grace_s: float) -> list[FrozenTrial]:
    """RUNNING trials whose sweep process is dead."""
    storage = optuna_private.storage(study)
    study_id = optuna_private.study_id(study)
    known = sessions.all_of(storage, study_id)
    beat_stale: set[int] = set()
    if optuna_private.heartbeat_enabled(storage):
        # the query optuna.storages.fail_stale_trials runs; it fails them at once, we settle them first
        beat_stale = optuna_private.stale_trial_ids(storage, study_id)
    here = socket.gethostname()
    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        asked_by = t.system_attrs.get(sessions.TRIAL_ATTR)
        session = known.get(asked_by) if isinstance(asked_by, str) else None
        if session is not None and (session.host == here or session.ended):
            dead = not sessions.alive(session, grace_s)        # the pid decides, both ways
        else:
            dead = optuna_private.trial_id(t) in beat_stale
        if dead:
            out.append(t)
    return out


def job_dir(t: FrozenTrial) -> Path | None:
    path = t.user_attrs.get(JOB_DIR_ATTR) or (t.user_attrs.get(PROCESSES_ATTR) or {}).get("trial_dir")
    return Path(path) if path else None


def identity(t: FrozenTrial) -> orphans.Identity | None:
    """The newer of the two records (the trial dir's file is written first, the attr may lag)."""
    attr = t.user_attrs.get(PROCESSES_ATTR)
    recorded = orphans.Identity.from_dict(attr) if isinstance(attr, dict) else None
    on_disk = orphans.read(job_dir(t))
    if recorded is None or (on_disk is not None and len(on_disk.processes) >= len(recorded.processes)):
        return on_disk or recorded
    return recorded


def read_result(directory: Path | None) -> TrialResult | None:
    if directory is None:
        return None
    try:
        data = json.loads((directory / RESULT_FILE).read_text())
        return TrialResult(**{k: v for k, v in data.items() if k in TrialResult.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        return None


def from_log(directory: Path | None) -> tuple[str, str] | None:
    """(outcome, excerpt) when the trial's log holds a line the classifier knows."""
    if directory is None:
        return None
    scanner = classify.LogScanner()
    try:
        with open(directory / LOG_FILE, errors="replace") as f:
            for line in f:
                scanner.feed(line)
    except OSError:
        return None
    # only an unambiguous text: the process may have died of it, or of our stopping it
    found = scanner.cause(ambiguous=False)
    if found is None or found[0].outcome not in OUTCOMES:
        return None
    return found[0].outcome, found[1]


def settle(study: optuna.Study, t: FrozenTrial, *, stop_grace_s: float, tell: Tell | None,
           retry: Retry | None) -> Settled | None:
    """Stop the trial's processes (SIGTERM, `stop_grace_s`, SIGKILL), then record its outcome. None when
    another process settled it first."""
    who = identity(t)
    stopped = orphans.stop(who, stop_grace_s) if who is not None else []
    if stopped:
        log.warning("verlsweep: trial %d of a dead sweep left %d process(es) running; stopped them: %s",
                    t.number, len(stopped), ", ".join(f"{p['pid']} {' '.join(p['cmdline'])[:80]}" for p in stopped))
    elif who is not None and who.host != socket.gethostname():
        log.warning("verlsweep: trial %d of a dead sweep ran on host %s: stop its processes there "
                    "(python -m verlsweep.report --status --repair on that host)", t.number, who.host)
    directory = job_dir(t)
    result, proof = read_result(directory), f"{RESULT_FILE} of the trial"
    if result is None and (found := from_log(directory)) is not None:
        result = TrialResult(found[0], excerpt=found[1])
        proof = f"{LOG_FILE} of the trial: {found[1].splitlines()[0][:200]}"
    try:
        if result is not None and tell is not None:
            state = tell(t, result)
            return Settled(t.number, result.outcome, state, stopped, proof)
        return _orphaned(study, t, stopped, retry)
    except (optuna.exceptions.UpdateFinishedTrialError, RuntimeError, ValueError) as exc:
        log.debug("trial %d was settled by another process: %s", t.number, exc)
        return None


def _orphaned(study: optuna.Study, t: FrozenTrial, stopped: list[dict[str, Any]],
              retry: Retry | None) -> Settled | None:
    storage = optuna_private.storage(study)
    trial_id = optuna_private.trial_id(t)
    note = (f"its sweep process died while it ran; {len(stopped)} process(es) of it were still running and "
            "were stopped" if stopped else "its sweep process died while it ran")
    storage.set_trial_user_attr(trial_id, "outcome", ORPHANED)
    storage.set_trial_user_attr(trial_id, "excerpt", note)
    if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
        return None
    if retry is not None:
        retry(study, storage.get_trial(trial_id))
    return Settled(t.number, ORPHANED, TrialState.FAIL, stopped, note)
