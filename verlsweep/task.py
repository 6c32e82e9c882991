"""The job Hydra runs for every trial: prepare -> (dry run | refuse | track -> run -> finish).

The composition root: with verlsweep.prepare, the only modules that import every stage (command, plan,
trial, tracking). prepare() validates and plans the trial once; this module acts on the PreparedTrial.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from verlsweep import study_link
from verlsweep.command import knobs, recipe_config
from verlsweep.command.compose import Command
from verlsweep.common import crashpoint, slurm
from verlsweep.common.errors import ConfigError, MissingPath, Problem
from verlsweep.common.files import write_atomic
from verlsweep.common.labels import figure
from verlsweep.common.names import (
    COMMAND_JSON,
    COMMAND_SH,
    EDGE_PROBE,
    EDGE_PROBE_METRIC,
    EDGE_PROBE_TAG,
    EXCERPT_FILE,
    FILE_LOGGER_ENV,
    JOB_DIR_ATTR,
    METRICS_FILE,
    RESULT_FILE,
    RUN_ID_ATTR,
    TRIAL_DIR_ENV,
)
from verlsweep.common.result import TrialResult
from verlsweep.config import TaskConfig, read
from verlsweep.prepare import PreparedTrial, prepare
from verlsweep.tracking.mlflow_runs import TrialRun, redact_env
from verlsweep.tracking.store import TrackingUnavailable
from verlsweep.tracking.system_metrics import DevicePeak, TrialMonitor
from verlsweep.trial import devices
from verlsweep.trial.runners import Clearance, RunDetails

log = logging.getLogger("verlsweep")

BLOCKED = " - a real run would not launch it (plan.enforce)"


def output_dir() -> Path:
    """The job's own output dir (hydra.run.dir, or the sweep subdir of this trial)."""
    return Path(HydraConfig.get().runtime.output_dir)


def dry_run(cfg: DictConfig, settings: TaskConfig | None = None) -> None:
    """Print the trial as bash and write command.json, with the planner's verdict; launch nothing.
    `settings`: `cfg` already read (verlsweep.config.read)."""
    prepared = prepare(cfg, dry=True, settings=settings)
    trial = prepared.command
    for warning in trial.warnings:
        log.warning("dry run: %s", warning)
    path = trial.write(output_dir())
    sys.stdout.write(f"# verlsweep dry run: {path}\n# planner: {_verdict_line(prepared)}\n{_cpu_line(prepared)}"
                     f"{trial.to_bash()}")
    sys.stdout.flush()


def _verdict_line(prepared: PreparedTrial) -> str:
    """The planner's HBM verdict, said to be about the hardware profile's devices (a dry run often runs
    on a laptop for a node)."""
    about = f"hardware={prepared.spec.hardware.name}, predicted"
    clearance = prepared.clearance
    if clearance.memory is None:
        return f"({about}) no prediction ({clearance.unplannable})"
    blocked = BLOCKED if clearance.enforce and not clearance.memory.feasible else ""
    return f"({about}) {clearance.memory.summary()}{blocked}"


def _cpu_line(prepared: PreparedTrial) -> str:
    """The planner's Ray CPU check as a comment line, naming the machine it is about ('' when nothing
    can be checked). CPUs stated in the config (hardware.cpus, ray_init.num_cpus) are the node's: a
    verdict. Otherwise only this machine's CPUs are known (checked only when the trial's Ray would run
    here), and a dry run may be on a laptop for a node: say so rather than call the node's profile
    infeasible."""
    clearance = prepared.clearance
    cpus = clearance.preflight.cpus
    if cpus is None:
        return ""
    if clearance.cpus_stated:
        blocked = not cpus.ok and clearance.enforce
        return (f"# planner Ray CPUs (hardware={prepared.spec.hardware.name}, as stated): "
                f"{'ok' if cpus.ok else 'infeasible'}: {cpus.message()}" + (BLOCKED if blocked else "") + "\n")
    host = os.uname().nodename
    if cpus.ok:
        return f"# planner Ray CPUs (this machine, {host}): ok: {cpus.message()}\n"
    # a laptop dry run for a node: one line, not the whole verdict (a run here prints that and stops)
    return (f"# planner Ray CPUs (this machine, {host}): too few here: {cpus.brief()}; a run here would not "
            f"launch, on the node its CPUs decide (set hardware.cpus to check them)\n")


