"""What a person sees of the sweep after each batch: the status line, report.html and plots/ redrawn,
and the MLflow parent run's numbers (a step series) and files."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig

from verlsweep.reconcile import budget, confirmations
from verlsweep.reconcile.check import job_label
from verlsweep.reconcile.trials_csv import reportable
from verlsweep.study import outputs
from verlsweep.study.progress import Progress
from verlsweep.tracking import sweep_run

# the most of a sweep's wall time the live report's redraws may take (the final one is always drawn)
REPORT_SHARE = 0.1


class SweepView:
    def __init__(self, config: DictConfig, sweep_dir: Path, objectives: list[str], progress: Progress,
                 parent: str | None, report: bool = True) -> None:
        self.config = config
        self.report = report             # report.html and plots/ (the app's hooks say: verlsweep.study.hooks)
        self.sweep_dir = sweep_dir
        self.objectives = objectives
        self.progress = progress
        self.parent = parent
        self._report_done = 0.0          # monotonic time the report was last written
        self._report_cost = 0.0          # seconds that took

    def after_batch(self, study: optuna.Study, n_trials: int, final: bool = False) -> list[Path]:
        """The status line (not at the end: the summary follows), the report, the parent run's update."""
        # what counts towards n_trials: not a trial stopped in flight (its re-run is), not a long-run
        # confirmation (shown as `+N long-run`)
        every = study.get_trials(deepcopy=False)
        long_run = confirmations.of_study(reportable(every))
        trials = budget.budget_trials(every)
        finished = [t for t in trials if t.state.is_finished()]
        counts: dict[str, int] = {}
        for t in finished:
            counts[outputs.outcome(t)] = counts.get(outputs.outcome(t), 0) + 1
        best = outputs.best_trials(study)
        if not final:
            self.progress.status(study, len(finished), best[0] if best else None, counts,
                                 budget.remaining(study, n_trials), long_run=long_run)
        # drawing costs seconds: with trials faster than that (runner=estimate) skip some batches, so
        # redrawing takes at most REPORT_SHARE of the sweep's time; the last one always draws. After the
        # batch that completes the study the loop ends and that final draw follows at once: one is enough.
        files: list[Path] = []
        wait = self._report_cost * (1 / REPORT_SHARE - 1)
        if self.report and (final or (time.monotonic() - self._report_done >= wait
                                      and not budget.complete(study, n_trials))):
            t0 = time.monotonic()
            files = outputs.write_report(study, self.sweep_dir, self.objectives)
            self._report_done = time.monotonic()
            self._report_cost = self._report_done - t0
        metrics: dict[str, Any] = {"trials_done": len(finished), **{f"trials_{k}": v for k, v in counts.items()}}
        tags: dict[str, str] = {}
        if best:
            metrics["best_objective"] = best[0].values[0]
            tags = sweep_run.best_tags(best[0].number, job_label(best[0]), best[0].values[0], self.objectives[0])
        root = [self.sweep_dir / n for n in (outputs.TRIALS_CSV, outputs.BEST_YAML, outputs.BEST_LAUNCH)]
        sweep_run.update_sweep_run(self.config, self.parent, len(finished), metrics,
                                   {"": root + [f for f in files if f.suffix == ".html"],
                                     "plots": [f for f in files if f.suffix == ".png"]}, tags)
        return files
