"""The stand-in trial of `python benchmarks/parallel_trials.py --slurm`: the real conf/ tree and sweeper
(`python benchmarks/parallel_trials_app.py -m ...`), and in place of verl a trial that sleeps the
search-efficiency cost model of its config, divided by a time scale (benchmarks/search_methods.py
cost_dh, the same model the fake clock of parallel_trials.py uses):

    OOM at vLLM start      start-up
    OOM in step 1          start-up + one step
    pruned after step k    start-up + (k + 1) steps      (step 1 counts twice: warm-up)
    completed              start-up + (steps + 1) steps

Each step's tokens/s goes to the study through verlsweep.study_link.reporter_for, as the real runner
reports it, so the sweep's own median pruner decides. Knobs (`+bench.<key>=`): truth (a JSON file
written by parallel_trials_slurm.py: per config, tokens/s or null (OOM), the OOM's phase, whether it
happens at start, step seconds at scale 1), startup_s (the model's start-up at scale 1), scale, events
(a file that gets `start|end <trial> <time> <pid>` lines: the trial's own busy time).
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from verlsweep.command import config_store
from verlsweep.common.result import TrialResult
from verlsweep.proofs.rules import KNOBS
from verlsweep.study_link import reporter_for

config_store.register()


def config_key(values: list[Any]) -> str:
    """The truth file's key of one config, from its knob values in verlsweep.proofs.rules.KNOBS order."""
    return "|".join(f"{v:.2f}" if isinstance(v, float) else str(v).lower() for v in values)


def _event(path: str, kind: str, number: int) -> None:
    with open(path, "a") as f:
        f.write(f"{kind} {number} {time.time():.3f} {os.getpid()}\n")


def trial(cfg: DictConfig, bench: dict) -> TrialResult:
    tok_s, phase, oom_at_start, step_s = json.loads(open(bench["truth"]).read())[
        config_key([OmegaConf.select(cfg, k) for k in KNOBS])]
    scale = float(bench["scale"])
    step = step_s / scale
    started = time.monotonic()
    time.sleep(float(bench["startup_s"]) / scale)
    if tok_s is None:
        if not oom_at_start:
            time.sleep(step)
        return TrialResult("oom", excerpt="RuntimeError: NPU out of memory (stand-in)", backend="test",
                           failure_phase=phase,
                           duration_s=time.monotonic() - started)
    reporter = reporter_for(cfg)
    values = []
    for n in range(1, int(cfg.trial.steps) + 1):
        time.sleep(step * (2 if n == 1 else 1))
        values.append(tok_s * (0.5 if n == 1 else 1.0))
        if reporter.report(n, values[-1]):
            return TrialResult("pruned", objective=sum(values) / len(values), steps=n, backend="test",
                               duration_s=time.monotonic() - started)
    return TrialResult("completed", objective=sum(values[1:]) / len(values[1:]), steps=len(values),
                       backend="test", duration_s=time.monotonic() - started)


@hydra.main(version_base="1.3", config_path="../conf", config_name="sweep")
def main(cfg: DictConfig) -> TrialResult:
    bench = OmegaConf.to_container(cfg.bench, resolve=True)
    number = int(cfg.trial.number)
    _event(bench["events"], "start", number)
    try:
        return trial(cfg, bench)
    finally:
        _event(bench["events"], "end", number)


if __name__ == "__main__":
    main()
