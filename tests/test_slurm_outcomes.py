"""A Slurm job the scheduler ended is a trial outcome (verlsweep/common/slurm.py), a preempted trial is
re-run once by the sweeper, and the `hydra/launcher=slurm` preset takes the allocation from the
hardware group and the `slurm:` settings. Quick checks; the real-Slurm ones are in tests/e2e/test_slurm_sweep.py."""
from __future__ import annotations

import optuna
import pytest
from omegaconf import OmegaConf

from verlsweep.command.resolvers import slurm_minutes
from verlsweep.record import results as _results
from verlsweep.command.compose import compose_config
from verlsweep.common import slurm
from verlsweep.common.result import TrialResult


@pytest.mark.parametrize("state,outcome", [("TIMEOUT", "timeout"), ("CANCELLED by 0", "preempted"),
                                           ("PREEMPTED", "preempted"), ("NODE_FAIL", "preempted"),
                                           ("COMPLETED", None), ("FAILED", None), ("OUT_OF_MEMORY", None)])
def test_scheduler_states_that_end_a_job_map_to_trial_outcomes(state, outcome):
    assert slurm.killed_outcome(state) == outcome


def test_job_id_is_the_one_sacct_shows_for_an_array_task():
    assert slurm.job_id({"SLURM_JOB_ID": "14", "SLURM_ARRAY_JOB_ID": "12", "SLURM_ARRAY_TASK_ID": "1"}) == "12_1"
    assert slurm.job_id({"SLURM_JOB_ID": "14"}) == "14"
    assert slurm.job_id({}) is None


def test_preempted_trial_is_failed_rerun_once_with_its_params_and_not_counted_as_a_failure():
    study = optuna.create_study(direction="maximize")
    dist = {"x": optuna.distributions.FloatDistribution(0, 1)}
    first = study.ask(dist)
    told = _results.tell(study, first, None, ["objective"], result=TrialResult("preempted"))
    assert told.state == optuna.trial.TrialState.FAIL and not told.failed
    waiting = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert [t.params for t in waiting] == [first.params]
    again = study.ask(dist)
    assert again.params == first.params
    _results.tell(study, again, None, ["objective"], result=TrialResult("preempted"))
    assert study.get_trials(states=(optuna.trial.TrialState.WAITING,)) == []      # only once


def _launcher(overrides):
    cfg = compose_config(["hydra/launcher=slurm", *overrides], return_hydra_config=True)
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=True)


def test_slurm_preset_asks_for_the_hardware_groups_nodes_and_devices_and_the_sites_settings(monkeypatch):
    monkeypatch.setenv("VERLSWEEP_SLURM_PARTITION", "gpu-long")
    monkeypatch.setenv("VERLSWEEP_SLURM_ACCOUNT", "rl-team")
    cuda = _launcher(["hardware=h100_80g", "runner.timeout=3600", "slurm.time_margin_min=10"])
    assert (cuda["nodes"], cuda["tasks_per_node"], cuda["gres"], cuda["timeout_min"]) == (1, 1, "gpu:8", 70)
    assert (cuda["partition"], cuda["account"], cuda["qos"]) == ("gpu-long", "rl-team", None)
    npu = _launcher(["hardware=a2_64g", "hardware.nnodes=2", "slurm.npu_gres=davinci"])
    assert (npu["nodes"], npu["gres"]) == (2, "davinci:8")
    assert _launcher(["slurm.gres=null"])["gres"] is None


def test_a_disabled_runner_timeout_is_refused_for_the_jobs_time_limit():
    with pytest.raises(ValueError, match="runner.timeout"):
        slurm_minutes(0, 15)
