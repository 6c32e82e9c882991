"""The interface every trial runner implements (verl, script, estimate), and the typed trial it runs.

    runner = verlsweep.trial.runners.get_runner(name)
    out = runner.run(spec, reporter, env)           # -> RunOutput(result, details)

  spec      the prepared trial's RunSpec (verlsweep.prepare builds it once from the typed config): the
            validated Command (argv + the hardware's env), the planner's Clearance, the objective, the
            limits, the hardware and the runner's own options; runners never read the config itself,
  reporter  the sweeper's StepReporter (NullReporter in a single run): `report(step, value)` for each
            step's objective value as it arrives; True means stop now -> outcome `pruned`,
  env       environment for the trial process only (never set in the sweep's own os.environ,
            mlflow#15713): MLFLOW_TRACKING_URI, MLFLOW_RUN_ID, VERL_FILE_LOGGER_PATH and
            VERLSWEEP_TRIAL_DIR (TRIAL_DIR_ENV: the trial's own dir for its log and files).

A runner never raises for a failed trial (that is an outcome); it returns the TrialResult with the
RunDetails the tracker records (why the outcome was chosen, the per-step metrics, files worth keeping).
It raises ConfigError for input it cannot run (runner=script without a script).
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from verlsweep.command.compose import Command
from verlsweep.common.errors import Problem
from verlsweep.common.result import StepReporter, TrialResult
from verlsweep.config import Hardware, Limits, Objective, RunnerConfig
from verlsweep.plan import Preflight, Verdict


@dataclass(frozen=True)
class Clearance:
    """The planner's say on one trial, computed once before it launches (verlsweep.prepare): its preflight
    and whether that stops the launch."""

    preflight: Preflight                  # HBM verdict (None outside what it models) + Ray CPU check
    enforce: bool                         # plan.enforce: an infeasible prediction stops the launch
    unplannable: str | None = None        # why there is no HBM verdict (NotPlannable's message)
    cpus_stated: bool = False             # the CPU check is about stated CPUs, not this machine's

    @property
    def memory(self) -> Verdict | None:
        return self.preflight.memory

    @property
    def blocks_launch(self) -> bool:
        """plan.blocks_launch on the whole preflight: predicted infeasible and plan.enforce."""
        return self.enforce and not self.preflight.feasible


@dataclass(frozen=True)
class RunSpec:
    """Everything a runner reads of one trial, typed (verlsweep.config); built once by verlsweep.prepare."""

    command: Command
    runner: str                           # runner.name
    clearance: Clearance
    objective: Objective
    limits: Limits                        # runner.options.limits: the supervision of a launched trial
    hardware: Hardware
    steps: int                            # trial.steps
    trial_number: int | None
    # runner.*, typed by runner (verlsweep.config.runner): verl's ray_address, live_tail, schedule_*;
    # estimate's noise, seed, ...; script's script, env_map, forward, always
    options: RunnerConfig
    verl: Mapping[str, Any]               # composed verl values by dotted key
    knobs: tuple[str, ...]                # verl keys this job overrides (runner=script forwards them)
    log_tail_lines: int                   # tracking.log_tail_lines


@dataclass
class RunDetails:
    """Extras of one run for the tracker (not sent to the sweeper)."""

    reason: str = ""                                  # e.g. the matched pattern's label, "exit 0"
    step_log: Any = None                              # verlsweep.trial.metrics.StepLog of the trial
    artifacts: list[Path] = field(default_factory=list)   # files to attach to the MLflow run


@dataclass
class RunOutput:
    """What `Runner.run` produced: the outcome for the sweeper, the details for the tracker."""

    result: TrialResult
    details: RunDetails


@runtime_checkable
class Runner(Protocol):
    """What `get_runner(name)` returns. `name` equals the `runner.name` it is registered under."""

    name: str
    needs_files: bool       # its trial reads the model/data paths: they must exist (and its Ray runs here)
    uses_devices: bool      # its trial runs on this machine's accelerators: the device monitor watches them

    def problems(self, spec: RunSpec) -> list[Problem]:
        """Input this runner cannot run (runner=script without its script), found by prepare() before
        any run, monitor or study starts."""
        ...

    def run(self, spec: RunSpec, reporter: StepReporter, env: Mapping[str, str]) -> RunOutput:
        ...
