"""Whole sweeps through the verlsweep sweeper.

Most use tests/support/sweeper_app.py: the real conf/ tree and sweeper with a fast synthetic objective (a
throughput landscape with an OOM cliff) in place of verl. Sweeps that need processes (a kill, two sweeps
on one study, parallel launchers, exit statuses) are real `python <app>.py -m ...` subprocesses, as are
the real sweep.py's. Those about what the study loop decides (samplers, pruning, objectives, failures,
enqueued configs) run the same sweeper in this process, with a launcher that composes no job
(tests/support/inprocess_sweep.py).
Each test runs in its own tmp_path: storage file, sweep dirs and event logs stay there.
"""
from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import optuna
import pytest
import yaml

from tests.support import inprocess_sweep
from verlsweep.common.names import REUSED_FROM_ATTR

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "tests" / "support" / "sweeper_app.py"
SWEEP_PY = ROOT / "sweep.py"
DB = "verlsweep-optuna.db"
UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
PARAMS = (UTIL, TP, "verl.actor_rollout_ref.actor.fsdp_config.param_offload",
          "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload",
          "verl.actor_rollout_ref.ref.fsdp_config.param_offload")
# fast trials: no verl validation, no MLflow, three "steps"; runner=estimate needs no model or data
# files, so the sweeper's check of the fixed config passes (the stand-in app never reads them)
FAST = ["validate.verl=false", "tracking.enabled=false", "trial.steps=3", "runner=estimate", "study.report=false",
        "study.long_run.confirm=0"]

pytestmark = pytest.mark.slow
optuna.logging.set_verbosity(optuna.logging.WARNING)


def command(tmp_path: Path, *args: str, sweep_dir: str = "sweep", script: Path = APP) -> list[str]:
    return [sys.executable, str(script), "-m", f"hydra.sweep.dir={tmp_path / sweep_dir}", *FAST, *args]


def run(tmp_path: Path, *args: str, sweep_dir: str = "sweep", script: Path = APP, ok: bool = True,
        timeout: int = 600) -> subprocess.CompletedProcess:
    proc = subprocess.run(command(tmp_path, *args, sweep_dir=sweep_dir, script=script), cwd=tmp_path,
                          capture_output=True, text=True, timeout=timeout)
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


def inproc(tmp_path: Path, *args: str) -> None:
    """`run`'s sweep in this process (tests/support/inprocess_sweep.py: the real sweeper and study loop, a
    launcher that calls the app's task on the composed config): for tests about what the loop decides,
    which need no process of their own. Trials that need one (kills, parallel launchers) use `run`."""
    inprocess_sweep.sweep(tmp_path / "sweep", [*FAST, *args])


def rows(tmp_path: Path, sweep_dir: str = "sweep") -> list[dict[str, str]]:
    with open(tmp_path / sweep_dir / "trials.csv") as f:
        return list(csv.DictReader(f))


def study_trials(tmp_path: Path) -> list[optuna.trial.FrozenTrial]:
    storage = f"sqlite:///{tmp_path / DB}"
    (summary,) = optuna.get_all_study_summaries(storage)
    return optuna.load_study(study_name=summary.study_name, storage=storage).get_trials()


def events(path: Path) -> list[tuple[str, int, float, int]]:
    out = []
    for line in path.read_text().splitlines():
        kind, number, t, pid = line.split()
        out.append((kind, int(number), float(t), int(pid)))
    return out


def key(params: dict) -> tuple:
    return tuple(params[p] for p in PARAMS)


# --- samplers, objectives, outputs ----------------------------------------------------------------


