"""One prepared trial: a composed config turned, once, into everything the trial needs before it launches.

    prepared = prepare(cfg)                 # ConfigError (problems name the keys) before anything launches
    prepared.config                         # the config read once, typed (verlsweep.config.TaskConfig)
    prepared.command                        # the validated verl argv + env (command.compose.Command)
    prepared.clearance                      # the planner's verdict, computed here and nowhere else
    prepared.runner.run(prepared.spec, reporter, env)   # runners get typed pieces, never the config
    prepared.launch_script()                # best_launch.sh's body (command.launch_script)

task.run, task.dry_run, task.check_fixed and the sweeper's best_launch.sh all start here, so a trial is
validated, planned and described the same way wherever it is looked at. Like task.py this module wires
the stages (config, command, plan, trial): the composed config is read once by verlsweep.config.read, and
only verlsweep.command, which turns its `verl:` node into verl's argv, reads it again; the planner, the
runners, the trial's tracking and the device monitor get typed pieces.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig

from verlsweep import plan as planner
from verlsweep.command import knobs as knobs_mod
from verlsweep.command import recipe_config, recipe_launch
from verlsweep.command.compose import Command, build_command
from verlsweep.command.launch_script import render_script, script_defaults
from verlsweep.common.errors import ConfigError
from verlsweep.config import Hardware, MonitorConfig, TaskConfig, read
from verlsweep.plan.predictor import ray_demand
from verlsweep.trial.runners import get_runner
from verlsweep.trial.runners.base import Clearance, Runner, RunSpec


@dataclass(frozen=True)
class Monitoring:
    """monitor.* with the hardware it reads: the device monitor around a run (task.py)."""

    enabled: bool
    device: str                        # hardware.device: which reader (npu-smi, nvidia-smi)
    visible_devices_env: str | None    # the variable that limits the devices a trial sees
    busy_gb: float                     # HBM in use above this: busy before launch (idle_reserved_gb + margin)
    interval: float

    @classmethod
    def of(cls, monitor: MonitorConfig, hardware: Hardware) -> Monitoring:
        return cls(enabled=monitor.enabled, device=hardware.device,
                   visible_devices_env=hardware.visible_devices_env or None,
                   busy_gb=(hardware.idle_reserved_gb or 0.0) + monitor.busy_margin_gb, interval=monitor.interval)


@dataclass(frozen=True)
class PreparedTrial:
    """A composed config, validated and planned once; what task.run, dry_run and check_fixed act on."""

    config: TaskConfig                 # the config read once: tracking (TrialRun.start) takes its tags from it
    command: Command
    runner: Runner
    spec: RunSpec                      # what the runner reads (command, clearance, objective, limits, ...)
    monitoring: Monitoring
    knobs: Mapping[str, Any]           # verl./env. keys this job overrides -> composed values (MLflow params)
    name: str                          # the MLflow run's name: `t07 util=0.90 tp=2`, else trial.name
    tracking: bool                     # tracking.enabled
    tracking_uri: str
    launch_defaults: Mapping[str, str] = field(default_factory=dict)   # launch script variables' defaults
    dry: bool = False

    @property
    def clearance(self) -> Clearance:
        return self.spec.clearance

    @property
    def runs_here(self) -> bool:
        """Whether the trial's Ray would start on this machine (runner=estimate launches nothing)."""
        return self.runner.needs_files

    def launch_script(self) -> str:
        """best_launch.sh's body for this trial: verl's recipe layout, env roots left to the node (a
        recipe script: the user's script with the best knobs)."""
        if self.command.script is not None:
            return recipe_launch.render(self.command.script, self.tracking_uri)
        return render_script(self.command, self.launch_defaults, self.tracking_uri)


def prepare(cfg: DictConfig, *, dry: bool = False, overrides: list[str] | None = None,
            settings: TaskConfig | None = None) -> PreparedTrial:
    """Validate and plan one composed trial config. `dry`: nothing will launch (a dry run, the sweeper's
    checks and launch script), so model/data paths that do not exist here are warnings, not problems.
    `overrides`: the job's overrides (default: Hydra's `hydra.overrides.task`), for the knobs.
    `settings`: `cfg` already read (verlsweep.config.read) by the caller.

    Raises ConfigError naming every offending key (a value of the wrong type, an unknown runner, our
    rules, verl's schema, missing paths, a bad CPU count) before anything starts."""
    jobs = knobs_mod.job_overrides() if overrides is None else overrides
    if recipe_config.is_recipe(cfg) and recipe_config.NODE not in cfg:
        recipe_config.apply(cfg, jobs)          # the script's own config, this job's knobs set its way
        settings = None
    task = read(cfg) if settings is None else settings
    runner = get_runner(task.runner.name)
    command = build_command(cfg, require_paths=runner.needs_files and not dry)
    spec = RunSpec(
        command=command, runner=runner.name, clearance=clearance(task, local=runner.needs_files),
        objective=task.objective, limits=task.runner.limits, hardware=task.hardware, steps=task.trial.steps,
        trial_number=task.trial.number, options=task.runner, verl=task.verl,
        knobs=tuple(knobs_mod.knobs(cfg, jobs, prefixes=("verl.",))), log_tail_lines=task.tracking.log_tail_lines,
    )
    if not dry and (found := runner.problems(spec)):
        raise ConfigError(found)     # before the caller starts a run, a monitor or a study
    from verlsweep.tracking.store import tracking_uri  # mlflow is imported only when prepared

    return PreparedTrial(
        config=task, command=command, runner=runner, spec=spec, monitoring=Monitoring.of(task.monitor, task.hardware),
        knobs=knobs_mod.knobs(cfg, jobs), name=task.trial.run_name, tracking=task.tracking.enabled,
        tracking_uri=tracking_uri(task), launch_defaults=script_defaults(command, cfg), dry=dry,
    )


def clearance(task: TaskConfig, *, local: bool) -> Clearance:
    """The planner on one trial: the HBM verdict (predict_cfg, one call) and verl's Ray CPU demand. `local`:
    the trial's Ray runs on this machine, so its CPUs count when the config states none. Logs nothing:
    task.run logs the verdict where it used to be planned (a dry run prints its own lines)."""
    try:
        memory: planner.Verdict | None = planner.predict_cfg(task)
        unplannable = None
    except planner.NotPlannable as exc:
        memory, unplannable = None, str(exc)
    cpus = ray_demand.check(task, local=False)         # CPUs the config states (ray_init.num_cpus, hardware.cpus)
    stated = cpus is not None
    if not stated and local:
        cpus = ray_demand.check(task, local=True)       # this machine's
    return Clearance(planner.Preflight(memory, cpus), enforce=task.plan.enforce, unplannable=unplannable,
                     cpus_stated=stated)


__all__ = ["Monitoring", "PreparedTrial", "clearance", "prepare"]
