"""One prepared trial: a composed config turned, once, into everything the trial needs before it launches.

    prepared = prepare(cfg)                 # ConfigError (problems name the keys) before anything launches
    prepared.command                        # the validated verl argv + env (command.compose.Command)
    prepared.clearance                      # the planner's verdict, computed here and nowhere else
    prepared.runner.run(prepared.spec, reporter, env)   # runners get typed pieces, never the config
    prepared.launch_script()                # best_launch.sh's body (command.launch_script)

task.run, task.dry_run, task.check_fixed and the sweeper's best_launch.sh all start here, so a trial is
validated, planned and described the same way wherever it is looked at. Like task.py this module wires
the stages (command, plan, trial); the config is read here, and the pieces the runners and the task
read are typed (verlsweep/trial/runners/base.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from verlsweep import plan as planner
from verlsweep.command import knobs as knobs_mod
from verlsweep.command.compose import Command, build_command
from verlsweep.command.launch_script import render_script, script_defaults
from verlsweep.command.overrides import flatten
from verlsweep.common.labels import trial_label
from verlsweep.plan.predictor import ray_demand
from verlsweep.trial.runners import get_runner
from verlsweep.trial.runners.base import Clearance, Hardware, Limits, Objective, Runner, RunSpec


@dataclass(frozen=True)
class Monitoring:
    """monitor.* with the hardware it reads: the device monitor around a run (task.py)."""

    enabled: bool
    device: str                        # hardware.device: which reader (npu-smi, nvidia-smi)
    visible_devices_env: str | None    # the variable that limits the devices a trial sees
    busy_gb: float                     # HBM in use above this: busy before launch (idle_reserved_gb + margin)
    interval: float


@dataclass(frozen=True)
class PreparedTrial:
    """A composed config, validated and planned once; what task.run, dry_run and check_fixed act on."""

    cfg: DictConfig                    # the composed config: tracking (TrialRun.start) reads its tags from it
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
        """best_launch.sh's body for this trial: verl's recipe layout, env roots left to the node."""
        return render_script(self.command, self.launch_defaults, self.tracking_uri)


def prepare(cfg: DictConfig, *, dry: bool = False, overrides: list[str] | None = None) -> PreparedTrial:
    """Validate and plan one composed trial config. `dry`: nothing will launch (a dry run, the sweeper's
    checks and launch script), so model/data paths that do not exist here are warnings, not problems.
    `overrides`: the job's overrides (default: Hydra's `hydra.overrides.task`), for the knobs.

    Raises ConfigError naming every offending key (unknown runner, our rules, verl's schema, missing
    paths, a bad CPU count) before anything starts."""
    runner = get_runner(str(cfg.runner.name))
    command = build_command(cfg, require_paths=runner.needs_files and not dry)
    jobs = knobs_mod.job_overrides() if overrides is None else overrides
    spec = RunSpec(
        command=command, runner=runner.name, clearance=clearance(cfg, local=runner.needs_files),
        objective=objective(cfg), limits=limits(cfg),
        hardware=hardware(cfg), steps=int(cfg.trial.steps), trial_number=_int(cfg.trial.get("number")),
        options=_plain(cfg.runner), verl=flatten(cfg.verl),
        knobs=tuple(knobs_mod.knobs(cfg, jobs, prefixes=("verl.",))),
        log_tail_lines=int(OmegaConf.select(cfg, "tracking.log_tail_lines", default=200)),
    )
    from verlsweep.tracking.store import tracking_uri     # mlflow is imported only when prepared

    number, label = cfg.trial.get("number"), cfg.trial.get("label")
    return PreparedTrial(
        cfg=cfg, command=command, runner=runner, spec=spec, monitoring=monitoring(cfg),
        knobs=knobs_mod.knobs(cfg, jobs), name=trial_label(number, None, label) if label else str(cfg.trial.name),
        tracking=bool(cfg.tracking.enabled), tracking_uri=tracking_uri(cfg),
        launch_defaults=script_defaults(command, cfg), dry=dry,
    )


def clearance(cfg: DictConfig, *, local: bool) -> Clearance:
    """The planner on one trial: the HBM verdict (predict_cfg, one call) and verl's Ray CPU demand. `local`:
    the trial's Ray runs on this machine, so its CPUs count when the config states none. Logs nothing:
    task.run logs the verdict where it used to be planned (a dry run prints its own lines)."""
    try:
        memory: planner.Verdict | None = planner.predict_cfg(cfg)
        unplannable = None
    except planner.NotPlannable as exc:
        memory, unplannable = None, str(exc)
    cpus = ray_demand.check(cfg, local=False)          # CPUs the config states (ray_init.num_cpus, hardware.cpus)
    stated = cpus is not None
    if not stated and local:
        cpus = ray_demand.check(cfg, local=True)        # this machine's
    enforce = bool((cfg.get("plan") or {}).get("enforce", True))
    return Clearance(planner.Preflight(memory, cpus), enforce=enforce, unplannable=unplannable, cpus_stated=stated)


# ---- the config's pieces, typed (each read here and nowhere else)

def objective(cfg: DictConfig) -> Objective:
    node = cfg.get("objective") or {}
    return Objective(metric=str(node.get("metric", "perf/throughput")), aggregate=str(node.get("aggregate", "mean")),
                     warmup_steps=int(node.get("warmup_steps", 1)),
                     extra=tuple(str(m) for m in (node.get("extra") or [])))


def limits(cfg: DictConfig) -> Limits:
    runner = cfg.runner
    return Limits(startup_timeout=_limit(runner.get("startup_timeout")), stall_timeout=_limit(runner.get("stall_timeout")),
                  timeout=_limit(runner.get("timeout")), grace_period=float(runner.get("grace_period", 30)),
                  poll_interval=float(runner.get("poll_interval", 0.1)))


def hardware(cfg: DictConfig) -> Hardware:
    def get(key: str, default: Any) -> Any:
        value = OmegaConf.select(cfg, f"hardware.{key}", default=default)
        return default if value is None else value

    hbm = OmegaConf.select(cfg, "hardware.hbm_usable_gb", default=None)
    return Hardware(name=str(get("name", "?")), device=str(get("device", "npu")),
                    devices_per_node=int(get("devices_per_node", 1)), nnodes=int(get("nnodes", 1) or 1),
                    hbm_usable_gb=None if hbm is None else float(hbm))


def monitoring(cfg: DictConfig) -> Monitoring:
    env = OmegaConf.select(cfg, "hardware.visible_devices_env", default=None)
    return Monitoring(
        enabled=bool(OmegaConf.select(cfg, "monitor.enabled", default=False)),
        device=str(OmegaConf.select(cfg, "hardware.device", default="npu")),
        visible_devices_env=str(env) if env else None,
        busy_gb=float(OmegaConf.select(cfg, "hardware.idle_reserved_gb", default=0.0) or 0.0)
        + float(OmegaConf.select(cfg, "monitor.busy_margin_gb", default=0.0) or 0.0),
        interval=float(OmegaConf.select(cfg, "monitor.interval", default=5.0)),
    )


def _limit(value: object) -> float | None:
    return None if value is None or float(value) <= 0 else float(value)


def _int(value: object) -> int | None:
    return None if value is None else int(value)


def _plain(node: Any) -> dict[str, Any]:
    """A config node as plain values (build_command has checked that the whole config resolves)."""
    return OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node or {})


__all__ = ["Monitoring", "PreparedTrial", "hardware", "limits", "monitoring", "objective", "clearance", "prepare"]