@pytest.mark.parametrize("sampler", ["boundary", "tpe", "gp", "random", "grid", "nsgaii", "qmc"])
def test_every_sampler_runs_a_sweep_and_writes_best_config_outputs(tmp_path, sampler, capsys):
    inproc(tmp_path, f"hydra/sweeper/sampler={sampler}", "hydra.sweeper.sampler.seed=1", "hydra.sweeper.n_trials=5")
    stdout = capsys.readouterr().out
    trials = rows(tmp_path)
    assert len(trials) == 5
    assert trials[0][UTIL] == "0.6" and trials[0][TP] == "2"           # the recipe's own values run first
    best = yaml.safe_load((tmp_path / "sweep" / "best.yaml").read_text())
    feasible = [r for r in trials if r["outcome"] == "completed"]
    assert best["values"]["objective"] == max(float(r["objective"]) for r in feasible)
    launch = (tmp_path / "sweep" / "best_launch.sh").read_text()
    assert "trainer.total_training_steps=60" in launch and "trainer.save_freq=20" in launch
    for name, value in best["params"].items():
        assert f"{name.removeprefix('verl.')}={value if not isinstance(value, bool) else str(value)}" in launch
    assert subprocess.run(["bash", "-n", str(tmp_path / "sweep" / "best_launch.sh")]).returncode == 0
    assert "study rollout_memory.a2_64g.qwen3_8b.grpo" in stdout                 # the summary table
    # study.report=false (FAST): no plotting, the outputs above all the same
    assert not (tmp_path / "sweep" / "report.html").exists() and "report:" not in stdout


def test_multi_objective_sweep_writes_the_pareto_front(tmp_path):
    inproc(tmp_path, "hydra/sweeper/sampler=nsgaii", "hydra.sweeper.sampler.seed=2", "hydra.sweeper.n_trials=10",
        "hydra.sweeper.direction=[maximize,minimize]", "study.objectives=[objective,peak_memory_gb]")
    best = yaml.safe_load((tmp_path / "sweep" / "best.yaml").read_text())
    front = best["pareto_front"]
    assert front
    done = [(float(r["objective"]), float(r["peak_memory_gb"])) for r in rows(tmp_path) if r["outcome"] == "completed"]
    for entry in front:
        tput, peak = entry["values"]["objective"], entry["values"]["peak_memory_gb"]
        assert not any(t >= tput and p <= peak and (t > tput or p < peak) for t, p in done)
    on_front = {(e["values"]["objective"], e["values"]["peak_memory_gb"]) for e in front}
    assert all(any(t <= ft and p >= fp for ft, fp in on_front) for t, p in done)   # everything else is dominated


def _proven_failures(trials: list[dict[str, str]]) -> int:
    """Launched trials that an earlier trial's outcome already proved to fail (verlsweep.proofs.rules)."""
    from verlsweep.proofs.rules import Observed, decide

    def params(r: dict[str, str]) -> dict:
        return {UTIL: float(r[UTIL]), TP: int(r[TP]), **{k: r[k] == "True" for k in PARAMS[2:]}}
    seen, proven = [], 0
    for i, r in enumerate(trials):
        proven += decide(seen, params(r)).verdict == "fail"
        seen.append(Observed(i, params(r), r["outcome"], r["failure_phase"] or None))
    return proven


def sampler_sweeps(tmp_path: Path, runs: list[tuple[str, int]]) -> dict[tuple[str, int], list[dict[str, str]]]:
    """The trials of a 30-trial sweep per (sampler, seed), every proposal launched, each in its own dir
    and storage, run in this process (`inproc`): 150 trials of Hydra composes would take minutes of CPU."""
    out = {}
    for sampler, seed in runs:
        cwd = tmp_path / f"{sampler}-{seed}"
        cwd.mkdir()
        inproc(
            cwd, f"hydra/sweeper/sampler={sampler}", f"hydra.sweeper.sampler.seed={seed}",
            "hydra.sweeper.n_trials=30", "hydra/sweeper/pruner=none",
            # the sampler's own proposals: no planner-guided start (the planner does not know this
            # synthetic landscape) and every proposal launched, so each one is a fresh draw
            "study.guide.top_k=0", "hydra.sweeper.remeasure=true", "trial.steps=2",
            # nor ruled out by what earlier OOMs prove: what the sampler learns, not the veto
            "study.proofs=false")
        out[(sampler, seed)] = rows(cwd)
    return out


