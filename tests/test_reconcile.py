"""Reconciliation, in-process: orphaned processes stopped by identity (never by name), dead sweeps'
trials settled, runs that disagree with their trial fixed, `verlsweep.report --status [--repair]`."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import psutil
import pytest
import yaml
from mlflow.tracking import MlflowClient

from verlsweep.common import optuna_private, processes
from verlsweep.common.names import OBJECTIVES_ATTR, PROCESSES_FILE, RESULT_FILE, TRACKING_ATTR
from verlsweep.reconcile import check, sessions, trials
from verlsweep.report import status
from verlsweep.report.__main__ import main as report_main
from verlsweep.study_link import open_storage
from verlsweep.trial import orphans
from verlsweep.trial.supervise import MARK_ENV

optuna.logging.set_verbosity(optuna.logging.WARNING)
pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning",
                                        "ignore:Heartbeat of storage is supposed to be used")

STUBBORN = ("import os, signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
            "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(300)\n")


def kill_all(*pids: int) -> None:
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass


def stubborn_trial(mark: str) -> tuple[subprocess.Popen, int]:
    """A 'trial' in its own session whose leader and child both ignore SIGTERM."""
    env = {"PATH": "/usr/bin:/bin", MARK_ENV: mark}
    proc = subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    child = int(proc.stdout.readline())
    return proc, child


def identity_of(pids: list[int], mark: str = "", session: int = 0) -> orphans.Identity:
    return orphans.Identity(host=socket.gethostname(), session=session, mark=mark,
                            processes=orphans.describe(psutil.Process(p) for p in pids))


def test_orphan_stop_kills_the_recorded_processes_even_if_they_ignore_sigterm(tmp_path):
    proc, child = stubborn_trial("m1")
    ray_tmp = Path(__import__("tempfile").mkdtemp(prefix="vsray-"))
    try:
        who = identity_of([proc.pid, child], session=proc.pid)
        who.ray_tmp = str(ray_tmp)
        stopped = orphans.stop(who, grace_s=0.5)
        assert sorted(p["pid"] for p in stopped) == sorted([proc.pid, child])
        proc.wait(5)
        assert not processes.pid_alive(child)
        assert not ray_tmp.exists()
    finally:
        kill_all(proc.pid, child)


def test_orphan_stop_never_touches_a_process_that_only_looks_the_same(tmp_path):
    proc, child = stubborn_trial("m2")
    try:
        who = identity_of([proc.pid, child])
        for record in who.processes:                  # same pid and command line, another start time
            record["create_time"] -= 10.0
        who.mark = "another-trials-mark"
        assert orphans.stop(who, grace_s=0.2) == []
        assert proc.poll() is None and psutil.Process(child).is_running()
        found = orphans.find(orphans.Identity(host=socket.gethostname(), session=0, mark="m2"))
        assert sorted(p.pid for p in found) == sorted([proc.pid, child])       # its own mark finds it
        assert orphans.find(orphans.Identity(host="another-host", session=0, mark="m2")) == []
    finally:
        kill_all(proc.pid, child)
        proc.wait(5)


def zombie() -> tuple[subprocess.Popen, float]:
    """A killed process whose parent (this test) does not wait for it: it stays a zombie, as a killed
    sweep or trial process does when init never reaps. Returns it and its start time."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    create = psutil.Process(proc.pid).create_time()
    proc.kill()                                       # Popen.kill sends SIGKILL and does not wait
    deadline = time.monotonic() + 10
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the killed child never became a zombie"
        time.sleep(0.02)
    return proc, create


def test_a_killed_sweep_left_a_zombie_is_a_dead_session():
    proc, create = zombie()
    try:
        assert psutil.pid_exists(proc.pid)             # what `kill -0` sees: the pid still exists
        session = sessions.Session(id="zombie00", host=socket.gethostname(), pid=proc.pid, create_time=create,
                                   started=time.time(), beat=time.time())
        assert not sessions.alive(session, grace_s=3600)
        assert not processes.pid_alive(proc.pid, create)
    finally:
        proc.wait(5)


