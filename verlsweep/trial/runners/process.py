"""The supervised-process loop shared by the runners that launch a real training command.

Subclasses say what to launch (`command`); this module launches it in the trial dir, feeds every
step to the sweeper as it arrives, enforces runner.{startup_timeout, stall_timeout, timeout},
stops the whole process tree, and turns exit status + log into a TrialResult. Everything it reads of
the trial comes typed in the RunSpec (verlsweep/trial/runners/base.py).
"""
from __future__ import annotations

import os
import queue
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from verlsweep.command.compose import Command
from verlsweep.common import crashpoint
from verlsweep.common.errors import Problem
from verlsweep.common.names import (
    EXCERPT_FILE,
    FILE_LOGGER_ENV,
    LOG_FILE,
    METRICS_FILE,
    MLFLOW_RUN_ID_ENV,
    PROCESSES_ATTR,
    TAIL_FILE,
    TRIAL_DIR_ENV,
)
from verlsweep.common.result import StepReporter, TrialResult
from verlsweep.config import Hardware, Limits, VerlRunnerConfig
from verlsweep.trial import classify, metrics, orphans, ray_cluster
from verlsweep.trial.livetail import LiveTail
from verlsweep.trial.ray_watch import RayWatch
from verlsweep.trial.runners.base import RunDetails, RunOutput, RunSpec
from verlsweep.trial.supervise import Supervised, ray_isolation, remove_tree, runtime_env_overrides

IDENTITY_EVERY_S = 5.0           # how often the record follows new processes (Ray starts workers late)


def resolve_entrypoint(argv: list[str], entrypoint_len: int) -> list[str]:
    """`python` -> this interpreter; relative files of the entrypoint -> absolute (the trial runs in
    its own dir)."""
    out = list(argv)
    for i in range(min(entrypoint_len, len(out))):
        arg = out[i]
        if i == 0 and arg in ("python", "python3"):
            out[i] = sys.executable
        elif not arg.startswith("-") and not os.path.isabs(arg) and os.path.exists(arg):
            out[i] = os.path.abspath(arg)
    return out


class StepWatch:
    """What the supervisor learns while the trial runs: steps from verl's file logger and console
    lines (one StepLog), the classifier's scan of every line, and when the last progress was made."""

    def __init__(self, spec: RunSpec, metrics_path: Path, reporter: StepReporter) -> None:
        self.metric_name = spec.objective.metric
        self.reporter = reporter
        self.scanner = classify.LogScanner(tail_lines=spec.log_tail_lines)
        self.step_log = metrics.StepLog()
        self._jsonl = metrics.JsonlTail(metrics_path)
        self._console: queue.SimpleQueue[tuple[int, dict[str, float]]] = queue.SimpleQueue()
        self._printed = 0                   # last step number seen on the console
        self._latest = 0                    # last step number taken from either source
        # (time, last step seen then) of a fatal text no step has followed yet; a later step means the
        # trial lived on (a handled exception logged with its traceback) and the next one restarts it
        self.fatal_at: tuple[float, int] | None = None
        self.start = time.monotonic()
        self.last_progress = self.start

    def on_line(self, line: str) -> bool:
        """Feed one console line (called from the log-reader thread); True if it matters to a reader."""
        line = metrics.strip_ansi(line)
        parsed = metrics.parse_console_line(line)
        if parsed:
            self._console.put(parsed)
            self._printed = max(self._printed, parsed[0])
        fatal = self.scanner.feed(line)
        seen = max(self._printed, self._latest)
        if fatal and (self.fatal_at is None or seen > self.fatal_at[1]):
            self.fatal_at = (time.monotonic(), seen)
        return bool(parsed or fatal)

    def drain(self) -> bool:
        """Take new steps from both sources and report them; True if the sweeper says prune."""
        new: list[tuple[int, dict[str, float]]] = []
        for step, data in self._jsonl.read():
            if self.step_log.add(step, data, "file"):
                new.append((step, data))
        while True:
            try:
                step, data = self._console.get_nowait()
            except queue.Empty:
                break
            if self.step_log.add(step, data, "console"):
                new.append((step, data))
        prune = False
        for step, data in sorted(new, key=lambda s: s[0]):
            self.last_progress = time.monotonic()
            self._latest = max(self._latest, step)
            value = data.get(self.metric_name)
            if value is not None and self.reporter.report(step, float(value)):
                prune = True
        return prune

    def fatal_pending(self) -> bool:
        """A fatal text was printed and no training step has followed it."""
        return self.fatal_at is not None and max(self._latest, self._printed) <= self.fatal_at[1]

    def over_limit(self, lim: Limits, now: float) -> tuple[str | None, str | None]:
        """The limit this trial has crossed, as (stopped, detail), or (None, None)."""
        any_step = bool(len(self.step_log))
        if lim.timeout and now - self.start > lim.timeout:
            return "timeout", f"runner.timeout={lim.timeout:g}s exceeded"
        if self.fatal_at is not None and lim.stall_timeout and self.fatal_pending():
            # A fatal text alone never ends a trial (a logged, handled exception prints one too); a
            # process that then stops making progress does (Ray waits on dead actors, vLLM servers
            # linger). Until then the other limits wait, so the reason names the fatal text.
            if now - self.fatal_at[0] > lim.stall_timeout:
                return "fatal", (f"no training step within runner.stall_timeout={lim.stall_timeout:g}s "
                                 "after a fatal error")
            return None, None
        if not any_step and lim.startup_timeout and now - self.start > lim.startup_timeout:
            return "hang", f"no training step within runner.startup_timeout={lim.startup_timeout:g}s"
        if any_step and lim.stall_timeout and now - self.last_progress > lim.stall_timeout:
            return "hang", f"no new training step within runner.stall_timeout={lim.stall_timeout:g}s"
        return None, None


