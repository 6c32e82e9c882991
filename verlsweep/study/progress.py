"""Live progress on the terminal (rich): one line per finished trial, a status line after each batch.

    t07  oom         -       util=0.90 tp=2 off=p,o   41.2 s
    t08  infeasible  -       util=0.95 tp=2 off=p,o   ruled out by trial 7
    [8/30] best objective 391.5 (t02) | completed 5, oom 2, infeasible 1 | ETA 3m10s

Everything else a trial prints (the planner's verdict, verl's output) stays in the job's own log, and
Optuna's and Hydra's launcher INFO lines are off unless `hydra.verbose` is set.
"""
from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf
from rich.console import Console

from verlsweep.common.labels import clip, figure, knob_tokens
from verlsweep.common.names import EDGE_PROBE
from verlsweep.common.result import OUTCOMES

WIDTH = 120                          # the summary table and these lines fit a 120-column terminal
_LAUNCHER_LOGGERS = ("hydra._internal.core_plugins.basic_launcher", "hydra_plugins.hydra_joblib_launcher")
JOB_CONSOLE_LEVEL = "hydra.job_logging.handlers.console.level"


def console() -> Console:
    """A tty gets its own width up to WIDTH; a log file or pipe exactly WIDTH."""
    if sys.stdout.isatty():
        return Console(width=min(Console().width, WIDTH))
    return Console(width=WIDTH, force_terminal=False, soft_wrap=False)


def verbose(config: DictConfig) -> bool:
    return bool(OmegaConf.select(config, "hydra.verbose", default=False))


def quiet_logs(config: DictConfig) -> None:
    """Silence Optuna's and the launcher's INFO lines unless hydra.verbose."""
    if verbose(config):
        return
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for name in _LAUNCHER_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)


def job_console_quiet(config: DictConfig) -> list[str]:
    """The overrides that keep a job's console to warnings unless hydra.verbose (its log file still gets
    everything); verlsweep's own trials get them (verlsweep.study.verl_hooks)."""
    if verbose(config) or OmegaConf.select(config, "hydra.job_logging.handlers.console", default=None) is None:
        return []
    return [f"++{JOB_CONSOLE_LEVEL}=WARNING"]       # ++: the default handler has no level key


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


def ordered(counts: dict[str, int]) -> list[tuple[str, int]]:
    """The outcomes in one fixed order (OUTCOMES', then any other by name), so a count stays in its
    place from one status line to the next instead of moving with its size."""
    rank = {name: i for i, name in enumerate(OUTCOMES)}
    return sorted(counts.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0]))


class Progress:
    def __init__(self, n_trials: int, steps: dict[str, Any], objective: str) -> None:
        self.console = console()
        self.n_trials = n_trials
        self.steps = steps
        self.objective = objective
        self.started = time.monotonic()
        self.done_here = 0

    def label(self, params: dict[str, Any]) -> str:
        return " ".join(knob_tokens(params, self.steps))

    def trial(self, number: int, outcome: str, values: list[float] | None, params: dict[str, Any],
              duration_s: float | None, excerpt: str | None, note: str = "", edge_probe: bool = False) -> None:
        """One line per trial; `note` says why nothing was launched (`reused t01`, `ruled out by trial 3`);
        an edge probe (launched inside the planner's error band) says so after its knobs."""
        self.done_here += 1
        value = figure(values[0]) if values and outcome == "completed" else "-"
        took = f"{duration_s:.1f} s" if isinstance(duration_s, (int, float)) else ""
        style = {"completed": "green", "pruned": "dim", "oom": "red", "infeasible": "yellow"}.get(outcome, "magenta")
        edge = f"{EDGE_PROBE}  " if edge_probe else ""
        tail = f"  {edge}{note or took}"
        # the label gives way, at a whole word, so the line keeps its time or note
        label = clip(self.label(params), self.console.width - len(f"t{number:02d}  {outcome:<12} {value:>9}  ")
                     - len(tail))
        line = f"t{number:02d}  [{style}]{outcome:<12}[/{style}] {value:>9}  {label}{tail}"
        self.console.print(line, overflow="ellipsis", no_wrap=True, highlight=False)
        failure = outcome not in ("completed", "pruned", "oom", "infeasible")
        if failure and excerpt:
            self.console.print(f"     {excerpt.strip().splitlines()[-1]}", style="dim", overflow="ellipsis",
                               no_wrap=True, highlight=False)

    def status(self, study: optuna.Study, finished: int, best: Any, counts: dict[str, int], left: int,
               long_run: Mapping[int, Any] | None = None) -> None:
        """`long_run`: the confirmations so far (verlsweep.reconcile.confirmations), outside n_trials."""
        elapsed = time.monotonic() - self.started
        eta = _duration(elapsed / self.done_here * left) if self.done_here and left else "-"
        best_text = (f"best {self.objective} {figure(best.values[0])} (t{best.number:02d})" if best is not None
                     else "no measured trial yet")
        outcomes = ", ".join(f"{k} {v}" for k, v in ordered(counts))
        failed = sum(1 for c in (long_run or {}).values() if c.status == "fails at max lengths")
        extra = f" +{len(long_run)} long-run" + (f" ({failed} failed)" if failed else "") if long_run else ""
        self.console.print(f"[bold][{finished}/{self.n_trials}{extra}][/bold] {best_text} | {outcomes} | "
                           f"elapsed {_duration(elapsed)}, ETA {eta}", overflow="ellipsis", no_wrap=True,
                           highlight=False)
