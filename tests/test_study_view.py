"""verlsweep.study.view: the report is redrawn after a batch, but not twice when the study is complete."""
from __future__ import annotations

from pathlib import Path

import optuna
from omegaconf import OmegaConf

from verlsweep.study import outputs, view


class _Silent:
    def status(self, *args, **kwargs) -> None:
        pass


def _drawn_after_each_call(monkeypatch, tmp_path: Path, n_trials: int, finished: int) -> list[bool]:
    drawn: list[int] = []
    monkeypatch.setattr(outputs, "write_report", lambda *args: drawn.append(1) or [])
    study = optuna.create_study(direction="maximize")
    for i in range(finished):
        study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=float(i)))
    sweep_view = view.SweepView(OmegaConf.create({}), tmp_path, ["objective"], _Silent(), parent=None)
    out = []
    for final in (False, True):
        before = len(drawn)
        sweep_view.after_batch(study, n_trials, final=final)
        out.append(len(drawn) > before)
    return out


def test_the_batch_that_completes_the_study_leaves_the_drawing_to_the_final_report(monkeypatch, tmp_path):
    assert _drawn_after_each_call(monkeypatch, tmp_path, n_trials=2, finished=2) == [False, True]


def test_a_batch_with_trials_left_draws_the_report(monkeypatch, tmp_path):
    assert _drawn_after_each_call(monkeypatch, tmp_path, n_trials=3, finished=2) == [True, True]


def test_redrawing_the_report_takes_at_most_a_tenth_of_the_sweeps_time(monkeypatch, tmp_path):
    clock = [100.0]
    drawn: list[float] = []

    def write_report(*args):       # each draw costs 2 s of the sweep's clock
        drawn.append(clock[0])
        clock[0] += 2.0
        return []
    monkeypatch.setattr(outputs, "write_report", write_report)
    monkeypatch.setattr(view.time, "monotonic", lambda: clock[0])
    study = optuna.create_study(direction="maximize")
    study.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=0.0))
    sweep_view = view.SweepView(OmegaConf.create({}), tmp_path, ["objective"], _Silent(), parent=None)
    for _ in range(60):            # batches of 1 s each
        sweep_view.after_batch(study, n_trials=1000)
        clock[0] += 1.0
    assert drawn[0] == 100.0                                 # the first batch draws at once
    assert all(b - a >= 20.0 for a, b in zip(drawn, drawn[1:])), drawn   # 2 s of drawing, then 18 s of trials
    assert 2.0 * len(drawn) <= 0.1 * (clock[0] - 100.0) + 2.0