def process_env(spec: RunSpec, own_env: Mapping[str, str], env: Mapping[str, str],
                trial_dir: Path) -> tuple[dict[str, str], str | None]:
    """The trial process's environment (ours, the trial's, the runner's, the tracker's, in that order of
    precedence) and its private Ray temp dir, removed after the trial."""
    proc_env = dict(os.environ)
    proc_env.pop(MLFLOW_RUN_ID_ENV, None)        # only ever the trial's own run
    proc_env.update(spec.command.env)
    proc_env.update(own_env)
    proc_env.update(env)
    proc_env.setdefault(FILE_LOGGER_ENV, str(trial_dir / METRICS_FILE))
    proc_env["PYTHONUNBUFFERED"] = "1"           # step lines must stream, not arrive at exit
    ray_tmp = ray_isolation(proc_env, options(spec).ray_address)
    return proc_env, ray_tmp


def options(spec: RunSpec) -> VerlRunnerConfig:
    """runner=verl's options, which runner=script states too (its `defaults:` list)."""
    assert isinstance(spec.options, VerlRunnerConfig), spec.options
    return spec.options


def actor_env_args(trial: Command, env: Mapping[str, str], argv: list[str], trial_dir: Path) -> list[str]:
    """With `runner.ray_address` or a multi-node trial's cluster (ray_cluster.py), the trial's own environment
    (the hardware's and `env.*` variables, the tracker's MLFLOW_* and the file logger's path) as Ray
    runtime_env overrides for verl's actors, which such a cluster starts without the driver's environment."""
    actor_env = {**trial.env, **env}
    actor_env.setdefault(FILE_LOGGER_ENV, str(trial_dir / METRICS_FILE))
    return runtime_env_overrides(actor_env, argv)


def multi_node_cluster(hardware: Hardware, ray_address: str | None, proc_env: dict[str, str],
                       trial_dir: Path) -> ray_cluster.RayCluster | None:
    """The Ray cluster over the allocation for a multi-node trial inside Slurm; None keeps the private
    local Ray of a single-node trial."""
    if not ray_cluster.wanted(hardware.nnodes, proc_env, ray_address):
        return None
    hosts = ray_cluster.allocation_hosts(proc_env)[:hardware.nnodes]
    cpus = proc_env.get("SLURM_CPUS_PER_TASK")
    spec = ray_cluster.ClusterSpec(hosts=hosts, devices_per_node=hardware.devices_per_node,
                                   resource="GPU" if hardware.device == "cuda" else "NPU",
                                   cpus_per_node=int(cpus) if cpus else None)
    return ray_cluster.RayCluster(spec, proc_env, trial_dir)


class IdentityRecorder:
    """Keeps the trial's process identity (verlsweep.trial.orphans.Identity) in the trial dir and with
    the sweep, so the next sweep on the study can stop this trial's processes if this sweep dies."""

    def __init__(self, sup: Supervised, ray_tmp: Path | str | None, trial_dir: Path, reporter: StepReporter) -> None:
        self.sup = sup
        self.ray_tmp = str(ray_tmp) if ray_tmp else None
        self.trial_dir = trial_dir
        self.reporter = reporter
        self._pids: set[int] = set()
        self._next = 0.0

    def maybe_record(self, now: float) -> None:
        if now < self._next:
            return
        self._next = now + IDENTITY_EVERY_S
        members = self.sup.members()
        pids = {p.pid for p in members}
        if not pids or pids <= self._pids:
            return
        self._pids |= pids
        identity = orphans.Identity(host=socket.gethostname(), session=self.sup.pgid, mark=self.sup.mark,
                                    ray_tmp=self.ray_tmp, trial_dir=str(self.trial_dir),
                                    processes=orphans.describe(members))
        try:
            identity.write(self.trial_dir)
        except OSError:
            pass
        record = getattr(self.reporter, "record", None)
        if record is not None:
            record(PROCESSES_ATTR, identity.to_dict())