def test_orphan_stop_counts_a_killed_process_that_stays_a_zombie_as_gone():
    proc, child = stubborn_trial("m3")         # this test is the leader's parent and does not wait for it
    try:
        who = identity_of([proc.pid, child], session=proc.pid)
        stopped = orphans.stop(who, grace_s=0.5)
        assert sorted(p["pid"] for p in stopped) == sorted([proc.pid, child])
        assert psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE      # killed, never reaped
        assert orphans.find(who) == []
        assert orphans.stop(who, grace_s=0.5) == []                           # nothing left to stop
    finally:
        kill_all(proc.pid, child)
        proc.wait(5)


def test_a_live_process_is_alive_and_a_recycled_pid_is_not_the_recorded_one():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        create = psutil.Process(proc.pid).create_time()
        assert processes.pid_alive(proc.pid) and processes.pid_alive(proc.pid, create)
        assert not processes.pid_alive(proc.pid, create - 10.0)
    finally:
        proc.kill()
        proc.wait(5)
    assert not processes.pid_alive(proc.pid)


def test_a_stray_ray_tmp_path_in_the_storage_removes_nothing(tmp_path):
    keep = tmp_path / "vsray-not-in-tmp"
    keep.mkdir()
    orphans.remove_ray_tmp(str(keep))
    orphans.remove_ray_tmp("/")
    assert keep.exists()


# --- a study left by a dead sweep, checked and repaired ------------------------------------------------


def dead_session() -> sessions.Session:
    """A session whose process is gone: a finished child's pid and start time."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    create = psutil.Process(gone.pid).create_time()
    gone.wait()
    return sessions.Session(id="dead0000", host=socket.gethostname(), pid=gone.pid, create_time=create,
                            started=time.time() - 60, beat=time.time() - 60)


@pytest.fixture
def left_behind(store, tmp_path):
    """A study as a SIGKILLed sweep leaves it: trial 0 COMPLETE with its run FINISHED, trial 1 RUNNING
    (its run RUNNING, its files on disk), trial 2 COMPLETE whose run was never created, the parent
    RUNNING; and trial 3 RUNNING of a live sweep (this process) that must stay as it is."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    storage = open_storage(url, heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    client = MlflowClient(store)
    exp = client.create_experiment("s")
    study.set_user_attr(TRACKING_ATTR, {"uri": store, "experiment": "s"})
    study.set_user_attr(OBJECTIVES_ATTR, ["objective"])
    dead, live = dead_session(), sessions.new()
    for s in (dead, live):
        sessions.save(storage, optuna_private.study_id(study), s)
    parent = client.create_run(exp, tags={"sweep.role": "parent", "sweep.study": "s"}).info.run_id

    def child(number: int) -> str:
        return client.create_run(exp, tags={"trial.number": str(number), "sweep.study": "s", "trial.outcome": "running",
                                            "mlflow.parentRunId": parent}).info.run_id

    done = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    storage.set_trial_system_attr(optuna_private.trial_id(done), sessions.TRIAL_ATTR, dead.id)
    run0 = child(0)
    client.set_tag(run0, "trial.outcome", "completed")
    client.set_terminated(run0, "FINISHED")
    done.set_user_attr("outcome", "completed")
    study.tell(done, 1.0)
    killed = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    storage.set_trial_system_attr(optuna_private.trial_id(killed), sessions.TRIAL_ATTR, dead.id)
    trial_dir = tmp_path / "sweep" / "1"
    trial_dir.mkdir(parents=True)
    (trial_dir / "trial.log").write_text("step:1 - perf/throughput:10\n")
    killed.set_user_attr("job_dir", str(trial_dir))
    child(1)
    never = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    storage.set_trial_system_attr(optuna_private.trial_id(never), sessions.TRIAL_ATTR, dead.id)
    never.set_user_attr("outcome", "completed")
    study.tell(never, 2.0)
    running = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    storage.set_trial_system_attr(optuna_private.trial_id(running), sessions.TRIAL_ATTR, live.id)
    child(3)
    (tmp_path / "sweep" / "best.yaml").write_text(yaml.safe_dump({"study_name": "s", "storage": url}))
    return {"url": url, "study": study, "client": client, "dir": tmp_path / "sweep", "parent": parent,
            "live": live, "trial_dir": trial_dir}


