"""The interface every trial runner implements (verl, script, estimate), and the typed trial it runs.

    runner = verlsweep.trial.runners.get_runner(name)
    out = runner.run(spec, reporter, env)           # -> RunOutput(result, details)

  spec      the prepared trial's RunSpec (verlsweep.prepare builds it once from the composed config):
            the validated Command (argv + the hardware's env), the planner's Clearance, the objective, the
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

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable

from verlsweep.command.compose import Command
from verlsweep.common.result import StepReporter, TrialResult
from verlsweep.plan import Preflight, Verdict


@dataclass(frozen=True)
class Objective:
    """objective.*: the metric the sweeper optimises and how a trial's steps become one value
    (verlsweep.trial.metrics.objective)."""

    metric: str = "perf/throughput"
    aggregate: str = "mean"
    warmup_steps: int = 1
    extra: tuple[str, ...] = ()           # further metrics aggregated the same way, recorded beside it


@dataclass(frozen=True)
class Limits:
    """runner.* supervision settings; a value <= 0 or null disables that limit."""

    startup_timeout: float | None = None
    stall_timeout: float | None = None
    timeout: float | None = None
    grace_period: float = 30.0
    poll_interval: float = 0.1


@dataclass(frozen=True)
class Hardware:
    """hardware.*: what the runners need to know of the machine the trial runs on."""

    name: str = "?"
    device: str = "npu"                   # npu | cuda
    devices_per_node: int = 8
    nnodes: int = 1
    hbm_usable_gb: float | None = None


@dataclass(frozen=True)
class Clearance:
    """The planner's say on one trial, computed once before it launches (verlsweep.prepare): its preflight
    and whether that stops the launch."""

    preflight: Preflight                  # HBM verdict (None outside what it models) + Ray CPU check
    enforce: bool = True                  # plan.enforce: an infeasible prediction stops the launch
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
    """Everything a runner reads of one trial, typed; built once by verlsweep.prepare."""

    command: Command
    runner: str                           # runner.name
    clearance: Clearance
    objective: Objective = Objective()
    limits: Limits = Limits()
    hardware: Hardware = Hardware()
    steps: int = 1                        # trial.steps
    trial_number: int | None = None
    # runner.* as plain values: each runner's own keys (estimate: noise, seed; script: script, env_map;
    # verl: ray_address, live_tail, schedule_timeout); the shared ones above are typed
    options: Mapping[str, Any] = field(default_factory=dict)
    verl: Mapping[str, Any] = field(default_factory=dict)   # composed verl values by dotted key
    knobs: tuple[str, ...] = ()           # verl keys this job overrides (runner=script forwards them)
    log_tail_lines: int = 200             # tracking.log_tail_lines


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

    def run(self, spec: RunSpec, reporter: StepReporter, env: Mapping[str, str]) -> RunOutput:
        ...
