"""The supervised-process loop shared by the runners that launch a real training command.

Subclasses say what to launch (`command`); this module launches it in the trial dir, feeds every
step to the sweeper as it arrives, enforces runner.{startup_timeout, stall_timeout, timeout},
stops the whole process tree, and turns exit status + log into a TrialResult.
"""
from __future__ import annotations

import os
import queue
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from omegaconf import DictConfig

from verlsweep import classify, metrics
from verlsweep.compose import Trial
from verlsweep.livetail import LiveTail
from verlsweep.result import StepReporter, TrialResult
from verlsweep.runners.base import TRIAL_DIR_ENV, RunDetails
from verlsweep.supervise import Supervised, ray_isolation, remove_tree

LOG_FILE = "trial.log"
METRICS_FILE = "metrics.jsonl"
TAIL_FILE = "log_tail.txt"
EXCERPT_FILE = "excerpt.txt"
FILE_LOGGER_ENV = "VERL_FILE_LOGGER_PATH"


@dataclass(frozen=True)
class Limits:
    """runner.* supervision settings; a value <= 0 or null disables that limit."""

    startup_timeout: float | None
    stall_timeout: float | None
    timeout: float | None
    grace_period: float
    fatal_exit_wait: float
    poll_interval: float


def _limit(value: object) -> float | None:
    return None if value is None or float(value) <= 0 else float(value)


def limits(runner: DictConfig) -> Limits:
    return Limits(
        startup_timeout=_limit(runner.get("startup_timeout")),
        stall_timeout=_limit(runner.get("stall_timeout")),
        timeout=_limit(runner.get("timeout")),
        grace_period=float(runner.get("grace_period", 30)),
        fatal_exit_wait=float(runner.get("fatal_exit_wait", 60)),
        poll_interval=float(runner.get("poll_interval", 0.1)),
    )


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


