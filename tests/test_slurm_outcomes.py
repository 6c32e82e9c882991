"""A Slurm job the scheduler ended is a trial outcome (verlsweep/common/slurm.py), a preempted trial is
re-run once by the sweeper, and the `hydra/launcher=slurm` preset takes the allocation from the
hardware group and the `slurm:` settings. Quick checks; the real-Slurm ones are in tests/e2e/test_slurm_sweep.py."""
from __future__ import annotations

import threading
import time

import optuna
import pytest
from omegaconf import OmegaConf

from verlsweep.command.compose import compose_config
from verlsweep.command.resolvers import slurm_minutes
from verlsweep.common import slurm
from verlsweep.common.result import TrialResult
from verlsweep.reconcile import results as _results


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


class _Sacct:
    """submitit's shared SlurmInfoWatcher as the launcher's wait uses it: counts sacct calls; `ended`: the
    job ids its last sacct showed ended."""

    def __init__(self, ended: tuple[str, ...] = ()) -> None:
        self.calls, self.ended = 0, ended

    def register_job(self, job_id: str) -> None:
        pass

    def update(self) -> None:
        self.calls += 1

    def is_done(self, job_id: str, mode: str = "standard") -> bool:
        assert mode == "cache"          # only the launcher's own polls call sacct
        return job_id in self.ended


def _wait_s(jobs: list) -> float:
    from hydra_plugins.verlsweep_launcher.slurm_launcher import VerlSweepSlurmLauncher

    launcher = VerlSweepSlurmLauncher.__new__(VerlSweepSlurmLauncher)   # _wait reads only its poll intervals
    started = time.monotonic()
    launcher._wait(jobs)
    return time.monotonic() - started


def test_a_trial_job_that_wrote_its_result_is_seen_ended_well_before_the_next_sacct_poll(tmp_path, monkeypatch):
    import submitit

    sacct = _Sacct()
    monkeypatch.setattr(submitit.SlurmJob, "watcher", sacct)
    job = submitit.SlurmJob(folder=tmp_path, job_id="7")
    threading.Timer(0.3, job.paths.result_pickle.write_bytes, args=(b"",)).start()
    assert _wait_s([job]) < 2.0         # sacct is polled every 5 s: an async sweep refills the slot sooner
    assert sacct.calls <= 1


def test_a_trial_job_without_a_result_ends_the_wait_when_sacct_says_it_ended(tmp_path, monkeypatch):
    import submitit

    monkeypatch.setattr(submitit.SlurmJob, "watcher", _Sacct(ended=("8",)))
    assert _wait_s([submitit.SlurmJob(folder=tmp_path, job_id="8")]) < 2.0     # killed before it wrote one
