"""The runner's watch of a trial's own Ray (verlsweep/trial/ray_watch.py, ray_probe.py).

Fast: the judge on snapshots shaped like the probe's output. Slow: the verl stand-in asking its own
real local Ray for a placement group it cannot place, through `python sweep.py` (single runs and a sweep).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.trial_helpers import copy_store, new_mark, run_sweep, standin_entrypoint, survivors, tiny_overrides
from verlsweep.common.result import CONSTRAINT_OUTCOMES, OUTCOMES
from verlsweep.trial import classify
from verlsweep.trial.ray_watch import Judge, RayWatch

STORAGE = "verl.transfer_queue.backend.SimpleStorage.num_data_storage_units"


def snap(*, cpus: float = 2, free: float = 1, pgs=(), pending=(), nodes: int = 1) -> dict:
    return {"time": 0.0, "nodes": [{"total": {"CPU": cpus}, "available": {"CPU": free}}] * nodes,
            "pending_pgs": [{"id": pid, "strategy": strategy, "bundles": [{"CPU": 1.0}] * n}
                            for pid, strategy, n in pgs],
            "pending": [{"bundle": b, "count": 1} for b in pending]}


def test_a_placement_group_larger_than_the_cluster_is_unschedulable_at_once():
    excerpt = Judge(timeout_s=120).feed(snap(pgs=[("abc123", "SPREAD", 8)]), now=0.0, any_step=False)
    assert excerpt and "never place" in excerpt
    assert "8 bundles, {CPU: 8}" in excerpt and "CPU 2 total / 1 free" in excerpt


def test_strict_pack_must_fit_one_node_even_when_the_cluster_has_enough():
    judge = Judge(timeout_s=120)
    assert judge.feed(snap(cpus=4, nodes=2, pgs=[("a", "STRICT_PACK", 6)]), 0.0, False)
    assert not judge.feed(snap(cpus=4, nodes=2, pgs=[("a", "SPREAD", 6)]), 0.0, False)


def test_pending_that_could_fit_ends_the_trial_only_after_schedule_timeout():
    judge = Judge(timeout_s=60)
    waiting = snap(free=0, pgs=[("a", "SPREAD", 2)])
    assert judge.feed(waiting, now=0.0, any_step=False) is None
    assert judge.feed(waiting, now=59.0, any_step=False) is None
    excerpt = judge.feed(waiting, now=61.0, any_step=False)
    assert excerpt and "runner.schedule_timeout=60s" in excerpt and "pending: placement group a" in excerpt


def test_a_placement_group_that_becomes_ready_restarts_the_clock():
    judge = Judge(timeout_s=60)
    judge.feed(snap(free=0, pgs=[("a", "SPREAD", 1), ("b", "SPREAD", 1)]), now=0.0, any_step=False)
    judge.feed(snap(free=0, pgs=[("b", "SPREAD", 1)]), now=50.0, any_step=False)       # `a` was placed
    assert judge.feed(snap(free=0, pgs=[("b", "SPREAD", 1)]), now=100.0, any_step=False) is None
    assert judge.feed(snap(free=0, pgs=[("b", "SPREAD", 1)]), now=111.0, any_step=False)


def test_queued_tasks_after_the_first_step_are_not_a_schedule_problem():
    judge = Judge(timeout_s=10)
    queued = snap(free=0, pending=[{"CPU": 1.0}])
    judge.feed(queued, now=0.0, any_step=True)
    assert judge.feed(queued, now=100.0, any_step=True) is None
    assert Judge(timeout_s=10).feed(snap(pending=[{"CPU": 4.0}]), now=0.0, any_step=True)   # never fits


def test_the_watch_is_inert_without_a_ray_or_with_the_timeout_off():
    from omegaconf import OmegaConf

    assert RayWatch.for_trial(OmegaConf.create({"schedule_timeout": 120}), None, {}).proc is None
    off = RayWatch.for_trial(OmegaConf.create({"schedule_timeout": 0}), "/nonexistent", {})
    assert off.proc is None and off.check(0.0, False) == (None, None)


def test_the_watch_follows_the_cluster_the_trial_joins(monkeypatch):
    from omegaconf import OmegaConf

    started = []
    monkeypatch.setattr(RayWatch, "__init__", lambda self, argv, judge, env=None: started.append(argv))
    RayWatch.for_trial(OmegaConf.create({"schedule_timeout": 120}), None, {"RAY_ADDRESS": "10.0.0.1:6379"})
    assert started[0][2:4] == ["--address", "10.0.0.1:6379"]


def test_unschedulable_is_a_constraint_outcome_classified_from_the_watch():
    assert "unschedulable" in OUTCOMES and "unschedulable" in CONSTRAINT_OUTCOMES
    verdict = classify.classify(-15, classify.LogScanner(), steps=0, stopped="unschedulable", detail="pending: x")
    assert verdict.outcome == "unschedulable" and verdict.excerpt == "pending: x"


# ---- the stand-in's own real Ray, through python sweep.py

def _standin(model: Path, data: Path, out: Path, uri: str, *extra: str) -> list[str]:
    # num_cpus pins the stand-in's Ray to 2 CPUs on any machine
    return [*tiny_overrides(model, data, out, uri), standin_entrypoint(), "+env.VERL_STANDIN_MODE=unschedulable",
            "verl.ray_kwargs.ray_init.num_cpus=2", *extra]


@pytest.mark.slow
def test_a_trial_waiting_on_a_placement_group_ends_unschedulable_after_schedule_timeout(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    """Controller (1 CPU) + 2 storage units on 2 CPUs: it could fit, but never will."""
    uri = copy_store(empty_mlflow_db, tmp_path)
    mark = new_mark()
    proc = run_sweep(tmp_path, _standin(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri, f"{STORAGE}=2",
                                        "runner.schedule_timeout=10", "runner.startup_timeout=300"),
                     mark, timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "trial unschedulable" in proc.stdout
    client = MlflowClient(uri)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED" and run.data.tags["trial.outcome"] == "unschedulable"
    excerpt = Path(client.download_artifacts(run.info.run_id, "excerpt.txt", str(tmp_path / "dl"))).read_text()
    assert "runner.schedule_timeout=10s" in excerpt and "2 bundles, {CPU: 2}" in excerpt
    assert "CPU 2 total" in excerpt
    (log,) = (tmp_path / "out").rglob("trial.log")
    assert "TransferQueueController has been created." in log.read_text()    # the real Ray placed it
    assert survivors(mark) == []


@pytest.mark.slow
def test_a_sweep_tells_unschedulable_trials_to_the_sampler_and_goes_on(tiny_model_dir, gsm8k_dir,
                                                                      empty_mlflow_db, tmp_path):
    import optuna

    uri = copy_store(empty_mlflow_db, tmp_path)
    mark = new_mark()
    args = [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri), standin_entrypoint(),
            "verl.ray_kwargs.ray_init.num_cpus=2", "~sweep", "+env.VERL_STANDIN_MODE=choice(ok,unschedulable)",
            "hydra/sweeper/sampler=grid", "hydra.sweeper.n_trials=2", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    proc = run_sweep(tmp_path, args, mark, multirun=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    storage = f"sqlite:///{tmp_path / 'verlsweep-optuna.db'}"
    (summary,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).get_trials()
    by_outcome = {t.user_attrs["outcome"]: t for t in trials}
    assert set(by_outcome) == {"completed", "unschedulable"}
    told = by_outcome["unschedulable"]
    assert told.state == optuna.trial.TrialState.COMPLETE and told.constraints == {"memory": 1.0}
    assert "never place" in told.user_attrs["excerpt"]
    assert survivors(mark) == []