class ProcessRunner:
    """Base of `verl` and `script`: subclasses implement `command`."""

    name = "process"

    def __init__(self) -> None:
        self.details: RunDetails | None = None

    def command(self, cfg: DictConfig, trial: Trial) -> tuple[list[str], dict[str, str]]:
        """The argv to launch and the env it adds (on top of the trial's)."""
        raise NotImplementedError

    def run(self, cfg: DictConfig, trial: Trial, reporter: StepReporter,
            env: Mapping[str, str]) -> TrialResult:
        trial_dir = Path(env.get(TRIAL_DIR_ENV) or os.getcwd()).resolve()
        trial_dir.mkdir(parents=True, exist_ok=True)
        argv, own_env = self.command(cfg, trial)

        proc_env = dict(os.environ)
        proc_env.pop("MLFLOW_RUN_ID", None)        # only ever the trial's own run
        proc_env.update(trial.env)
        proc_env.update(own_env)
        proc_env.update(env)
        proc_env.setdefault(FILE_LOGGER_ENV, str(trial_dir / METRICS_FILE))
        proc_env["PYTHONUNBUFFERED"] = "1"         # step lines must stream, not arrive at exit
        ray_tmp = ray_isolation(proc_env, cfg.runner.get("ray_address"))

        lim = limits(cfg.runner)
        obj = cfg.objective
        metric_name = str(obj.metric)
        scanner = classify.LogScanner(tail_lines=int(cfg.tracking.get("log_tail_lines", 200)))
        console_steps: queue.SimpleQueue[tuple[int, dict[str, float]]] = queue.SimpleQueue()
        # (time, last step printed before it) of the first fatal line; a later step means it was not fatal
        fatal_at: list[tuple[float, int]] = []
        printed = [0]
        title = f"trial {cfg.trial.number}" if cfg.trial.number is not None else "trial"
        live = LiveTail(title, int(cfg.runner.get("live_tail", 10)))

        def on_line(line: str) -> None:
            parsed = metrics.parse_console_line(line)
            if parsed:
                console_steps.put(parsed)
                printed[0] = max(printed[0], parsed[0])
            hit = scanner.feed(line)
            if hit is not None and not fatal_at:
                fatal_at.append((time.monotonic(), printed[0]))
            live.line(line, important=bool(parsed or hit))

        step_log = metrics.StepLog()
        jsonl = metrics.JsonlTail(Path(proc_env[FILE_LOGGER_ENV]))
        stopped: str | None = None
        detail: str | None = None
        leftovers: list[int] = []
        start = time.monotonic()
        last_progress = start

        def drain() -> bool:
            """Take new steps from both sources; report them; True if the sweeper says prune."""
            nonlocal last_progress
            new: list[tuple[int, dict[str, float]]] = []
            for step, data in jsonl.read():
                if step_log.add(step, data, "file"):
                    new.append((step, data))
            while True:
                try:
                    step, data = console_steps.get_nowait()
                except queue.Empty:
                    break
                if step_log.add(step, data, "console"):
                    new.append((step, data))
            prune = False
            for step, data in sorted(new, key=lambda s: s[0]):
                last_progress = time.monotonic()
                value = data.get(metric_name)
                if value is not None and reporter.report(step, float(value)):
                    prune = True
            return prune

        with live:
            sup = Supervised(argv, proc_env, trial_dir, trial_dir / LOG_FILE, on_line)
            try:
                while True:
                    rc = sup.wait(lim.poll_interval)
                    if drain():
                        stopped, detail = "pruned", "pruned by the sweeper"
                        break
                    if rc is not None:
                        break
                    now = time.monotonic()
                    stopped, detail = _over_limit(lim, now, start, last_progress, step_log, fatal_at)
                    if stopped:
                        break
                if stopped:
                    sup.stop(lim.grace_period)
            finally:
                leftovers = sup.close(lim.grace_period)
                remove_tree(ray_tmp)
        drain()   # steps written while the process was exiting still count (not reported: too late)

        verdict = classify.classify(sup.proc.returncode, scanner, steps=step_log.training_steps(), stopped=stopped,
                                    detail=detail)
        peak = step_log.peak_memory_gb()
        result = TrialResult(
            outcome=verdict.outcome,
            objective=metrics.objective(step_log, metric_name, str(obj.aggregate), int(obj.warmup_steps)),
            peak_memory_gb=peak,
            metrics={m: v for m in (obj.get("extra") or [])
                     if (v := metrics.objective(step_log, str(m), str(obj.aggregate), int(obj.warmup_steps)))
                     is not None},
            steps=step_log.training_steps(),
            excerpt=verdict.excerpt,
            run_id=env.get("MLFLOW_RUN_ID"),
            backend=self.name,
            duration_s=time.monotonic() - start,
        )
        reason = verdict.reason
        if leftovers and not stopped:
            reason += f"; stopped {len(leftovers)} leftover process(es) of the trial"
        files = self._write_files(trial_dir, scanner, verdict)
        self.details = RunDetails(reason=reason, step_log=step_log, artifacts=files)
        return result

    @staticmethod
    def _write_files(trial_dir: Path, scanner: classify.LogScanner, verdict: classify.Verdict) -> list[Path]:
        tail = trial_dir / TAIL_FILE
        tail.write_text("\n".join(scanner.tail) + "\n")
        files = [tail]
        if verdict.excerpt:
            excerpt = trial_dir / EXCERPT_FILE
            excerpt.write_text(f"# {verdict.outcome}: {verdict.reason}\n{verdict.excerpt}\n")
            files.append(excerpt)
        return files


def _over_limit(lim: Limits, now: float, start: float, last_progress: float, step_log: metrics.StepLog,
                fatal_at: list[tuple[float, int]]) -> tuple[str | None, str | None]:
    any_step = bool(len(step_log))
    if lim.timeout and now - start > lim.timeout:
        return "timeout", f"runner.timeout={lim.timeout:g}s exceeded"
    if not any_step and lim.startup_timeout and now - start > lim.startup_timeout:
        return "hang", f"no training step within runner.startup_timeout={lim.startup_timeout:g}s"
    if any_step and lim.stall_timeout and now - last_progress > lim.stall_timeout:
        return "hang", f"no new training step within runner.stall_timeout={lim.stall_timeout:g}s"
    # a fatal error was printed and no step followed it, but the process lingers (Ray waits on dead
    # actors, vLLM servers keep running): stop it rather than wait for the other limits
    if fatal_at and max(step_log.steps, default=0) <= fatal_at[0][1] and now - fatal_at[0][0] > lim.fatal_exit_wait:
        return "fatal", f"no exit within runner.fatal_exit_wait={lim.fatal_exit_wait:g}s after a fatal error"
    return None, None
