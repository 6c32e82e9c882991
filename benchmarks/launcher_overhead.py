"""What a Hydra launcher costs a trial: the time from the trial's ask to its tell, less the trial's own run.

    python benchmarks/launcher_overhead.py [--trials 12] [--sleep 3] [--jobs 3]

Runs `python sweep.py -m runner=estimate` (verlsweep's own task: prepare, compose, planner, MLflow run in
a sqlite store) once per launcher, one after the other on this machine: the basic launcher (one trial
at a time, in the sweep's process) and joblib with `--jobs` trials in flight. Each trial's runner sleeps
`--sleep` seconds over its steps (runner.step_seconds), its own run (the trial's duration_s). A trial's
ask and tell are Optuna's datetime_start / datetime_complete. Prints per launcher the median, p90 and
max of (tell - ask) - own run, and the sweep's wall time.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parent.parent
STEPS = 5
LAUNCHERS = {
    "basic": [],
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs={jobs}", "hydra.sweeper.n_jobs={jobs}"],
}


def _launched(t: optuna.trial.FrozenTrial) -> bool:
    """A trial whose job ran (not one the planner vetoed, a proof ruled out or a measurement reused)."""
    return (t.user_attrs.get("outcome") not in ("infeasible", None) and "reused_from" not in t.user_attrs
            and t.user_attrs.get("duration_s") is not None)


def one(name: str, args: argparse.Namespace, work: Path) -> tuple[list[float], float]:
    storage = f"sqlite:///{work / (name + '.db')}"
    extra = [a.format(jobs=args.jobs) for a in LAUNCHERS[name]]
    command = [sys.executable, str(REPO / "sweep.py"), "-m", "hardware=a2_64g", "algorithm=remax",
               "runner=estimate", f"runner.step_seconds={args.sleep / STEPS}", f"trial.steps={STEPS}",
               "study.report=false", "study.long_run.confirm=0", f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
               f"hydra.sweeper.n_trials={args.trials}", f"hydra.sweeper.storage={storage}",
               f"hydra.sweeper.study_name={name}", f"hydra.sweep.dir={work / name}", *extra]
    started = time.monotonic()
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"{name}: the sweep failed:\n{done.stderr[-3000:]}")
    study = optuna.load_study(study_name=name, storage=storage)
    overhead = [(t.datetime_complete - t.datetime_start).total_seconds() - float(t.user_attrs["duration_s"])
                for t in study.get_trials(deepcopy=False)
                if t.datetime_start and t.datetime_complete and _launched(t)]
    return overhead, wall


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=12)
    p.add_argument("--sleep", type=float, default=3.0, help="seconds each trial's own run takes")
    p.add_argument("--jobs", type=int, default=3, help="trials in flight with joblib")
    args = p.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(f"{args.trials} estimate trials of {args.sleep:g} s each; joblib with {args.jobs} in flight; seconds of "
          "(tell - ask) - the trial's own run, launched trials")
    print(f"{'launcher':10} {'trials':>6} {'median':>7} {'p90':>7} {'max':>7} {'wall':>7}")
    with tempfile.TemporaryDirectory(prefix="verlsweep-launcher-") as tmp:
        for name in LAUNCHERS:
            overhead, wall = one(name, args, Path(tmp))
            ordered = sorted(overhead)
            p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
            print(f"{name:10} {len(overhead):6d} {statistics.median(overhead):7.2f} {p90:7.2f} {max(overhead):7.2f} "
                  f"{wall:7.1f}")


if __name__ == "__main__":
    main()
