"""After a crash, Optuna, MLflow and the sweep dir tell the same story; a dead sweep's trial
processes are stopped before the next trial starts; two live sweeps never touch each other.

Everything runs `python sweep.py -m` as a subprocess with the verl stand-in. The sweep is killed
with SIGKILL at named points (VERLSWEEP_CRASH_AT, verlsweep/common/crashpoint.py), then the same
command runs again. The stand-in trial is started through a wrapper that, in the first run, leaves a
child in the trial's session that ignores SIGTERM (a worker stuck in a device call does the same).
"""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import REPO, STANDIN, copy_store, new_mark, run_sweep, survivors, tiny_overrides
from verlsweep.common.names import CRASH_AT_ENV

pytestmark = pytest.mark.slow
optuna.logging.set_verbosity(optuna.logging.WARNING)

STUDY = "crash-study"
WRAPPER = """#!/usr/bin/env bash
if [ -n "$VS_SLEEPER" ]; then
  {python} -c 'import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
open(sys.argv[1], "a").write(f"{{os.getpid()}}\\n")
time.sleep(600)' "$VS_SLEEPER" &
  sleep 0.5
fi
alive=""
# alive = not a zombie: a stopped sleeper whose parent is gone stays one where init does not reap
for p in $(cat "$VS_PIDS" 2>/dev/null); do
  state=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1)
  [ -n "$state" ] && [ "$state" != Z ] && alive="$alive$p,"
done
echo "start $$ alive:$alive" >> "$VS_EVENTS"
exec {python} {standin} "$@"
"""
STATUS_OF = {"COMPLETE": {"FINISHED", "FAILED"}, "PRUNED": {"KILLED"}, "FAIL": {"FAILED", "KILLED"}}


def setup(tmp_path: Path, model: Path, data: Path, uri: str, n_trials: int = 2, step_seconds: float = 0.4
          ) -> tuple[list[str], dict[str, str]]:
    wrapper = tmp_path / "trial.sh"
    wrapper.write_text(WRAPPER.format(python=sys.executable, standin=STANDIN))
    wrapper.chmod(0o755)
    args = [*tiny_overrides(model, data, tmp_path / "out", uri), f"runner.entrypoint=[bash,{wrapper}]",
            "validate.verl=false", "trial.steps=3", f"+env.VERL_STANDIN_STEP_SECONDS={step_seconds}",
            "runner.grace_period=2",
            f"hydra.sweep.dir={tmp_path / 'sweep'}", f"hydra.sweeper.study_name={STUDY}",
            f"hydra.sweeper.n_trials={n_trials}", "study.enqueue_recipe=false",
            "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=0", "hydra/sweeper/pruner=none",
            "hydra.sweeper.heartbeat_interval=1", "hydra.sweeper.grace_period=3"]
    env = {"VS_PIDS": str(tmp_path / "sleepers"), "VS_EVENTS": str(tmp_path / "events")}
    return args, env


def study(tmp_path: Path) -> optuna.Study:
    return optuna.load_study(study_name=STUDY, storage=f"sqlite:///{tmp_path / 'verlsweep-optuna.db'}")


def runs(uri: str) -> list:
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()], max_results=1000)


def assert_one_story(tmp_path: Path, uri: str) -> list[optuna.trial.FrozenTrial]:
    """No run RUNNING, one parent, one child per Optuna trial with an agreeing state, trials.csv = the study."""
    all_runs = runs(uri)
    assert [r.info.run_id for r in all_runs if r.info.status == "RUNNING"] == []
    parents = [r for r in all_runs if r.data.tags.get("sweep.role") == "parent"]
    assert len(parents) == 1, [(p.info.run_id, p.info.status) for p in parents]
    trials = [t for t in study(tmp_path).get_trials() if not t.system_attrs.get("verlsweep.over_budget")]
    children: dict[int, list] = {}
    for r in all_runs:
        if "trial.number" in r.data.tags:
            children.setdefault(int(r.data.tags["trial.number"]), []).append(r)
    assert sorted(children) == [t.number for t in trials if t.state.is_finished()]
    for t in trials:
        (run,) = children[t.number]
        assert run.info.status in STATUS_OF[t.state.name], (t.number, t.state, run.info.status)
        assert run.data.tags["trial.outcome"] == t.user_attrs["outcome"]
        assert run.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id
    with open(tmp_path / "sweep" / "trials.csv") as f:
        rows = [(int(r["number"]), r["state"], r["outcome"]) for r in csv.DictReader(f)]
    assert rows == [(t.number, t.state.name, t.user_attrs["outcome"]) for t in trials]
    return trials


