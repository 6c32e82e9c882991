"""Sweep outputs, rewritten after every batch and at the end, in the sweep dir:

    trials.csv      every trial of the study (all sweep processes): params, outcome, values, memory
                    (verlsweep.reconcile.trials_csv: `--status --repair` writes it too)
    best.yaml       the best feasible trial (single objective) or the Pareto front (multi-objective)
    best_launch.sh  the long run: the best trial's overrides recomposed with the long-run steps
    report.html     plots/ and the report (verlsweep.report)

and the final summary table on the terminal (rich).
"""
from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState

from verlsweep.common import crashpoint
from verlsweep.common.files import write_atomic
from verlsweep.common.labels import figure, knob_tokens, not_launched, short, show
from verlsweep.common.names import OVERRIDES_ATTR, PLACEHOLDER_ATTR, REUSED_FROM_ATTR, RULED_OUT_ATTR
from verlsweep.reconcile import confirmations
from verlsweep.reconcile.budget import budget_trials
from verlsweep.reconcile.check import TRIALS_CSV, outcome
from verlsweep.reconcile.trials_csv import reportable, write_trials

log = logging.getLogger(__name__)

SWEEP_DIR_ATTR = "verlsweep.sweep_dir"   # study user attr: the last sweep dir that wrote its outputs
BEST_YAML = "best.yaml"
BEST_LAUNCH = "best_launch.sh"
# overrides that tie a job to the sweep; a long run is a single run
_SWEEP_ONLY = ("trial.number=", "trial.study_name=", "trial.storage=", "trial.label=", "trial.name=",
               "tracking.parent_run_id=", "+trial.", "+tracking.parent_run_id=", "++hydra.job_logging.",
               "hydra.sweep.subdir=")