def hardware_name_warning(name: str, choice: str | None) -> str | None:
    """A hardware file copied to a new name whose `name:` still says the original: every run of
    it would be tagged, named and planned as the other machine."""
    if not choice or not name or choice == name or choice == "auto":
        return None
    return (f"hardware={choice} but its file says hardware.name: {name} (a copied hardware file? set "
            f"name: {choice} in it; runs are named and tagged by hardware.name)")


def check_fixed(cfg: DictConfig, varied: Collection[str], dry: bool) -> list[Problem]:
    """What every trial of a sweep would fail on, found once before the study: the composed
    config's problems outside the keys the search space varies. When it varies a config group, whose
    options set keys of their own, only the missing paths no varied group or root sets are sure."""
    groups = {g for g in varied if "." not in g}
    try:
        prepare(cfg, dry=dry, overrides=[])     # a trial's own preparation, less the knobs of its job
    except ConfigError as exc:
        problems = exc.problems
    else:
        return []

    def sure(p: Problem) -> bool:
        if isinstance(p, MissingPath):
            return p.key not in varied and not any(v == g or v.startswith(g + ".") for v in varied for g in p.groups)
        return not groups and p.key not in varied
    return [p for p in problems if sure(p)]


def run(cfg: DictConfig) -> Any:
    """Entry of sweep.py. Returns the trial's TrialResult to the sweeper (None for a dry run).

    prepare -> reporter -> MLflow child run -> refuse (planner) | monitor + runner -> finish the run. A
    single run exits 2 on bad input (nothing tracked) or when the planner refuses it before launch
    (tracked as `infeasible`), and 1 when the trial did not complete; in a multirun every failure is an
    outcome returned to the sweeper and tracked like any trial.
    """
    choice = HydraConfig.get().runtime.choices.get("hardware")
    multirun = is_multirun()
    out = output_dir()
    started = time.monotonic()
    settings: TaskConfig | None = None
    try:
        settings = read(cfg)                      # the config, read once: typed from here on
        if (warning := hardware_name_warning(settings.hardware.name, choice)) is not None:
            log.warning(warning)
        if settings.dry_run:
            dry_run(cfg, settings)
            return None
        prepared = prepare(cfg, settings=settings)
        recipe_config.log_notes(cfg)              # where the script disagrees with the hardware option
    except ConfigError as exc:
        if not multirun or isinstance(exc, TrackingUnavailable) or cfg.get("dry_run"):
            raise
        return _config_error(cfg, settings, exc, out, started)

    runner, backend, metric = prepared.runner, prepared.runner.name, prepared.spec.objective.metric
    trial = prepared.config.trial
    reporter = study_link.reporter(trial.number, trial.storage, trial.study_name)
    # where a later sweep finds this trial's files (result.json, processes.json) if this sweep dies
    reporter.record(JOB_DIR_ATTR, str(out.resolve()))
    edge = prepared.clearance.memory is not None and prepared.clearance.memory.edge_probe
    tracked = _start_tracking(prepared.config, prepared.knobs, edge_probe=edge) if prepared.tracking else None
    if tracked is not None:
        reporter.record(RUN_ID_ATTR, tracked.run_id)
    _write_command(prepared.command, out)
    _log_clearance(prepared.clearance)
    result = refusal(prepared)
    refused = result is not None
    details, peak = None, None
    try:
        if result is None:
            monitor = _start_monitor(prepared, tracked)
            try:
                ran = runner.run(prepared.spec, reporter, _trial_env(out, tracked))
            finally:
                peak = monitor.stop() if monitor is not None else None
            result, details = ran.result, ran.details
            if peak is not None:
                result.peak_device_hbm_gb = peak.hbm_gb
    except slurm.TrialKilled as exc:                              # the scheduler's signal; the tree is stopped
        result = TrialResult(exc.outcome, excerpt=str(exc), backend=backend, duration_s=time.monotonic() - started)
    except ConfigError as exc:                                    # the runner refused its input
        result = TrialResult("config_error", excerpt=str(exc), backend=backend,
                             refused_keys=[p.key for p in exc.problems])
        if not multirun:
            _finish(tracked, result, None, out, metric, reason="config error")
            raise
    except BaseException as exc:                                  # a bug or Ctrl-C: the run must still end
        result = TrialResult("crash", excerpt=f"{type(exc).__name__}: {exc}", backend=backend)
        _finish(tracked, result, None, out, metric, reason="verlsweep error")
        raise
    if tracked is not None:
        result.run_id = tracked.run_id
    if prepared.clearance.memory is not None:     # the report sets predictions next to measurements
        result.predicted = prepared.clearance.memory.metrics()
    _write_result(result, out)
    crashpoint.reached("trial_ended")
    _finish(tracked, result, details, out, metric, device_peak=peak)
    return _report(result, out, multirun, to_log=multirun, tracked=tracked, refused=refused)


