"""Where a trial's job writes: `<sweep dir>/<trial number>`, and one dir that reaches every trial of a study.

Hydra's launchers name a job's dir by `hydra.sweep.subdir`, `${hydra.job.num}` by default: the job's
index within one sweep process (hydra/core/utils.py run_job joins hydra.sweep.dir and the subdir;
hydra/_internal/core_plugins/basic_launcher.py sets hydra.job.num = initial_job_idx + i, as the joblib
and submitit launchers do). A reused trial launches nothing and a resumed sweep starts at 0 again, so
job numbers drift from trial numbers. The sweeper sets the subdir per job to the trial's number instead.

A study resumed by a later command gets a new timestamped sweep dir (Hydra's default), and its new
trials are written there; the study's home (the first sweep dir that ran it, a study user attr) gets a
relative symlink `<home>/<n>` to each of them, so `ls <home>` shows every trial the study launched.
"""
from __future__ import annotations

import logging
import os
from pathlib import Path

import optuna

from verlsweep.common.labels import path_safe

log = logging.getLogger(__name__)

HOME_ATTR = "verlsweep.home_dir"    # study user attr: the sweep dir that holds (or links) every trial's job dir
SUBDIR_KEY = "hydra.sweep.subdir"


def subdir(sweep_dir: Path, number: int, study_name: str) -> str:
    """The trial's job dir name: its number, unless that name is already taken in this sweep dir,
    which only another study can have done (a study never launches the same number twice); then
    the study's name is appended, so two studies sharing a fixed hydra.sweep.dir never mix files."""
    name = str(number)
    taken = sweep_dir / name
    if taken.exists() or taken.is_symlink():
        return f"{number}-{path_safe(study_name)}"
    return name


def override(name: str) -> str:
    return f"{SUBDIR_KEY}={name}"


def subdir_of(overrides: list[str]) -> str | None:
    """The subdir a job's overrides give it (the value `override` wrote)."""
    for item in overrides:
        key, _, value = item.partition("=")
        if key == SUBDIR_KEY:
            return value
    return None


def home(study: optuna.Study, sweep_dir: Path) -> Path:
    """The study's home dir: recorded by the first sweep that ran it; a home that is gone (moved,
    deleted) is replaced by this sweep dir."""
    recorded = study.user_attrs.get(HOME_ATTR)
    if recorded and Path(recorded).is_dir():
        return Path(recorded)
    here = sweep_dir.resolve()
    study.set_user_attr(HOME_ATTR, str(here))
    return here


def link(home_dir: Path, sweep_dir: Path, name: str) -> Path | None:
    """`<home>/<name>` -> `<sweep dir>/<name>` when the trial runs outside the study's home. Relative,
    so moving the sweeps' parent folder keeps it valid. Never replaces what is there."""
    target = sweep_dir.resolve() / name
    if home_dir.resolve() == sweep_dir.resolve():
        return None
    at = home_dir / name
    if at.exists() or at.is_symlink():
        log.warning("verlsweep: %s exists; trial dir %s is not linked from the study's home", at, target)
        return None
    try:
        at.symlink_to(os.path.relpath(target, home_dir.resolve()), target_is_directory=True)
    except OSError as exc:      # e.g. a file system without symlinks: the trial still runs, trials.csv has its dir
        log.warning("verlsweep: could not link %s -> %s: %s", at, target, exc)
        return None
    return at