def statuses(client: MlflowClient, exp_name: str = "s") -> dict[str, tuple[str, str | None]]:
    exp = client.get_experiment_by_name(exp_name).experiment_id
    return {r.data.tags.get("trial.number", "parent"): (r.info.status, r.data.tags.get("trial.outcome"))
            for r in client.search_runs([exp])}


def test_status_lists_each_disagreement_and_exits_nonzero(left_behind, capsys):
    code = report_main(["--status", str(left_behind["dir"])])
    out = capsys.readouterr().out
    assert code == 1
    assert "trial 1 is RUNNING but the sweep process that ran it is dead" in out
    assert "trial 2 (COMPLETE completed) has no MLflow run" in out
    assert "trials.csv is missing" in out
    assert "trial 3" not in out                                   # a live sweep's trial
    assert "parent run" not in out                                # its sweep (this process) is alive


def test_repair_applies_the_rules_and_leaves_the_live_sweeps_trial_alone(left_behind, capsys):
    code = report_main(["--status", "--repair", str(left_behind["dir"]), "--stop-grace", "0.5"])
    out = capsys.readouterr().out
    assert code == 0, out
    study = left_behind["study"]
    t = {x.number: x for x in study.get_trials()}
    assert (t[1].state.name, t[1].user_attrs["outcome"]) == ("FAIL", "orphaned")
    assert t[4].state.name == "WAITING" and t[4].system_attrs["failed_trial"] == 1    # re-run once
    assert t[3].state.name == "RUNNING"
    runs = statuses(left_behind["client"])
    assert runs["1"] == ("KILLED", "orphaned")
    assert runs["2"] == ("FINISHED", "completed")                 # recorded, not missing
    assert runs["3"] == ("RUNNING", "running")                    # untouched
    assert runs["parent"][0] == "RUNNING"                         # a live session still works on it
    assert (left_behind["dir"] / "trials.csv").exists()
    assert "Optuna, MLflow and the sweep dir agree" in out


def test_a_dead_sweeps_trial_whose_result_is_on_disk_is_told_that_result(left_behind):
    from verlsweep.reconcile import results as _results

    result = {"outcome": "oom", "peak_memory_gb": 63.0, "excerpt": "NPU out of memory", "steps": 1}
    (left_behind["trial_dir"] / RESULT_FILE).write_text(json.dumps(result))
    study = left_behind["study"]
    tell, retry, _ = status._sweeper_helpers(study)
    [stale] = trials.stale(study, 2.0)
    settled = trials.settle(study, stale, stop_grace_s=0.5, tell=tell, retry=retry)
    assert (settled.outcome, settled.state.name) == ("oom", "COMPLETE")
    frozen = study.get_trials()[1]
    assert _results.violation(frozen) == 1.0 and frozen.user_attrs["job_dir"]
    assert len(study.get_trials()) == 4                           # a proven outcome is not re-run


def test_a_trial_log_with_a_classified_failure_proves_the_outcome(left_behind):
    (left_behind["trial_dir"] / "trial.log").write_text(
        "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)\n")
    assert trials.from_log(left_behind["trial_dir"])[0] == "oom"


def test_expected_mlflow_status_follows_the_trial_state_and_outcome():
    def frozen(state, outcome, constraint=0.0):
        return optuna.trial.create_trial(state=state, value=1.0 if state.name == "COMPLETE" else None,
                                         user_attrs={"outcome": outcome},
                                         system_attrs={"constraints": (constraint,)})
    S = optuna.trial.TrialState
    assert check.expected_status(frozen(S.COMPLETE, "completed")) == ("FINISHED",)
    assert check.expected_status(frozen(S.COMPLETE, "oom", 1.0)) == ("FAILED",)
    assert check.expected_status(frozen(S.PRUNED, "pruned")) == ("KILLED",)
    assert check.expected_status(frozen(S.FAIL, "orphaned"))[0] == "KILLED"
    assert check.expected_status(frozen(S.FAIL, "crash"))[0] == "FAILED"