def test_after_ooms_tpe_proposes_fewer_configs_in_the_oom_region_and_the_default_none_proven_to_fail(tmp_path):
    # a third of the rollout_memory space does not fit in the synthetic landscape; the boundary sampler
    # (the default) is deterministic on it, so one seed is all it has
    runs = [("boundary", 0)] + [(s, seed) for s in ("tpe", "random") for seed in (0, 1)]
    sweeps = sampler_sweeps(tmp_path, runs)
    shares = {k: sum(r["outcome"] == "oom" for r in t[10:]) / len(t[10:]) for k, t in sweeps.items()}
    tpe = [shares["tpe", seed] for seed in (0, 1)]
    rand = [shares["random", seed] for seed in (0, 1)]
    assert sum(tpe) < sum(rand), shares
    assert sum(tpe) / 2 < 0.3, shares
    # TPE and random launch configs an earlier OOM already proved to fail; the default never proposes one
    proven = {k: _proven_failures(t) for k, t in sweeps.items()}
    assert proven["boundary", 0] == 0 and proven["random", 0] + proven["random", 1] > 0, proven


def test_pruning_stops_unpromising_trials_early(tmp_path):
    # seeded and noiseless, so every run proposes the same trials: 8 hold 2 completed and 3 pruned ones
    inproc(tmp_path, "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=0", "hydra.sweeper.n_trials=8",
        "hydra.sweeper.pruner.n_startup_trials=3", "trial.steps=6")
    trials = rows(tmp_path)
    pruned = [r for r in trials if r["outcome"] == "pruned"]
    assert pruned, [r["outcome"] for r in trials]
    assert all(2 <= int(r["steps"]) < 6 for r in pruned)
    assert all(int(r["steps"]) == 6 for r in trials if r["outcome"] == "completed")
    assert {r["state"] for r in pruned} == {"PRUNED"}


# --- resume, sharing, parallel ----------------------------------------------------------------------


