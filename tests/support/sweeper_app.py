"""A fast stand-in for verlsweep.task.run, used by the sweep's tests (tests/e2e/test_study_*_sweeps.py).

The real conf/ tree and the real sweeper, but instead of verl a synthetic landscape over the
rollout_memory knobs: throughput grows with the rollout's KV cache (gpu_memory_utilization x HBM
minus the TP-sharded weights) and shrinks with each offload; the trainer's resident state plus the
rollout's share must fit the device, or the trial is an `oom` (the cliff). Each "training step" is
reported through verlsweep.study_link.reporter_for(cfg), like the real runner does, and a prune
stops the trial with outcome `pruned`.

Test-only knobs (add with `+app.<key>=`): step_seconds (sleep per step), events (a file that gets
`start|end <trial> <time> <pid>` lines), together (with events: a trial waits, up to a minute, until
the `together` trials of its batch have all started, so a test of concurrency never depends on how
fast the launcher's workers start; with together_until, only trials numbered below it wait), outcome
(force an outcome, e.g. crash), truth (the planner's model under the stack's hidden constants, recorded in
MLflow: tests/support/standin/truth.py), raise (raise an exception), fail_trials (trial numbers that raise),
noise (per-step relative noise), slow_trials (trial numbers whose steps take step_seconds x 20), hold
(with events, a pair [a, b]: trial a ends only once trial b has started, up to a minute: a trial
that outlasts others by as long as they take to be replaced, however slow the machine), devices (a
file that gets `start|end <trial> <time> <visible devices> <trainer.n_gpus_per_node>
<HCCL_IF_BASE_PORT>` lines, from the trial's env: and verl: config).
"""
from __future__ import annotations

import math
import os
import random
import time
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from verlsweep.command import config_store
from verlsweep.common.result import TrialResult
from verlsweep.plan.predictor.inputs import params_b
from verlsweep.study_link import reporter_for

config_store.register()

ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor.fsdp_config"
REF = "verl.actor_rollout_ref.ref.fsdp_config"
TRUTH_KNOBS = (f"{ROLLOUT}.gpu_memory_utilization", f"{ROLLOUT}.tensor_model_parallel_size", f"{ACTOR}.param_offload",
               f"{ACTOR}.optimizer_offload", f"{REF}.param_offload")


def landscape(cfg: DictConfig) -> tuple[float | None, float]:
    """(tokens/s or None when it does not fit, peak GB)."""
    hbm = float(cfg.hardware.hbm_usable_gb)
    util = float(OmegaConf.select(cfg, f"{ROLLOUT}.gpu_memory_utilization"))
    tp = int(OmegaConf.select(cfg, f"{ROLLOUT}.tensor_model_parallel_size"))
    p_off = bool(OmegaConf.select(cfg, f"{ACTOR}.param_offload"))
    o_off = bool(OmegaConf.select(cfg, f"{ACTOR}.optimizer_offload"))
    r_off = bool(OmegaConf.select(cfg, f"{REF}.param_offload"))
    weights = 2.0 * params_b(cfg.model.config)                    # bf16 weights
    trainer = 3.0 + (0 if p_off else 9.0) + (0 if o_off else 14.0) + (0 if r_off else 5.0)
    peak = util * hbm + trainer
    kv = util * hbm - weights / tp
    if peak > hbm or kv <= 1.0:
        return None, min(peak, hbm)
    tp_eff = {1: 0.8, 2: 1.0, 4: 0.9, 8: 0.7}.get(tp, 0.6)
    tput = 1200.0 * (1 - math.exp(-kv / 12.0)) * tp_eff
    tput *= (0.8 if p_off else 1.0) * (0.9 if o_off else 1.0) * (0.96 if r_off else 1.0)
    return tput, peak


def _event(path: Any, kind: str, number: Any) -> None:
    if path:
        with open(path, "a") as f:
            f.write(f"{kind} {number} {time.time():.3f} {os.getpid()}\n")