def test_the_process_identity_is_written_where_a_later_sweep_reads_it(tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        who = identity_of([proc.pid], mark="m3", session=proc.pid)
        who.trial_dir = str(tmp_path)
        who.write(tmp_path)
        assert json.loads((tmp_path / PROCESSES_FILE).read_text())["processes"][0]["pid"] == proc.pid
        assert orphans.read(tmp_path).processes == who.processes
    finally:
        proc.kill()
        proc.wait()


def test_a_resumed_study_continues_its_one_parent_run_unless_a_new_one_is_asked_for(store):
    from omegaconf import open_dict

    from verlsweep.command.compose import compose_config
    from verlsweep.tracking import sweep_run as _tracking

    cfg = compose_config([f"tracking.uri={store}"])
    client = MlflowClient(store)

    def start(session: str, others_alive: bool = False) -> str:
        return _tracking.open_sweep_run(cfg, "s", {}, sampler="TPESampler", sweep_name=None, session=session,
                                          others_alive=others_alive).parent

    def run(run_id: str):
        return client.get_run(run_id)

    first = start("A")                       # ... and sweep A is SIGKILLed: its parent stays RUNNING
    assert start("B") == first
    assert run(first).info.status == "RUNNING"
    assert run(first).data.tags["sweep.resumes"] == "1" and run(first).data.tags[_tracking.KILLED_FOUND_BY_TAG] == "B"
    _tracking.close_sweep_run(_tracking.Tracking(client, run(first).info.experiment_id, first), "FINISHED", False)
    assert run(first).info.status == "FINISHED"
    assert start("C") == first and run(first).info.status == "RUNNING"
    assert run(first).data.tags["sweep.resumes"] == "2"
    assert start("D", others_alive=True) == first                 # joins a live sweep: not a resume
    assert run(first).data.tags["sweep.resumes"] == "2"
    with open_dict(cfg):
        cfg.tracking.new_parent_run = True
    new = start("E")
    assert new != first
    assert run(first).info.status == "KILLED" and run(first).data.tags["sweep.superseded_by"] == new


def test_two_sweeps_that_each_created_a_parent_at_once_keep_the_older_one(store):
    from verlsweep.tracking import study_runs

    client = MlflowClient(store)
    exp = client.create_experiment("s")
    tags = {"sweep.role": "parent", "sweep.study": "s"}
    older = client.create_run(exp, tags=tags, start_time=1_000).info.run_id
    mine = client.create_run(exp, tags=tags, start_time=2_000).info.run_id
    assert study_runs.elect_parent(client, exp, "s", older) == older       # the older one's process keeps it
    assert study_runs.elect_parent(client, exp, "s", mine) == older        # the younger one's deletes its own
    assert client.get_run(mine).info.lifecycle_stage == "deleted"
    assert [r.info.run_id for r in study_runs.parents(client, exp, "s")] == [older]


def test_a_complete_study_whose_last_sweep_died_is_reconciled_once(tmp_path):
    from verlsweep.study import session as _reconcile

    storage = open_storage(f"sqlite:///{tmp_path / 'study.db'}", heartbeat_interval=1, grace_period=2)
    study = optuna.create_study(storage=storage, study_name="c")
    sessions.save(storage, optuna_private.study_id(study), dead_session())
    assert _reconcile.died_unreconciled(study, 2.0)          # the re-run must not just say "complete"
    me = _reconcile.SweepSession(study, storage, 2.0, 1.0, tell=None)
    me.open()
    me.close("FINISHED")
    assert not _reconcile.died_unreconciled(study, 2.0)      # reconciled: the next re-run only says so