def _write_result(result: TrialResult, out: Path) -> None:
    """The trial's own record of its outcome: a sweep that dies before telling it loses nothing, the
    next one on the study reads it (verlsweep.reconcile)."""
    write_atomic(out / RESULT_FILE, json.dumps(result.to_dict(), default=str) + "\n")


def refusal(prepared: PreparedTrial) -> TrialResult | None:
    """The planner's verdict before launch: predicted infeasible (HBM, or fewer Ray CPUs than verl
    reserves) under `plan.enforce` becomes the trial's outcome `infeasible` (a constraint violation for
    the sweeper), nothing launched."""
    preflight = prepared.clearance.preflight
    if preflight.feasible:
        return None
    if not prepared.clearance.blocks_launch:
        log.warning("planner predicts infeasible (plan.enforce=false, launching anyway): %s", preflight.reason)
        return None
    return TrialResult("infeasible", predicted_peak_gb=preflight.predicted_peak_gb, excerpt=preflight.reason,
                       backend=prepared.runner.name)


def _log_clearance(clearance: Clearance) -> None:
    """The planner's verdict in the job's log, as plan.preflight logs it."""
    if clearance.memory is not None:
        log.info("planner: %s", clearance.memory.summary())
    else:
        log.info("planner: no prediction (%s)", clearance.unplannable)
    if clearance.preflight.cpus is not None:
        log.info("planner: %s", clearance.preflight.cpus.message())


# ---- tracking around the runner

def _start_tracking(settings: TaskConfig, knob_values: Mapping[str, Any], *, edge_probe: bool = False) -> TrialRun:
    """The trial's MLflow run; an edge probe (launched inside the planner's error band) is named and
    tagged so."""
    job = slurm.job_id(os.environ)       # lets the sweeper end the run of a job Slurm killed
    tags = {slurm.JOB_ID_TAG: job} if job else {}
    if edge_probe:
        tags[EDGE_PROBE_TAG] = "true"
    return TrialRun.start(settings, knob_values, extra_tags=tags or None, name_word=EDGE_PROBE if edge_probe else None)


def _start_monitor(prepared: PreparedTrial, tracked: TrialRun | None) -> TrialMonitor | None:
    """Device and host readings for the trial's run while it runs; first a warning if a device the trial
    may use is already busy (a leftover trial or another job: the trial would OOM for a reason that is
    not its config)."""
    m = prepared.monitoring
    if not m.enabled or not prepared.runner.uses_devices:
        return None
    reader = devices.reader_for(m.device)
    visible = devices.visible_indices({**os.environ, **prepared.command.env}, m.visible_devices_env)
    for line in devices.busy_devices(reader, visible, m.busy_gb):
        log.warning("device busy before launch: %s", line)
    if tracked is None:
        return None
    return TrialMonitor(tracked.run_id, tracked.uri, m.interval, reader, visible).start()


def _trial_env(out: Path, tracked: TrialRun | None) -> dict[str, str]:
    env = {TRIAL_DIR_ENV: str(out.resolve()), FILE_LOGGER_ENV: str((out / METRICS_FILE).resolve())}
    if tracked is not None:
        env.update(tracked.env())
    return env


def _write_command(trial: Command, out: Path) -> list[Path]:
    """command.json / command.sh of the launched trial, credentials redacted (they become artifacts)."""
    script = {**trial.script, "env": redact_env(trial.script["env"])} if trial.script is not None else None
    shown = Command(argv=trial.argv, env=redact_env(trial.env), entrypoint_len=trial.entrypoint_len, script=script)
    sh = out / COMMAND_SH
    sh.write_text("#!/usr/bin/env bash\n" + shown.to_bash())
    return [shown.write(out), sh]


