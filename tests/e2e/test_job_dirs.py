"""A trial's files are in `<sweep dir>/<trial number>`, whatever ran before it, and a study resumed
into a new sweep dir stays reachable from its first one: `python sweep.py -m ... runner=estimate`
as subprocesses (seconds per trial, no device)."""
from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest

from tests.support.trial_helpers import new_mark, run_sweep

pytestmark = pytest.mark.slow

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
STUDY = "jobdirs"


def _sweep(tmp: Path, uri: str, *extra: str) -> None:
    # space=smoke: util choice(0.5,0.6); a seeded random sampler re-proposes a measured config (reused:
    # nothing launched), the guide is off so only the enqueued configs and the sampler pick trials
    args = ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "space=smoke", "hydra/sweeper/sampler=random",
            "hydra.sweeper.sampler.seed=0", "study.guide.top_k=0", f"paths.output_root={tmp / 'out'}",
            f"tracking.uri={uri}", f"hydra.sweeper.study_name={STUDY}", *extra]
    proc = run_sweep(tmp, args, new_mark(), multirun=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _trials(tmp: Path) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{tmp / 'verlsweep-optuna.db'}").get_trials()


def _sweep_dirs(tmp: Path) -> list[Path]:
    return sorted(p for p in (tmp / "out" / "sweeps").iterdir() if p.is_dir())


def _trial_of(job_dir: Path) -> int:
    """The trial a job dir's command belongs to, by its verl experiment name (`t07_util-0.5`)."""
    argv = json.loads((job_dir / "command.json").read_text())["argv"]
    name = next(a for a in argv if a.startswith("trainer.experiment_name=")).split("=", 1)[1]
    return int(name.split("_", 1)[0].lstrip("t"))


def test_every_launched_trial_writes_in_the_dir_named_by_its_number_after_a_reused_trial(store, tmp_path):
    # trial 0: the enqueued 0.6; trial 1: the sampler proposes 0.6 again (reused, nothing launched);
    # trial 2: 0.5, launched as the sweep's second job
    _sweep(tmp_path, store, f"hydra.sweeper.enqueue=[{{{UTIL}:0.6}}]", "hydra.sweeper.n_trials=3")
    trials = _trials(tmp_path)
    assert [t.number for t in trials if "reused_from" in t.user_attrs] == [1]
    (sweep_dir,) = _sweep_dirs(tmp_path)
    launched = sorted(p.parent for p in sweep_dir.glob("*/command.json"))
    assert [p.name for p in launched] == ["0", "2"]
    assert [_trial_of(p) for p in launched] == [0, 2]
    for t in trials:
        if "reused_from" not in t.user_attrs:
            assert Path(t.user_attrs["job_dir"]) == (sweep_dir / str(t.number)).resolve()


def test_a_resumed_study_names_new_trial_dirs_by_number_and_links_them_from_its_first_sweep_dir(store, tmp_path):
    _sweep(tmp_path, store, f"hydra.sweeper.enqueue=[{{{UTIL}:0.6}}]", "hydra.sweeper.n_trials=1")
    # the same study, a later command: a new timestamped sweep dir, whose first job is trial 1
    _sweep(tmp_path, store, f"hydra.sweeper.enqueue=[{{{UTIL}:0.5}}]", "hydra.sweeper.n_trials=2")
    first, second = _sweep_dirs(tmp_path)
    assert (second / "1" / "command.json").is_file() and _trial_of(second / "1") == 1
    assert not (second / "0").exists()
    # the study's first sweep dir reaches every trial: its own, and a relative link to the new one
    assert sorted(p.name for p in first.iterdir() if p.name.isdigit()) == ["0", "1"]
    assert (first / "1").is_symlink() and not Path(str((first / "1").readlink())).is_absolute()
    assert [_trial_of(first / n) for n in ("0", "1")] == [0, 1]
    assert {t.number: Path(t.user_attrs["job_dir"]).name for t in _trials(tmp_path)} == {0: "0", 1: "1"}


def test_a_second_study_in_the_same_fixed_sweep_dir_never_writes_into_the_first_ones_trial_dirs(store, tmp_path):
    fixed = f"hydra.sweep.dir={tmp_path / 'sweep'}"
    _sweep(tmp_path, store, fixed, f"hydra.sweeper.enqueue=[{{{UTIL}:0.6}}]", "hydra.sweeper.n_trials=1")
    _sweep(tmp_path, store, fixed, f"hydra.sweeper.enqueue=[{{{UTIL}:0.5}}]", "hydra.sweeper.n_trials=1",
           "hydra.sweeper.study_name=other")
    sweep_dir = tmp_path / "sweep"
    assert sorted(p.parent.name for p in sweep_dir.glob("*/command.json")) == ["0", "0-other"]
    assert f"{UTIL.split('.', 1)[1]}=0.6" in json.loads((sweep_dir / "0" / "command.json").read_text())["argv"]
    assert f"{UTIL.split('.', 1)[1]}=0.5" in json.loads((sweep_dir / "0-other" / "command.json").read_text())["argv"]
