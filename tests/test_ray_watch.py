"""The runner's watch of a trial's own Ray (verlsweep/trial/ray_watch.py, ray_probe.py).

Fast: the judge on snapshots shaped like the probe's output. Slow: the verl stand-in asking its own
real local Ray for a placement group it cannot place, through `python sweep.py` (single runs and a sweep).
"""
from __future__ import annotations

import dataclasses

from verlsweep.command.compose import compose_config
from verlsweep.common.result import CONSTRAINT_OUTCOMES, OUTCOMES
from verlsweep.config import VerlRunnerConfig, read
from verlsweep.trial import classify
from verlsweep.trial.ray_watch import Judge, RayWatch


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


def _runner(schedule_timeout: float) -> VerlRunnerConfig:
    """runner=verl's options as composed, with this schedule_timeout."""
    runner = read(compose_config(["runner=verl"])).runner
    assert isinstance(runner, VerlRunnerConfig)
    return dataclasses.replace(runner, schedule_timeout=schedule_timeout)


def test_the_watch_is_inert_without_a_ray_or_with_the_timeout_off():
    assert RayWatch.for_trial(_runner(120), None, {}).proc is None
    off = RayWatch.for_trial(_runner(0), "/nonexistent", {})
    assert off.proc is None and off.check(0.0, False) == (None, None)


def test_the_watch_follows_the_cluster_the_trial_joins(monkeypatch):
    started = []
    monkeypatch.setattr(RayWatch, "__init__", lambda self, argv, judge, env=None: started.append(argv))
    RayWatch.for_trial(_runner(120), None, {"RAY_ADDRESS": "10.0.0.1:6379"})
    assert started[0][2:4] == ["--address", "10.0.0.1:6379"]


def test_unschedulable_is_a_constraint_outcome_classified_from_the_watch():
    assert "unschedulable" in OUTCOMES and "unschedulable" in CONSTRAINT_OUTCOMES
    verdict = classify.classify(-15, classify.LogScanner(), steps=0, stopped="unschedulable", detail="pending: x")
    assert verdict.outcome == "unschedulable" and verdict.excerpt == "pending: x"
