"""The interface every trial runner implements (verl, script, estimate).

    runner = verlsweep.trial.runners.get_runner(cfg.runner.name)
    result = runner.run(cfg, trial, reporter, env)      # -> TrialResult

  cfg       the trial's composed Hydra config (root: conf/sweep.yaml),
  trial     the validated verlsweep.command.compose.Command (argv + the hardware's env),
  reporter  the sweeper's StepReporter (NullReporter in a single run): `report(step, value)` for each
            step's objective value as it arrives; True means stop now -> outcome `pruned`,
  env       environment for the trial process only (never set in the sweep's own os.environ,
            mlflow#15713): MLFLOW_TRACKING_URI, MLFLOW_RUN_ID, VERL_FILE_LOGGER_PATH and
            VERLSWEEP_TRIAL_DIR (TRIAL_DIR_ENV: the trial's own dir for its log and files).

A runner never raises for a failed trial (that is an outcome); it returns the TrialResult.
After `run`, a runner may leave `runner.details` (RunDetails): why the outcome was chosen, the
per-step metrics it read and files worth keeping; the tracker records them when present.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from omegaconf import DictConfig

from verlsweep.command.compose import Command
from verlsweep.common.result import StepReporter, TrialResult



@runtime_checkable
class Runner(Protocol):
    """What `get_runner(name)` returns. `name` equals the `runner.name` it is registered under."""

    name: str

    def run(self, cfg: DictConfig, trial: Command, reporter: StepReporter,
            env: Mapping[str, str]) -> TrialResult:
        ...


@dataclass
class RunDetails:
    """Optional extras of one run for the tracker (not sent to the sweeper)."""

    reason: str = ""                                  # e.g. the matched pattern's label, "exit 0"
    step_log: Any = None                              # verlsweep.trial.metrics.StepLog of the trial
    artifacts: list[Path] = field(default_factory=list)   # files to attach to the MLflow run