def _devices(path: Any, kind: str, number: Any, cfg: DictConfig) -> None:
    if path:
        visible = OmegaConf.select(cfg, f"env.{cfg.hardware.visible_devices_env}", default=None)
        with open(path, "a") as f:
            f.write(f"{kind} {number} {time.time():.3f} {visible} {cfg.verl.trainer.n_gpus_per_node} "
                    f"{OmegaConf.select(cfg, 'env.HCCL_IF_BASE_PORT', default=None)}\n")


def _wait_for_start(path: str, number: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(path) as f:
            if any(line.startswith(f"start {number} ") for line in f):
                return
        time.sleep(0.05)


def _wait_for_batch(path: str, number: int, together: int, timeout_s: float = 60.0) -> None:
    """Until trials 0 .. (the end of `number`'s batch of `together`) have all started."""
    needed = (number // together + 1) * together
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(path) as f:
            if sum(line.startswith("start ") for line in f) >= needed:
                return
        time.sleep(0.05)


@hydra.main(version_base="1.3", config_path="../../conf", config_name="sweep")
def main(cfg: DictConfig) -> Any:
    app = OmegaConf.to_container(cfg.get("app") or OmegaConf.create({}), resolve=True)
    number = OmegaConf.select(cfg, "trial.number")
    _event(app.get("events"), "start", number)
    _devices(app.get("devices"), "start", number, cfg)
    if app.get("together") and app.get("events") and int(number) < int(app.get("together_until", 1 << 30)):
        _wait_for_batch(app["events"], int(number), int(app["together"]))
    try:
        if app.get("raise") or number in (app.get("fail_trials") or []):
            raise RuntimeError("synthetic task failure")
        if app.get("outcome"):
            return TrialResult(str(app["outcome"]), excerpt=f"forced outcome {app['outcome']}", backend="test")
        if app.get("truth"):       # the planner's model under a stack's hidden constants (standin/truth.py)
            from tests.support.standin import truth  # in-process sweeps only: the repo root is importable

            return truth.run_trial(cfg, {k.removeprefix("verl."): OmegaConf.select(cfg, k) for k in TRUTH_KNOBS})
        started = time.monotonic()
        tput, peak = landscape(cfg)
        step_s = float(app.get("step_seconds", 0.0))
        if number in (app.get("slow_trials") or []):
            step_s *= 20
        if tput is None:
            time.sleep(step_s)
            # the trainer's residency plus the rollout's util x HBM: vLLM's start-up check refuses it; else the
            # KV cache left over is too small (the phases the runners tell, verlsweep.trial.classify)
            phase = "vllm_start" if peak >= float(cfg.hardware.hbm_usable_gb) else "kv_cache"
            return TrialResult("oom", peak_memory_gb=peak, excerpt="RuntimeError: NPU out of memory (synthetic)",
                               backend="test", duration_s=time.monotonic() - started, failure_phase=phase)
        reporter = reporter_for(cfg)
        rng = random.Random(hash((number, tput)))
        noise = float(app.get("noise", 0.0))
        values = []
        for step in range(1, int(cfg.trial.steps) + 1):
            time.sleep(step_s)
            value = tput * (0.5 if step == 1 else 1.0) * (1 + noise * rng.uniform(-1, 1))
            values.append(value)
            if reporter.report(step, value):
                return TrialResult("pruned", objective=sum(values) / len(values), peak_memory_gb=peak, steps=step,
                                   backend="test", duration_s=time.monotonic() - started)
        measured = values[1:] or values
        return TrialResult("completed", objective=sum(measured) / len(measured), peak_memory_gb=peak,
                           steps=len(values), backend="test", duration_s=time.monotonic() - started)
    finally:
        hold = app.get("hold")
        if hold and app.get("events") and int(number) == int(hold[0]):
            _wait_for_start(app["events"], int(hold[1]))
        _devices(app.get("devices"), "end", number, cfg)
        _event(app.get("events"), "end", number)


if __name__ == "__main__":
    main()
