"""The trial of `python benchmarks/launcher_overhead.py`: the real conf/ tree and sweeper, and in place of
verl a task that sleeps `+bench.sleep_s` and appends `start|end <trial> <time> <pid>` to `+bench.events`:
the trial's own run, which the benchmark subtracts from the time between its ask and its tell."""
from __future__ import annotations

import os
import time

import hydra
from omegaconf import DictConfig

from verlsweep.command import config_store
from verlsweep.common.result import TrialResult

config_store.register()


def _event(path: str, kind: str, number: int) -> None:
    with open(path, "a") as f:
        f.write(f"{kind} {number} {time.time():.4f} {os.getpid()}\n")


@hydra.main(version_base="1.3", config_path="../conf", config_name="sweep")
def main(cfg: DictConfig) -> TrialResult:
    number = int(cfg.trial.number)
    _event(str(cfg.bench.events), "start", number)
    try:
        time.sleep(float(cfg.bench.sleep_s))
        return TrialResult("completed", objective=100.0 + number, steps=1, backend="test",
                           duration_s=float(cfg.bench.sleep_s))
    finally:
        _event(str(cfg.bench.events), "end", number)


if __name__ == "__main__":
    main()
