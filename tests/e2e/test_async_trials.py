"""Asynchronous trials (hydra.sweeper.schedule, verlsweep/study/inflight.py): with n_jobs > 1 on a launcher
that runs jobs in their own processes, a trial's end starts the next one while the others still run,
and a sweep killed with several trials in flight is settled by the next run as a batch one is."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tests.e2e.test_reconcile_after_kill as kill
from tests.e2e.test_study_loop_sweeps import events, rows, run, study_trials
from tests.support.trial_helpers import REPO, TEST_MARK, copy_store, new_mark, run_sweep, survivors
from verlsweep.common.names import RESULT_FILE

pytestmark = pytest.mark.slow
JOBLIB = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=3", "hydra.sweeper.n_jobs=3"]


def spans(path: Path) -> dict[int, tuple[float, float]]:
    out: dict[int, dict[str, float]] = {}
    for kind, n, t, _ in events(path):
        out.setdefault(n, {})[kind] = t
    return {n: (s["start"], s["end"]) for n, s in out.items()}


@pytest.fixture(scope="module")
def subset_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """Four trials, three at a time on groups of 2 of a2_64g's 8 devices. Trials 0-2 start together;
    trial 0 outlasts the others until trial 3 has started: in batches trial 3 would wait for trial 0
    (which gives up after a minute) and the replacement test fails."""
    tmp = tmp_path_factory.mktemp("async")
    proc = run(tmp, *JOBLIB, "study.devices_per_trial=2", "hydra.sweeper.n_trials=4",
               "+app.step_seconds=0.2", "hydra/sweeper/sampler=grid", "study.enqueue_recipe=false",
               "verl.actor_rollout_ref.rollout.tensor_model_parallel_size=choice(1,2)",
               f"+app.events={tmp / 'events'}", f"+app.devices={tmp / 'devices'}", "+app.together=3",
               "+app.together_until=3", "+app.hold=[0,3]")
    return tmp, proc


def test_a_trial_that_ends_is_replaced_while_the_others_of_its_batch_still_run(subset_sweep):
    tmp_path, proc = subset_sweep
    span = spans(tmp_path / "events")
    assert sorted(span) == [0, 1, 2, 3]                        # each trial ran once
    assert span[3][0] < span[0][1]                            # replaced while trial 0 of its batch still ran
    assert min(span[1][1], span[2][1]) < span[3][0]           # ... in the slot a trial that ended freed
    for t in sorted({s for s, _ in span.values()}):            # never more than n_jobs at once
        assert sum(s <= t < e for s, e in span.values()) <= 3
    assert sorted(int(r["number"]) for r in rows(tmp_path)) == [0, 1, 2, 3]
    assert all(t.state.is_finished() for t in study_trials(tmp_path))
    assert proc.stdout.count("[4/4]") == 1                    # the status line after the last trial


def test_trials_on_device_subsets_never_share_a_device_while_they_overlap(subset_sweep):
    tmp_path, _ = subset_sweep
    held: dict[int, dict] = {}
    for line in (tmp_path / "devices").read_text().splitlines():
        kind, n, t, visible, n_gpus, port = line.split()
        held.setdefault(int(n), {"devices": set(map(int, visible.split(","))), "n_gpus": int(n_gpus),
                                 "port": int(port)})[kind] = float(t)
    assert sorted(held) == [0, 1, 2, 3]
    assert all(len(h["devices"]) == 2 and h["n_gpus"] == 2 and h["devices"] <= set(range(8)) for h in held.values())
    overlapping = [(a, b) for a in held for b in held if a < b
                   and held[a]["start"] < held[b]["end"] and held[b]["start"] < held[a]["end"]]
    assert len(overlapping) >= 3                               # 0, 1, 2 together, then 3 beside 0
    for a, b in overlapping:
        assert not held[a]["devices"] & held[b]["devices"], (a, b, held)
        assert held[a]["port"] != held[b]["port"]
    assert "n_gpus_per_node=$NGPUS_PER_NODE" in (tmp_path / "sweep" / "best_launch.sh").read_text()
    assert "NGPUS_PER_NODE=${NGPUS_PER_NODE:-8}" in (tmp_path / "sweep" / "best_launch.sh").read_text()


def test_a_sweep_killed_with_three_trials_in_flight_is_settled_by_the_rerun(tiny_model_dir, gsm8k_dir,
                                                                            empty_mlflow_db, tmp_path):
    # each job is a process of submitit's local executor, which outlives the sweep: the three trials end
    # meanwhile (each writes its result.json) and the rerun tells each from its own files, nothing lost,
    # nothing re-run (joblib's pool workers would outlive it too, idle until loky's idle timeout)
    uri = copy_store(empty_mlflow_db, tmp_path)
    args, env = kill.setup(tmp_path, tiny_model_dir, gsm8k_dir, uri, n_trials=3, step_seconds=1)
    args += ["hydra/launcher=submitit_local", "hydra.sweeper.n_jobs=3"]
    mark = new_mark()
    full = {**os.environ, **env, TEST_MARK: mark, "VS_SLEEPER": str(tmp_path / "sleepers")}
    full.pop("MLFLOW_TRACKING_URI", None)
    first = subprocess.Popen([sys.executable, str(REPO / "sweep.py"), "-m", *args], cwd=tmp_path, env=full,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while len(list((tmp_path / "sweep").glob("*/metrics.jsonl"))) < 3:     # three trials past their first step
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert [t.state.name for t in kill.study(tmp_path).get_trials()] == ["RUNNING"] * 3
    while len(list((tmp_path / "sweep").glob(f"*/{RESULT_FILE}"))) < 3:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    second = run_sweep(tmp_path, args, mark, multirun=True, env=env)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-5000:]
    trials = kill.assert_one_story(tmp_path, uri)
    assert [(t.state.name, t.user_attrs["outcome"]) for t in trials] == [("COMPLETE", "completed")] * 3
    assert second.stdout.count("of a sweep process that died") == 3, second.stdout[-3000:]
    assert kill.report(tmp_path).returncode == 0
    assert survivors(mark) == [], survivors(mark)