def feasible(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Completed ordinary trials within their constraints, but those whose long-run confirmation failed
    (verlsweep.reconcile.confirmations: such a config is never the best; the next confirmed one is)."""
    found = confirmations.of_study(trials)
    return [t for t in confirmations.ordinary(trials) if t.state == TrialState.COMPLETE
            and not t.user_attrs.get(PLACEHOLDER_ATTR) and all(v <= 0 for v in t.constraints.values())
            and confirmations.label(t.number, found) != confirmations.FAILS]


def best_trials(study: optuna.Study) -> list[FrozenTrial]:
    """Single objective: [best feasible trial]; multi-objective: the feasible Pareto front, best
    first objective first."""
    trials = feasible(study.get_trials(deepcopy=False))
    if not trials:
        return []
    signs = [1.0 if d == optuna.study.StudyDirection.MAXIMIZE else -1.0 for d in study.directions]
    key = lambda t: tuple(-s * v for s, v in zip(signs, t.values))  # noqa: E731
    if len(study.directions) == 1:
        return [min(trials, key=key)]
    front = []
    for t in trials:
        dominated = any(all(s * o >= s * v for s, o, v in zip(signs, other.values, t.values))
                        and any(s * o > s * v for s, o, v in zip(signs, other.values, t.values))
                        for other in trials)
        if not dominated:
            front.append(t)
    return sorted(front, key=key)


def launch_overrides(trial: FrozenTrial) -> list[str]:
    return [o for o in trial.user_attrs.get(OVERRIDES_ATTR, []) if not o.startswith(_SWEEP_ONLY)]


def _params(t: FrozenTrial, shown: Callable[[str, Any], Any]) -> dict[str, Any]:
    return {k: shown(k, v) for k, v in t.params.items()}


def _entry(t: FrozenTrial, objectives: list[str], shown: Callable[[str, Any], Any]) -> dict[str, Any]:
    return {
        "trial_number": t.number,
        "values": {name: float(v) for name, v in zip(objectives, t.values)},
        "peak_memory_gb": t.user_attrs.get("peak_memory_gb"),
        "params": _params(t, shown),
        "overrides": launch_overrides(t),
        "run_id": t.user_attrs.get("run_id"),
    }


class Outputs:
    """Writes the sweep's files. `compose_launch(overrides) -> bash text` builds best_launch.sh;
    `shown(param, value)` is a param's value as the command line has it (float steps rounded)."""

    def __init__(self, sweep_dir: Path, objectives: list[str], param_names: list[str],
                 compose_launch: Callable[[list[str]], str] | None, storage_url: str | None,
                 shown: Callable[[str, Any], Any]) -> None:
        self.dir = sweep_dir
        self.objectives = objectives
        self.param_names = param_names
        self.shown = shown
        self.compose_launch = compose_launch
        self.storage_url = storage_url
        self._launch_for: tuple[int, str | None] | None = None
        self._trials: list[FrozenTrial] = []

    def write(self, study: optuna.Study) -> list[FrozenTrial]:
        write_trials(self.dir, study, self.objectives, self.param_names, self.shown)
        crashpoint.reached("writing_outputs")
        best = best_trials(study)
        doc: dict[str, Any] = {"study_name": study.study_name, "storage": self.storage_url,
                               "directions": [d.name.lower() for d in study.directions],
                               "objectives": list(self.objectives)}
        if not best:
            doc["best"] = None
            doc["note"] = "no feasible completed trial yet"
        elif len(study.directions) == 1:
            doc.update(_entry(best[0], self.objectives, self.shown))
        else:
            doc["pareto_front"] = [_entry(t, self.objectives, self.shown) for t in best]
            doc["launch_trial"] = best[0].number   # best_launch.sh: the front's best first objective
        # no compose_launch: the app has no long run to write (verlsweep.study.hooks.AppHooks)
        doc["launch_script"] = BEST_LAUNCH if best and self.compose_launch else None
        write_atomic(self.dir / BEST_YAML, yaml.safe_dump(doc, sort_keys=False))
        self._trials = study.get_trials(deepcopy=False)
        found = confirmations.of_study(self._trials)
        said = found[best[0].number].sentence() if best and best[0].number in found else None
        if best and self.compose_launch and self._launch_for != (best[0].number, said):
            self._write_launch(best[0], study.study_name, self.compose_launch)
        return best

    def _write_launch(self, trial: FrozenTrial, study_name: str, compose: Callable[[list[str]], str]) -> None:
        # its own experiment name, stable per (study, trial): a re-run resumes its checkpoints
        experiment = f"{study_name}-trial{trial.number}"
        try:
            body = compose([*launch_overrides(trial), f"trial.name={experiment}"])
        except Exception as exc:  # noqa: BLE001 - outputs must not end the sweep
            log.warning("best_launch.sh: could not compose trial %d's overrides: %s", trial.number, exc)
            body = f"echo 'verlsweep could not compose this command: {str(exc)[:500]!r}' >&2\nexit 1\n"
        found = confirmations.of_study(self._trials)
        long_run = found[trial.number].sentence() if trial.number in found else (
            "not confirmed at the maximum lengths (study.long_run.confirm)")
        write_atomic(self.dir / BEST_LAUNCH, launch_header(trial, study_name, self.objectives, self.shown, experiment)
                     + f"# long run: {long_run}\n" + body, mode=0o755)
        self._launch_for = (trial.number, found[trial.number].sentence() if trial.number in found else None)


def launch_header(trial: FrozenTrial, study_name: str, objectives: list[str], shown: Callable[[str, Any], Any],
                  experiment: str) -> str:
    """Where the script's knobs and value come from, and how it resumes."""
    backend = trial.user_attrs.get("backend") or "unknown"
    values = ", ".join(f"{n}={figure(v)}" for n, v in zip(objectives, trial.values or []))
    how = ("predicted, not measured (runner=estimate: the planner's numbers; run it on the device to know)"
           if backend == "estimate" else f"measured by runner={backend}")
    when = trial.datetime_complete.strftime("%Y-%m-%d %H:%M") if trial.datetime_complete else "unknown"
    return ("#!/usr/bin/env bash\n"
            f"# verlsweep: the long run with the knobs of trial {trial.number} of study {study_name}\n"
            f"# {values}: {how}; trial finished {when}\n"
            f"# {', '.join(f'{k}={v}' for k, v in _params(trial, shown).items())}\n"
            + (f"# experiment {experiment}: checkpoints every save_freq steps; re-running this script resumes from "
               "the latest (trainer.resume_mode=auto)\n" if backend != "script" else
               "# the run's length, checkpoints and resume are the recipe script's own\n")
            + "set -euo pipefail\n")


def complete_message(study: optuna.Study, n_trials: int, objectives: list[str],
                     shown: Callable[[str, Any], Any]) -> str:
    """One line for a re-run of a finished study: what it found, and how to go on."""
    used = len([t for t in budget_trials(study.get_trials(deepcopy=False)) if t.state != TrialState.WAITING])
    best = best_trials(study)
    if best:
        b = best[0]
        values = ", ".join(f"{n}={figure(v)}" for n, v in zip(objectives, b.values))
        names = list(b.params)
        knobs = ", ".join(f"{short(k, names)}={shown(k, v)}" for k, v in b.params.items())
        found = f"best trial {b.number}: {values} ({knobs})"
    else:
        found = "no feasible trial"
    where = study.user_attrs.get(SWEEP_DIR_ATTR)
    # the sweep dir itself, as a finished sweep names it: a re-run (./quickstart's) has nothing else to point at
    tail = f"\nresults: {where} ({TRIALS_CSV}, {BEST_YAML}, {BEST_LAUNCH}, report.html)" if where else ""
    return (f"study {study.study_name} complete: {used}/{n_trials} trials, {found}; "
            f"raise hydra.sweeper.n_trials to continue{tail}")


def write_report(study: optuna.Study, sweep_dir: Path, objectives: list[str]) -> list[Path]:
    """report.html and plots/ (verlsweep.report); a failure there is logged, never ends the sweep."""
    try:
        from verlsweep.report import write_report as write

        return write(study, sweep_dir, objectives)
    except Exception as exc:  # noqa: BLE001
        log.warning("verlsweep: could not write the report: %s", exc)
        return []


def summary(study: optuna.Study, objectives: list[str], param_names: list[str], best: list[FrozenTrial],
            sweep_dir: Path, shown: Callable[[str, Any], Any], console: Any = None, verl: bool = True) -> None:
    """The trials as a table that fits 120 columns: the knobs as one short label per trial. `verl`:
    our own task's columns and files (peak memory, best_launch.sh)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=120)
    table = Table(title=f"study {study.study_name}", show_lines=False, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("outcome")
    for name in objectives:
        table.add_column(name, justify="right")
    # runner=estimate's numbers are the planner's (verlsweep.report.data.ESTIMATE): never headed as measured
    finished = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("backend")]
    predicted = bool(finished) and all(t.user_attrs["backend"] == "estimate" for t in finished)
    memory = verl and "peak_memory_gb" not in objectives
    if memory:
        table.add_column("pred. GB" if predicted else "peak GB", justify="right")
    table.add_column("s", justify="right")
    table.add_column("knobs", overflow="fold")
    best_numbers = {t.number for t in best}
    steps = {p: None for p in param_names}
    for t in reportable(study.get_trials(deepcopy=False)):
        if t.state == TrialState.WAITING:      # not run yet (a stopped trial's re-run): nothing to show
            continue
        steps.update({k: getattr(d, "step", None) for k, d in t.distributions.items()})
        measured = t.state == TrialState.COMPLETE and not t.user_attrs.get(PLACEHOLDER_ATTR)
        cells = [figure(v) for v in t.values] if measured and t.values else ["-"] * len(objectives)
        note = not_launched(t.user_attrs.get(REUSED_FROM_ATTR), t.user_attrs.get(RULED_OUT_ATTR))
        confirms = confirmations.confirms(t)
        note = note or (f"confirms {confirms}" if confirms is not None else "")
        shown_outcome = f"{outcome(t)} ({note})" if note else str(outcome(t))
        row = [f"{'*' if t.number in best_numbers else ''}{t.number}", shown_outcome, *cells]
        if memory:
            peak = t.user_attrs.get("peak_memory_gb")
            row.append(f"{peak:.1f}" if isinstance(peak, (int, float)) and measured else "-")
        took = t.user_attrs.get("duration_s")
        row.append(f"{took:.1f}" if isinstance(took, (int, float)) else "-")
        row.append(" ".join(knob_tokens({p: t.params[p] for p in param_names if p in t.params}, steps)))
        table.add_row(*row, style="bold green" if t.number in best_numbers else None)
    console.print(table)
    reused = sum(1 for t in reportable(study.get_trials(deepcopy=False))
                 if t.user_attrs.get(REUSED_FROM_ATTR) is not None)
    if reused:     # nothing to say when every proposal was measured
        console.print(f"{reused} proposal(s) reused a measurement of this study (nothing launched; "
                      "hydra.sweeper.remeasure=true measures again)")
    if best:
        b = best[0]
        knobs = "".join(f"\n  {k}={show(v, steps.get(k))}" for k, v in b.params.items())
        values = ", ".join(f"{n}={figure(v)}" for n, v in zip(objectives, b.values))
        front = f" (Pareto front: {len(best)} trials, see best.yaml)" if len(best) > 1 else ""
        said = " (predicted by the planner, runner=estimate)" if predicted else ""
        console.print(f"[bold]best[/bold] trial {b.number}: {values}{said}{front}{knobs}\n"
                      f"  -> {sweep_dir / BEST_YAML}" + (f", {sweep_dir / BEST_LAUNCH}" if verl else ""),
                      soft_wrap=True, highlight=False)
    else:
        console.print("[bold red]no feasible completed trial[/bold red]: see trials.csv for the outcomes")