def _finish(tracked: TrialRun | None, result: TrialResult, details: RunDetails | None, out: Path,
            objective_metric: str, reason: str | None = None, device_peak: DevicePeak | None = None) -> None:
    if tracked is None:
        return
    files = [out / COMMAND_JSON, out / COMMAND_SH, *(details.artifacts if details else [])]
    if result.excerpt and not any(p.name == EXCERPT_FILE for p in files):
        excerpt = out / EXCERPT_FILE
        excerpt.write_text(f"# {result.outcome}\n{result.excerpt}\n")
        files.append(excerpt)
    tracked.finish(result, reason=reason or (details.reason if details else result.outcome), artifacts=files,
                   step_log=details.step_log if details else None, objective_metric=objective_metric,
                   device_peak=device_peak)


def _config_error(cfg: DictConfig, settings: TaskConfig | None, exc: ConfigError, out: Path,
                  started: float) -> TrialResult:
    """A multirun trial the config rules rejected: tracked as outcome config_error, nothing launched.
    Nothing was prepared: its run is made from the config as read (`settings`). A config that could not
    even be read (a value of the wrong type) has no tracking settings either: its outcome still goes to
    the sweeper, and the log says it has no run."""
    backend = settings.runner.name if settings is not None else str(cfg.runner.name)
    result = TrialResult("config_error", excerpt=str(exc), backend=backend,
                         duration_s=time.monotonic() - started, refused_keys=[p.key for p in exc.problems])
    log.error("trial rejected: %s", exc)
    if settings is None:
        log.warning("trial not tracked in MLflow: its config could not be read (above)")
    elif settings.tracking.enabled:
        tracked = _start_tracking(settings, knobs.knobs(cfg, knobs.job_overrides()))
        result.run_id = tracked.run_id
        _finish(tracked, result, None, out, settings.objective.metric, reason="config error")
    return result


def _report(result: TrialResult, out: Path, multirun: bool, to_log: bool = False,
            tracked: TrialRun | None = None, refused: bool = False) -> TrialResult:
    """The trial's one line. A single run the planner refused ends with exit 2 (as bad input does),
    one that did not complete with exit 1."""
    if refused and not multirun:
        _report(result, out, multirun=True)
        sys.stderr.write(f"verlsweep: the planner refused the trial before launch (plan.enforce=false launches "
                         f"it anyway):\n{result.excerpt}\n")
        raise SystemExit(2)
    line = f"verlsweep: trial {result.outcome}"
    if result.predicted.get(EDGE_PROBE_METRIC):
        line += f" ({EDGE_PROBE})"
    if result.objective is not None:
        line += f", objective {figure(result.objective)}"
    if result.peak_memory_gb is not None:
        line += f", peak {result.peak_memory_gb:.2f} GB"
    line += f", {result.steps} step(s), {result.duration_s:.1f} s, run {result.run_id}, dir {out}"
    if tracked is not None and tracked.experiment and not multirun:   # a sweep's parent run says it
        line += f"\n  MLflow experiment {tracked.experiment!r} at {tracked.uri}"
    if result.excerpt and not result.ok:
        line += f"\n  {result.excerpt.splitlines()[0][:300]}"
        if result.outcome == "no_devices":
            line += ("\n  verl found no accelerator: runner=verl needs the NPUs/GPUs the hardware group "
                     "describes; on a machine without them use runner=estimate.")
    if to_log:       # a sweep's trial: the sweeper prints one line per trial; the whole line stays in the job's log
        log.info("%s", line)
        return result
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if not multirun and not result.ok:
        raise SystemExit(1)
    return result


def is_multirun() -> bool:
    return HydraConfig.get().mode == RunMode.MULTIRUN


def exit_on_config_error(exc: ConfigError) -> None:
    """A single run ends with the message alone (exit 2), no traceback: it is the user's input. The
    run's dir Hydra made before the task started goes too: a refused command leaves nothing behind."""
    sys.stderr.write(f"verlsweep: {exc}\n")
    _remove_refused_run_dir()
    raise SystemExit(2)


HYDRA_OWN = (".hydra",)      # what Hydra writes into a run's dir before the task (and its job log, *.log)


def _remove_refused_run_dir() -> None:
    """The single run's dir, when it holds only what Hydra wrote, and the parents it leaves empty
    (outputs/runs/)."""
    out = output_dir()
    if is_multirun() or not out.is_dir() or any(p.name not in HYDRA_OWN and p.suffix != ".log" for p in out.iterdir()):
        return
    shutil.rmtree(out, ignore_errors=True)
    for parent in (out.parent, out.parent.parent):
        try:
            parent.rmdir()           # only when empty
        except OSError:
            break