def report(tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verlsweep.report", "--status", str(tmp_path / "sweep")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(Path.cwd())})


def crash_and_rerun(tmp_path: Path, uri: str, args: list[str], env: dict[str, str], point: str, mark: str
                    ) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    first = run_sweep(tmp_path, args, mark, multirun=True,
                      env={**env, CRASH_AT_ENV: point, "VS_SLEEPER": str(tmp_path / "sleepers")})
    assert first.returncode == -9, first.stdout[-2000:] + first.stderr[-3000:]
    assert any(r.info.status == "RUNNING" for r in runs(uri))       # what the crash left behind
    second = run_sweep(tmp_path, args, mark, multirun=True, env=env)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-5000:]
    return first, second


def assert_sleepers_stopped_before_each_start(tmp_path: Path) -> None:
    """No trial started while an earlier trial's stuck child (the wrapper's sleeper, one per trial started
    with VS_SLEEPER, in start order) was alive; a trial's own sleeper may be."""
    starts = (tmp_path / "events").read_text().splitlines()
    sleepers = (tmp_path / "sleepers").read_text().split()
    assert len(starts) >= 2, starts
    for i, line in enumerate(starts):
        alive = set(filter(None, line.split("alive:", 1)[1].split(",")))
        assert not alive & set(sleepers[:i]), (i, starts, sleepers)


