"""What a Slurm job tells about a trial: its id as sacct shows it, and the scheduler states that are
trial outcomes rather than failures of the trial itself."""
from __future__ import annotations

from collections.abc import Mapping

# MLflow tags of a trial that ran as a Slurm job
JOB_ID_TAG = "slurm.job_id"
STATE_TAG = "slurm.state"

# sacct's final job states (sacct(1), JOB STATE CODES) in which the scheduler ended the job: the
# trial's outcome. A preempted trial is re-run once by the sweeper; a timed-out one is a finding.
OUTCOME_BY_STATE: dict[str, str] = {
    "TIMEOUT": "timeout",
    "DEADLINE": "timeout",
    "PREEMPTED": "preempted",
    "NODE_FAIL": "preempted",
    "BOOT_FAIL": "preempted",
    "CANCELLED": "preempted",
    "REQUEUED": "preempted",
}


def job_id(environ: Mapping[str, str]) -> str | None:
    """The job's id as sacct and submitit name it: `<array job>_<task>` for an array task."""
    array, task = environ.get("SLURM_ARRAY_JOB_ID"), environ.get("SLURM_ARRAY_TASK_ID")
    if array and task:
        return f"{array}_{task}"
    return environ.get("SLURM_JOB_ID") or None


def killed_outcome(state: str | None) -> str | None:
    """The trial outcome of a job the scheduler ended (`CANCELLED by 0` -> preempted), else None."""
    if not state:
        return None
    return OUTCOME_BY_STATE.get(state.split()[0].rstrip("+"))


class TrialKilled(BaseException):
    """The scheduler signalled the job (SIGTERM: cancel/preemption; the pre-time-limit signal: timeout).
    A BaseException so no `except Exception` on the way swallows it; the task turns it into the outcome."""

    def __init__(self, outcome: str, reason: str):
        super().__init__(reason)
        self.outcome = outcome
