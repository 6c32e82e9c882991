"""What a person sees of the sweep after each batch: the status line, report.html and plots/ redrawn,
and the MLflow parent run's numbers (a step series) and files."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig

from hydra_plugins.verlsweep_sweeper import _outputs, _progress, _study, _tracking


class SweepView:
    def __init__(self, config: DictConfig, sweep_dir: Path, objectives: list[str], progress: _progress.Progress,
                 parent: str | None) -> None:
        self.config = config
        self.sweep_dir = sweep_dir
        self.objectives = objectives
        self.progress = progress
        self.parent = parent
        self._report_done = 0.0          # monotonic time the report was last written
        self._report_cost = 0.0          # seconds that took

    def after_batch(self, study: optuna.Study, n_trials: int, final: bool = False) -> list[Path]:
        """The status line (not at the end: the summary follows), the report, the parent run's update."""
        trials = _outputs.reportable(study.get_trials(deepcopy=False))
        finished = [t for t in trials if t.state.is_finished()]
        counts: dict[str, int] = {}
        for t in finished:
            counts[_outputs.outcome(t)] = counts.get(_outputs.outcome(t), 0) + 1
        best = _outputs.best_trials(study)
        if not final:
            self.progress.status(study, len(finished), best[0] if best else None, counts,
                                 _study.remaining(study, n_trials))
        # drawing costs seconds: with trials faster than that (runner=estimate) skip some batches, so
        # the report takes at most a third of the sweep's time; the last one always draws
        files: list[Path] = []
        if final or time.monotonic() - self._report_done >= 2 * self._report_cost:
            t0 = time.monotonic()
            files = _outputs.write_report(study, self.sweep_dir, self.objectives)
            self._report_done = time.monotonic()
            self._report_cost = self._report_done - t0
        metrics: dict[str, Any] = {"trials_done": len(finished), **{f"trials_{k}": v for k, v in counts.items()}}
        if best:
            metrics["best_objective"] = best[0].values[0]
        root = [self.sweep_dir / n for n in (_outputs.TRIALS_CSV, _outputs.BEST_YAML, _outputs.BEST_LAUNCH)]
        _tracking.update_parent_run(self.config, self.parent, len(finished), metrics,
                                    {"": root + [f for f in files if f.suffix == ".html"],
                                     "plots": [f for f in files if f.suffix == ".png"]})
        return files