class ProcessRunner:
    """Base of `verl` and `script`: subclasses implement `command`."""

    name = "process"
    needs_files = True           # verl reads the model and data: their paths must exist
    uses_devices = True          # the trial runs on this machine's devices: the monitor watches them

    def command(self, spec: RunSpec) -> tuple[list[str], dict[str, str]]:
        """The argv to launch and the env it adds (on top of the trial's)."""
        raise NotImplementedError

    def problems(self, spec: RunSpec) -> list[Problem]:
        return []       # verl's own input is checked when the command is built (verlsweep.command)

    def run(self, spec: RunSpec, reporter: StepReporter, env: Mapping[str, str]) -> RunOutput:
        trial_dir = Path(env.get(TRIAL_DIR_ENV) or os.getcwd()).resolve()
        trial_dir.mkdir(parents=True, exist_ok=True)
        argv, own_env = self.command(spec)
        proc_env, ray_tmp = process_env(spec, own_env, env, trial_dir)
        ray_address = options(spec).ray_address
        cluster = multi_node_cluster(spec.hardware, ray_address, proc_env, trial_dir)
        if ray_address or cluster is not None:
            argv = [*argv, *actor_env_args(spec.command, env, argv, trial_dir)]
        watch = StepWatch(spec, Path(proc_env[FILE_LOGGER_ENV]), reporter)
        try:
            if cluster is not None:
                proc_env["RAY_ADDRESS"] = cluster.start(timeout=spec.limits.startup_timeout or 600.0)
            # the cluster's head uses the private Ray temp dir too: removed after the cluster is down
            stopped, detail, leftovers, returncode = self._supervise(spec, argv, proc_env, trial_dir,
                                                                     None if cluster else ray_tmp, watch)
        finally:
            if cluster is not None:
                cluster.stop(spec.limits.grace_period)
                remove_tree(ray_tmp)
        watch.drain()   # steps written while the process was exiting still count

        diagnosis = classify.classify(returncode, watch.scanner, steps=watch.step_log.training_steps(),
                                    stopped=stopped, detail=detail)
        result = self._result(spec, watch, diagnosis, env)
        reason = diagnosis.reason
        if leftovers and not stopped:
            reason += f"; stopped {len(leftovers)} leftover process(es) of the trial"
        files = self._write_files(trial_dir, watch.scanner, diagnosis)
        return RunOutput(result, RunDetails(reason=reason, step_log=watch.step_log, artifacts=files))

    def _supervise(self, spec: RunSpec, argv: list[str], proc_env: dict[str, str], trial_dir: Path,
                   ray_tmp: str | None, watch: StepWatch) -> tuple[str | None, str | None, list[int], int | None]:
        """Launch, watch until exit / prune / a limit, stop the whole tree. Returns (stopped, detail,
        leftover pids, exit status)."""
        lim = spec.limits
        title = f"trial {spec.trial_number}" if spec.trial_number is not None else "trial"
        live = LiveTail(title, options(spec).live_tail)
        stopped: str | None = None
        detail: str | None = None

        def on_line(line: str) -> None:
            clean = metrics.strip_ansi(line)
            live.line(clean, important=watch.on_line(clean))

        with live, RayWatch.for_trial(options(spec), ray_tmp, proc_env) as ray_watch:
            sup = Supervised(argv, proc_env, trial_dir, trial_dir / LOG_FILE, on_line)
            recorder = IdentityRecorder(sup, ray_tmp, trial_dir, watch.reporter)
            try:
                while True:
                    rc = sup.wait(lim.poll_interval)
                    if watch.drain():
                        stopped, detail = "pruned", "pruned by the sweeper"
                        break
                    if rc is None:
                        recorder.maybe_record(time.monotonic())
                        if len(watch.step_log):
                            crashpoint.reached("trial_running")
                    if rc is not None:
                        break
                    stopped, detail = watch.over_limit(lim, time.monotonic())
                    if not stopped:
                        stopped, detail = ray_watch.check(time.monotonic(), bool(len(watch.step_log)))
                    if stopped:
                        break
                if stopped:
                    sup.stop(lim.grace_period)
            finally:
                leftovers = sup.close(lim.grace_period)
                remove_tree(ray_tmp)
        return stopped, detail, leftovers, sup.proc.returncode

    def _result(self, spec: RunSpec, watch: StepWatch, diagnosis: classify.Diagnosis,
                env: Mapping[str, str]) -> TrialResult:
        obj = spec.objective
        step_log = watch.step_log

        def aggregate(metric: str) -> float | None:
            return metrics.objective(step_log, metric, obj.aggregate, obj.warmup_steps)

        return TrialResult(
            outcome=diagnosis.outcome,
            objective=aggregate(obj.metric),
            peak_memory_gb=step_log.peak_memory_gb(),
            metrics={m: v for m in obj.extra if (v := aggregate(m)) is not None},
            steps=step_log.training_steps(),
            excerpt=diagnosis.excerpt,
            failure_phase=diagnosis.phase,
            run_id=env.get(MLFLOW_RUN_ID_ENV),
            backend=self.name,
            duration_s=time.monotonic() - watch.start,
        )

    @staticmethod
    def _write_files(trial_dir: Path, scanner: classify.LogScanner, diagnosis: classify.Diagnosis) -> list[Path]:
        tail = trial_dir / TAIL_FILE
        tail.write_text("\n".join(scanner.tail) + "\n")
        files = [tail]
        if diagnosis.excerpt:
            excerpt = trial_dir / EXCERPT_FILE
            excerpt.write_text(f"# {diagnosis.outcome}: {diagnosis.reason}\n{diagnosis.excerpt}\n")
            files.append(excerpt)
        return files
