"""verlsweep.report.data: a sweep's trials read back from its Optuna study as the report shows them
(outcome, measured values only, the proofs and reuse notes, over-budget trials left out)."""
from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from verlsweep.common.names import (
    FAILURE_PHASE_ATTR,
    N_TRIALS_ATTR,
    OBJECTIVES_ATTR,
    OVER_BUDGET_ATTR,
    PLACEHOLDER_ATTR,
    REUSED_FROM_ATTR,
    RULED_OUT_ATTR,
)
from verlsweep.report.data import ESTIMATE, load

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
DISTS = {UTIL: FloatDistribution(0.3, 0.9, step=0.1), TP: CategoricalDistribution([1, 2, 4])}


def trial(state, util, tp, value=None, system_attrs=None, **attrs):
    return create_trial(state=state, values=None if value is None else [value], params={UTIL: util, TP: tp},
                        distributions=DISTS, user_attrs=attrs, system_attrs=system_attrs)


def study():
    s = optuna.create_study(direction="maximize")
    s.set_user_attr(OBJECTIVES_ATTR, ["perf/throughput"])
    s.set_user_attr(N_TRIALS_ATTR, 6)
    s.add_trial(trial(TrialState.COMPLETE, 0.5, 2, 480.0, outcome="completed", backend="verl", job_dir="/s/0"))
    # an OOM told as a violated constraint keeps a placeholder value: never a measurement
    oom = trial(TrialState.COMPLETE, 0.9, 2, 0.0, outcome="oom", **{PLACEHOLDER_ATTR: True,
                                                                    FAILURE_PHASE_ATTR: "vllm_start"})
    s.add_trial(oom)
    s.add_trial(trial(TrialState.COMPLETE, 0.9, 4, 0.0, outcome="infeasible", **{PLACEHOLDER_ATTR: True,
                                                                                 RULED_OUT_ATTR: 1}))
    s.add_trial(trial(TrialState.COMPLETE, 0.5, 2, 480.0, outcome="completed", **{REUSED_FROM_ATTR: "0"}))
    s.add_trial(trial(TrialState.FAIL, 0.7, 1))                              # its sweep process died
    s.add_trial(trial(TrialState.FAIL, 0.3, 1, system_attrs={OVER_BUDGET_ATTR: True}))
    return s


def test_rows_keep_what_each_trial_proves_and_leave_out_over_budget_ones():
    sweep = load(study())
    assert [r.number for r in sweep.rows] == [0, 1, 2, 3, 4]
    first, oom, ruled, reused, died = sweep.rows
    assert first.values == [480.0] and first.param("gpu_memory_utilization") == 0.5
    assert oom.values is None and oom.phase == "vllm_start"                   # a placeholder is no measurement
    assert ruled.ruled_out_by == 1 and "ruled out by trial 1" in ruled.shown_outcome
    assert reused.reused_from == 0 and reused.values == [480.0]
    assert died.outcome == "interrupted"


def test_the_sweep_knows_its_objectives_budget_best_and_outcome_counts():
    sweep = load(study())
    assert sweep.objectives == ["perf/throughput"] and sweep.n_trials == 6
    assert sweep.best().number == 0
    assert sweep.outcomes() == {"completed": 2, "infeasible": 1, "interrupted": 1, "oom": 1}
    assert sweep.util_param() == UTIL and sweep.sweep_dir().as_posix() == "/s"
    assert not sweep.estimated()


def test_the_measured_copy_keeps_numbers_and_fails_the_rest_under_short_names():
    sweep = load(study())
    copy = sweep.measured_study()
    states = [t.state for t in copy.get_trials()]
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL, TrialState.COMPLETE, TrialState.FAIL,
                      TrialState.FAIL]
    assert set(copy.get_trials()[0].params) == {sweep.short(UTIL), sweep.short(TP)}


def test_a_sweep_of_estimates_says_so():
    s = optuna.create_study(direction="maximize")
    s.add_trial(trial(TrialState.COMPLETE, 0.5, 2, 400.0, outcome="completed", backend=ESTIMATE))
    assert load(s).estimated()
    assert load(s).objectives == ["objective"]
