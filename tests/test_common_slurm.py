"""verlsweep.common.slurm: a trial's Slurm job id as sacct names it and the scheduler states that are a
trial's outcome (tests/test_slurm_outcomes.py runs them through a fake cluster)."""
from __future__ import annotations

import pytest

from verlsweep.common.result import OUTCOMES
from verlsweep.common.slurm import OUTCOME_BY_STATE, TrialKilled, job_id, killed_outcome


def test_an_array_task_is_named_array_underscore_task_else_the_job_id():
    assert job_id({"SLURM_ARRAY_JOB_ID": "100", "SLURM_ARRAY_TASK_ID": "3", "SLURM_JOB_ID": "103"}) == "100_3"
    assert job_id({"SLURM_JOB_ID": "77"}) == "77"
    assert job_id({"SLURM_JOB_ID": ""}) is None and job_id({}) is None


@pytest.mark.parametrize("state, outcome", [
    ("CANCELLED by 0", "preempted"), ("TIMEOUT", "timeout"), ("NODE_FAIL", "preempted"),
    ("PREEMPTED+", "preempted"), ("COMPLETED", None), ("FAILED", None), ("", None), (None, None),
])
def test_states_the_scheduler_ends_a_job_in_are_outcomes_the_rest_are_not(state, outcome):
    assert killed_outcome(state) == outcome


def test_every_scheduler_outcome_is_a_trial_outcome():
    assert set(OUTCOME_BY_STATE.values()) <= set(OUTCOMES)


def test_a_killed_trial_is_not_caught_by_except_exception():
    with pytest.raises(TrialKilled) as err:
        try:
            raise TrialKilled("timeout", "Slurm sent the pre-time-limit signal")
        except Exception:                # noqa: BLE001 - what code on the way does
            pytest.fail("swallowed")
    assert err.value.outcome == "timeout" and str(err.value) == "Slurm sent the pre-time-limit signal"
