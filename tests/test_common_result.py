"""verlsweep.common.result: a trial's outcome and measurement as every stage reads it, and the failure
phases the planner's checks map to."""
from __future__ import annotations

import pytest

from verlsweep.common.result import (
    CONSTRAINT_OUTCOMES,
    FAILURE_PHASES,
    OUTCOMES,
    PLAN_CHECK_PHASES,
    NullReporter,
    TrialResult,
)
from verlsweep.plan.predictor.memory import ORDER


def test_an_unknown_outcome_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="'exploded' is not one of completed, pruned, oom"):
        TrialResult("exploded")


def test_an_unknown_failure_phase_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="'warmup' is not one of vllm_start, kv_cache"):
        TrialResult("oom", failure_phase="warmup")
    assert TrialResult("oom", failure_phase="kv_cache").failure_phase == "kv_cache"


def test_only_a_completed_trial_is_ok():
    assert [o for o in OUTCOMES if TrialResult(o).ok] == ["completed"]


def test_value_reads_the_objective_the_peak_or_a_named_metric():
    r = TrialResult("completed", objective=480.0, peak_memory_gb=41.5, metrics={"mfu": 0.31})
    assert (r.value("objective"), r.value("peak_memory_gb"), r.value("mfu"), r.value("absent")) == \
        (480.0, 41.5, 0.31, None)


def test_to_dict_round_trips():
    r = TrialResult("oom", excerpt="NPU out of memory", failure_phase="training", predicted={"plan/tok_s": 1.0})
    assert TrialResult(**r.to_dict()) == r


def test_constraint_outcomes_are_outcomes():
    assert CONSTRAINT_OUTCOMES <= set(OUTCOMES)


def test_every_device_check_of_the_planner_has_a_failure_phase_and_host_memory_none():
    assert set(PLAN_CHECK_PHASES) == set(ORDER) - {"host_memory"}
    assert set(PLAN_CHECK_PHASES.values()) <= set(FAILURE_PHASES)


def test_the_null_reporter_never_prunes():
    reporter = NullReporter()
    assert reporter.report(1, 1.0) is False
    reporter.record("pid", 1)
