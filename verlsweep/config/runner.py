"""runner.*: how a trial is launched and supervised, one class per runner option (conf/runner/*.yaml).

Every key an option states is a field without a default (the YAML says its value and why):
runner=verl states the supervision limits every launching runner shares and its own Ray options;
runner=script states verl's (its `defaults:` list) plus the script's; runner=estimate launches nothing
and states only what its estimate needs. `RUNNERS` picks the class by `runner.name`.
"""
from __future__ import annotations

from dataclasses import dataclass

from verlsweep.config.node import ConfigNode


@dataclass(frozen=True)
class Limits:
    """The supervision limits of a launched trial, in seconds; None: that limit is off."""

    startup_timeout: float | None         # launch -> first training step
    stall_timeout: float | None           # between two steps, and after a fatal text
    timeout: float | None                 # the whole trial
    grace_period: float                   # SIGTERM -> SIGKILL of the process tree
    poll_interval: float


@dataclass(frozen=True)
class RunnerConfig(ConfigNode):
    """What every runner option states."""

    name: str
    entrypoint: tuple[str, ...]           # what is launched (recorded in command.json even when not)

    @property
    def limits(self) -> Limits:
        """A runner that launches nothing has nothing to supervise."""
        return Limits(startup_timeout=None, stall_timeout=None, timeout=None, grace_period=0.0, poll_interval=0.0)


def _limit(value: float | None) -> float | None:
    return None if value is None or value <= 0 else float(value)


@dataclass(frozen=True)
class VerlRunnerConfig(RunnerConfig):
    """runner=verl: the real trainer as a supervised subprocess (conf/runner/verl.yaml)."""

    startup_timeout: float | None         # 0 or null: off
    stall_timeout: float | None
    timeout: float | None
    grace_period: float
    poll_interval: float
    live_tail: int                        # lines of the trial's output shown live (0: none)
    ray_address: str | None               # null: the trial's own private Ray
    schedule_timeout: float | None        # the Ray scheduling watch (verlsweep.trial.ray_watch); 0/null: off
    schedule_poll: float

    @property
    def limits(self) -> Limits:
        return Limits(startup_timeout=_limit(self.startup_timeout), stall_timeout=_limit(self.stall_timeout),
                      timeout=_limit(self.timeout), grace_period=self.grace_period, poll_interval=self.poll_interval)


@dataclass(frozen=True)
class ScriptRunnerConfig(VerlRunnerConfig):
    """runner=script: a recipe script, its knobs set through its environment (conf/runner/script.yaml)."""

    script: str | None                    # required (verlsweep.command.recipe_capture.script_path says so)
    env_map: dict[str, str]               # optional: a variable the script reads -> the verl key it sets
    always: tuple[str, ...]               # verl keys a measurement needs, set whatever the script says


@dataclass(frozen=True)
class EstimateRunnerConfig(RunnerConfig):
    """runner=estimate: the planner's prediction as the measurement (conf/runner/estimate.yaml)."""

    noise: float
    seed: int
    first_step_slowdown: float
    step_seconds: float


RUNNERS: dict[str, type[RunnerConfig]] = {"verl": VerlRunnerConfig, "script": ScriptRunnerConfig,
                                          "estimate": EstimateRunnerConfig}
