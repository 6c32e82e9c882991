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