def test_resume_after_sigkill_reruns_the_killed_trial_once_and_keeps_n_trials_total(tmp_path):
    args = ["hydra.sweeper.n_trials=5", "hydra.sweeper.sampler.seed=3", "hydra.sweeper.heartbeat_interval=1",
            "hydra.sweeper.grace_period=2", "trial.steps=4", "+app.step_seconds=0.2", "+app.slow_trials=[2]",
            f"+app.events={tmp_path / 'events'}"]
    sweep = subprocess.Popen(command(tmp_path, *args), cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (tmp_path / "events").exists() and any(k == "start" and n == 2 for k, n, *_ in events(tmp_path / "events")):
            break
        time.sleep(0.1)
    time.sleep(0.5)
    os.killpg(sweep.pid, signal.SIGKILL)                     # mid-trial 2: its trial stays RUNNING
    sweep.wait()
    killed = [t for t in study_trials(tmp_path) if t.state == optuna.trial.TrialState.RUNNING]
    assert [t.number for t in killed] == [2]

    run(tmp_path, *args, sweep_dir="sweep2")                 # the same command again
    trials = study_trials(tmp_path)
    finished = [t for t in trials if t.number != 2]
    assert trials[2].state == optuna.trial.TrialState.FAIL
    assert len(finished) == 5 and all(t.state.is_finished() for t in finished)
    retries = [t for t in trials if t.system_attrs.get("failed_trial") == 2]
    assert len(retries) == 1 and retries[0].params == trials[2].params
    counts = Counter(key(t.params) for t in trials)
    assert counts[key(trials[2].params)] == 2
    assert all(c == 1 for k, c in counts.items() if k != key(trials[2].params))
    assert [r["outcome"] for r in rows(tmp_path, "sweep2")].count("orphaned") == 1


def test_two_sweep_processes_share_one_study_without_running_a_trial_twice(tmp_path):
    args = ["hydra.sweeper.n_trials=8", "hydra.sweeper.study_name=shared", "hydra.sweeper.heartbeat_interval=1",
            "+app.step_seconds=0.2", f"+app.events={tmp_path / 'events'}",
            "+app.together=2", "+app.together_until=2"]         # trials 0 and 1 run at once: both processes work
    procs = [subprocess.Popen(command(tmp_path, *args, sweep_dir=d), cwd=tmp_path, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for d in ("a", "b")]
    outs = [p.communicate(timeout=600)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs[0][-3000:] + outs[1][-3000:]
    trials = study_trials(tmp_path)
    counted = [t for t in trials if not t.system_attrs.get("verlsweep.over_budget")]
    assert len(counted) == 8 and all(t.state.is_finished() for t in trials)
    started = [n for kind, n, _, _ in events(tmp_path / "events") if kind == "start"]
    assert len(started) == len(set(started))                        # no trial ran twice
    # a proposal that repeats a measured config launches nothing: whether one comes depends on TPE
    reused = {t.number for t in counted if REUSED_FROM_ATTR in t.user_attrs}
    assert set(started) == {t.number for t in counted} - reused     # every other counted trial ran once
    assert len({pid for _, _, _, pid in events(tmp_path / "events")}) == 2   # both processes did work
    assert len(rows(tmp_path, "a")) == len(rows(tmp_path, "b")) == 8


@pytest.mark.parametrize("launcher", [["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
                                      ["hydra/launcher=submitit_local"]], ids=["joblib", "submitit_local"])
def test_a_parallel_launcher_runs_n_jobs_trials_at_once(tmp_path, launcher):
    # grid, no recipe first: four distinct configs, so no proposal is a reused repeat that launches nothing
    run(tmp_path, *launcher, "hydra.sweeper.n_jobs=2", "hydra.sweeper.n_trials=4", "+app.step_seconds=0.5",
        "hydra/sweeper/sampler=grid", "study.enqueue_recipe=false",
        f"+app.events={tmp_path / 'events'}", "+app.together=2")
    ev = events(tmp_path / "events")
    spans = {}
    for kind, n, t, pid in ev:
        spans.setdefault(n, {})[kind] = (t, pid)
    assert sorted(spans) == [0, 1, 2, 3]
    for a, b in ((0, 1), (2, 3)):                             # each batch: two trials, overlapping, two workers
        assert spans[a]["start"][0] < spans[b]["end"][0] and spans[b]["start"][0] < spans[a]["end"][0]
        assert spans[a]["start"][1] != spans[b]["start"][1]


# --- failures ------------------------------------------------------------------------------------------


def bad_sweep(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    extra = tmp_path / "extra" / "space"
    extra.mkdir(parents=True)
    (extra / "bad.yaml").write_text("# @package _global_\nhydra:\n  sweeper:\n    params:\n" + body)
    return run(tmp_path, "space=bad", f"hydra.searchpath=[file://{tmp_path / 'extra'}]", ok=False)


@pytest.mark.parametrize(
    ("param", "value", "says"),
    [
        (UTIL, "choice()", "empty choice"),
        (UTIL, "interval(0.9,0.3)", "low <= high"),
        ("verl.actor_rollout_ref.rollout.gpu_memroy_utilization", "choice(0.5,0.6)", "verl 0.9.1's ppo_trainer"),
        (TP, "choice(1,3)", "one of [1, 2, 4, 8]"),
    ],
    ids=["empty-choice", "low-above-high", "unknown-key", "tp-invalid-for-hardware"],
)
def test_a_bad_search_space_fails_before_the_first_trial_naming_the_param(tmp_path, param, value, says):
    proc = bad_sweep(tmp_path, f"      {param}: {value}\n")
    assert proc.returncode != 0
    assert f"hydra.sweeper.params.{param}" in proc.stderr and says in proc.stderr, proc.stderr[-3000:]
    assert not (tmp_path / DB).exists()                      # no study, so no trial
    assert not list((tmp_path / "sweep").glob("[0-9]*"))     # no job dir


def test_failed_trials_never_abort_the_sweep(tmp_path):
    inproc(tmp_path, "hydra.sweeper.n_trials=5", "+app.fail_trials=[1,2]")
    outcomes = [r["outcome"] for r in rows(tmp_path)]
    assert len(outcomes) == 5 and outcomes[1:3] == ["crash", "crash"]
    assert "RuntimeError: synthetic task failure" in rows(tmp_path)[1]["excerpt"]


def test_max_consecutive_failures_stops_the_sweep_with_a_clear_message(tmp_path):
    proc = run(tmp_path, "hydra.sweeper.n_trials=10", "hydra.sweeper.max_consecutive_failures=3",
               "+app.outcome=no_devices", ok=False)
    assert proc.returncode == 1
    assert "3 consecutive trials failed" in proc.stderr and "broken environment" in proc.stderr
    assert [r["outcome"] for r in rows(tmp_path)] == ["no_devices"] * 3


def test_the_whole_sweep_timeout_stops_starting_trials(tmp_path):
    run(tmp_path, "hydra.sweeper.n_trials=50", "hydra.sweeper.timeout=3", "+app.step_seconds=0.5")
    assert 1 <= len(rows(tmp_path)) < 10


def test_enqueued_known_good_configs_run_first(tmp_path):
    good = {UTIL: 0.4, TP: 4, PARAMS[2]: False, PARAMS[3]: True, PARAMS[4]: False}
    entry = ",".join(f"{k}:{str(v).lower() if isinstance(v, bool) else v}" for k, v in good.items())
    inproc(tmp_path, "hydra.sweeper.n_trials=3", f"hydra.sweeper.enqueue=[{{{entry}}}]")
    trials = rows(tmp_path)
    assert (trials[0][UTIL], trials[0][TP]) == ("0.6", "2")                 # the recipe's values
    assert (trials[1][UTIL], trials[1][TP], trials[1][PARAMS[2]]) == ("0.4", "4", "False")


# --- the real sweep.py ----------------------------------------------------------------------------------


def test_sweep_py_dry_run_composes_each_trial_and_records_nothing(tmp_path):
    run(tmp_path, "space=smoke", "dry_run=true", script=SWEEP_PY)
    commands = sorted((tmp_path / "sweep").glob("*/command.json"))
    utils = {a for path in commands for a in yaml.safe_load(path.read_text())["argv"]
             if a.startswith("actor_rollout_ref.rollout.gpu_memory_utilization=")}
    assert utils == {"actor_rollout_ref.rollout.gpu_memory_utilization=0.5",
                     "actor_rollout_ref.rollout.gpu_memory_utilization=0.6"}   # smoke: a 2-point grid
    assert not (tmp_path / DB).exists()


def test_sweep_py_with_the_estimate_runner_runs_a_pruned_constrained_sweep(tmp_path):
    pytest.importorskip("verlsweep.trial.runners.estimate")
    proc = run(tmp_path, "runner=estimate", "hydra.sweeper.n_trials=12", "hydra.sweeper.sampler.seed=0",
               "hydra.sweeper.pruner.n_startup_trials=2", "trial.steps=5", script=SWEEP_PY)
    trials = rows(tmp_path)
    assert len(trials) == 12
    assert {r["outcome"] for r in trials} <= {"completed", "pruned", "oom", "infeasible"}
    assert any(r["outcome"] == "completed" for r in trials)
    violating = [t for t in study_trials(tmp_path) if t.user_attrs["outcome"] in ("oom", "infeasible")]
    assert violating and all(t.system_attrs["constraints"] == [1.0] for t in violating)   # the form the dashboard reads
    assert (tmp_path / "sweep" / "best_launch.sh").exists() and "best trial" in proc.stdout


def test_algorithms_sweep_is_a_grid_over_every_algorithm_accepted_by_verl(tmp_path):
    run(tmp_path, "space=algorithms", "dry_run=true", "validate.verl=true", script=SWEEP_PY)
    commands = sorted((tmp_path / "sweep").glob("*/command.json"))
    estimators = set()
    for path in commands:
        argv = yaml.safe_load(path.read_text())["argv"]
        estimators |= {a.split("=", 1)[1] for a in argv if a.startswith("algorithm.adv_estimator=")}
        assert "actor_rollout_ref.rollout.gpu_memory_utilization=0.6" in argv
    assert len(commands) == 7
    assert estimators == {"grpo", "remax", "gae", "rloo", "reinforce_plus_plus"}    # gspo/dapo: grpo + loss modes