def test_a_sweep_killed_while_its_trial_runs_is_settled_by_the_rerun_on_sqlite(tiny_model_dir, gsm8k_dir,
                                                                              empty_mlflow_db, tmp_path):
    # the other crash points, one after another, over the HTTP store: the test below
    uri = copy_store(empty_mlflow_db, tmp_path)
    args, env = setup(tmp_path, tiny_model_dir, gsm8k_dir, uri)
    mark = new_mark()
    _, second = crash_and_rerun(tmp_path, uri, args, env, "trial_running", mark)
    trials = assert_one_story(tmp_path, uri)
    # the killed trial: its processes stopped before the next trial started, FAIL orphaned, re-run once
    assert (trials[0].state.name, trials[0].user_attrs["outcome"]) == ("FAIL", "orphaned")
    assert_sleepers_stopped_before_each_start(tmp_path)
    assert "trial 0 of a sweep process that died: FAIL orphaned, " in second.stdout, second.stdout[-3000:]
    launched = re.search(r"^t(0[1-9]|[1-9]\d)  ", second.stdout, re.M)       # the first trial this sweep ran
    assert launched and second.stdout.index("trial 0 of a sweep process that died") < launched.start()
    assert [t.system_attrs.get("failed_trial") for t in trials].count(0) == 1
    assert len([t for t in trials if t.state.is_finished()]) == len(trials)
    parent = [r for r in runs(uri) if r.data.tags.get("sweep.role") == "parent"][0]
    assert parent.info.status == "FINISHED" and parent.data.tags["sweep.resumes"] == "1"
    assert parent.data.tags["sweep.killed_session_found_by"].startswith("sweep session ")
    status = report(tmp_path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert survivors(mark) == []


def test_a_sweep_killed_at_each_point_in_turn_tells_one_story_over_an_mlflow_server(mlflow_server, tiny_model_dir,
                                                                                    gsm8k_dir, tmp_path):
    args, env = setup(tmp_path, tiny_model_dir, gsm8k_dir, mlflow_server, n_trials=3)
    mark = new_mark()
    out = {}
    for point in ("trial_running", "trial_ended", "writing_outputs:2"):
        killed = run_sweep(tmp_path, args, mark, multirun=True,
                           env={**env, CRASH_AT_ENV: point, "VS_SLEEPER": str(tmp_path / "sleepers")})
        assert killed.returncode == -9, killed.stderr[-3000:]
        assert any(r.info.status == "RUNNING" for r in runs(mlflow_server))     # what the crash left behind
        out[point] = killed.stdout
    last = run_sweep(tmp_path, args, mark, multirun=True, env=env)
    assert last.returncode == 0, last.stdout[-2000:] + last.stderr[-5000:]
    trials = assert_one_story(tmp_path, mlflow_server)
    # killed while trial 0 ran: FAIL orphaned, told by the next sweep, re-run once;
    # killed once a trial ended or while the outputs were written: its result was on disk (result.json) or
    # told, so it is COMPLETE and nothing else is re-run
    assert [(t.state.name, t.user_attrs["outcome"]) for t in trials] == \
        [("FAIL", "orphaned")] + [("COMPLETE", "completed")] * 3
    assert "trial 0 of a sweep process that died: FAIL orphaned, " in out["trial_ended"], out["trial_ended"][-3000:]
    assert [t.system_attrs["failed_trial"] for t in trials if "failed_trial" in t.system_attrs] == [0]
    assert_sleepers_stopped_before_each_start(tmp_path)
    parent = [r for r in runs(mlflow_server) if r.data.tags.get("sweep.role") == "parent"][0]
    assert parent.info.status == "FINISHED" and parent.data.tags["sweep.resumes"] == "3"
    assert parent.data.tags["sweep.killed_session_found_by"].startswith("sweep session ")
    status = report(tmp_path)
    assert status.returncode == 0, status.stdout + status.stderr
    assert survivors(mark) == []


def test_two_live_sweep_processes_on_one_study_never_touch_each_others_trials_or_runs(tiny_model_dir, gsm8k_dir,
                                                                                     empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    args, env = setup(tmp_path, tiny_model_dir, gsm8k_dir, uri, n_trials=3)
    args = [a for a in args if not a.startswith("hydra.sweep.dir=")] + ["trial.steps=6"]
    mark = new_mark()

    def start(sweep_dir: str) -> subprocess.Popen:
        full = {**os.environ, **env, "VERLSWEEP_TEST_MARK": mark}
        full.pop("MLFLOW_TRACKING_URI", None)
        return subprocess.Popen([sys.executable, str(REPO / "sweep.py"), "-m", *args,
                                 f"hydra.sweep.dir={tmp_path / sweep_dir}"], cwd=tmp_path, env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    a = start("a")
    deadline = time.monotonic() + 300
    while not list((tmp_path / "a").glob("*/metrics.jsonl")):    # a's first trial is running
        assert a.poll() is None and time.monotonic() < deadline, a.stdout.read()[-3000:] if a.poll() else "timeout"
        time.sleep(0.2)
    b = start("b")                                               # starts while a's trial runs
    outs = {name: p.communicate(timeout=900)[0] for name, p in (("b", b), ("a", a))}
    assert a.returncode == 0 and b.returncode == 0, outs["a"][-3000:] + outs["b"][-3000:]
    assert all("of a sweep process that died" not in out for out in outs.values())
    trials = [t for t in study(tmp_path).get_trials() if not t.system_attrs.get("verlsweep.over_budget")]
    assert [(t.state.name, t.user_attrs["outcome"]) for t in trials] == [("COMPLETE", "completed")] * 3
    assert len({t.system_attrs["verlsweep.session"] for t in trials}) == 2      # both did work
    all_runs = runs(uri)
    assert [r for r in all_runs if r.info.status == "RUNNING"] == []
    (parent,) = [r for r in all_runs if r.data.tags.get("sweep.role") == "parent"]
    assert parent.info.status == "FINISHED" and "sweep.killed_session_found_by" not in parent.data.tags
    children = sorted(int(r.data.tags["trial.number"]) for r in all_runs if "trial.number" in r.data.tags)
    assert children == [t.number for t in trials]
    assert all(r.info.status == "FINISHED" for r in all_runs if "trial.number" in r.data.tags)
    assert survivors(mark) == []
