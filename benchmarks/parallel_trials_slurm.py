"""The real-Slurm column of benchmarks/parallel_trials.py (`--slurm`): the same sweep, batch vs async,
run by the real sweeper on a real single-node Slurm with accounting (tests/support/slurm_cluster.py:
munged, MariaDB, slurmdbd, slurmctld, slurmd on this machine), one Slurm job per trial through our
launcher (hydra/launcher=slurm), beside the fake clock's figures for the same landscape, seed, trials
and slots.

Each trial is benchmarks/parallel_trials_app.py: it sleeps the cost model of its config on the chosen
landscape divided by --scale, and reports its steps to the study, whose median pruner decides. The
sweep: TPE (seeded, multivariate, constant_liar), the median pruner, no recipe first, no planner guide,
no inference, proposals already measured run again, no stop on consecutive failures: what the fake
clock's one_sweep runs. Nothing else is simulated: sbatch, the scheduler's start of each job, submitit's
start-up inside the job, Hydra's job set-up, and the launcher's polling of result files and sacct all
take their real time, which the fake clock counts as zero.

Figures, from the trials' own start/end times (the app's events file) and the study's ask/tell times:
wall = first ask to last tell; util = trial-seconds busy / (slots x wall); job util = Slurm job-seconds
(sacct Start..End) / (slots x wall); dev-h to 3% = (ask of trial 0 .. tell of the first trial within 3%
of the landscape's best) x slots x 8 devices x scale, in the cost model's hours as the fake clock counts
them; lost = trials not finished plus trials never asked; twice = trials whose body started more than
once; jobs = Slurm jobs of the sweep (one per trial expected); start lat = median ask .. trial body
start (sbatch, scheduling, job start-up); end lat = median trial body end .. its tell (job exit, result
file and sacct polling); refill = median, over trials started after a slot freed, gap from the latest
trial end before their ask to their body start.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import optuna  # noqa: E402
import parallel_trials  # noqa: E402
import search_methods  # noqa: E402
from parallel_trials_app import config_key  # noqa: E402
from search_landscapes import HAND_WRITTEN, SPACE_LINES, STEPS, WORLD, Landscape, all_configs, hand_written, space  # noqa: E402

from tests.support.slurm_cluster import SlurmCluster, missing  # noqa: E402

APP = REPO / "benchmarks" / "parallel_trials_app.py"
DB = "verlsweep-optuna.db"
SWEEP_TIMEOUT_S = 600
# one CPU and 1 GB per trial job; the benchmark's cluster lets `slots` jobs share a core, so more
# trial jobs run at once than this machine has cores (they sleep)
SLURM = ["hydra/launcher=slurm", "slurm.gres=null", "slurm.cpus_per_task=1", "slurm.mem_gb=1",
         "hydra.launcher.signal_delay_s=5"]
# the fake clock's sweep (parallel_trials.one_sweep): TPE + median pruner and nothing else of ours
SWEEP = ["hydra/sweeper/sampler=tpe", "study.enqueue_recipe=false", "study.proofs=false",
         "hydra.sweeper.remeasure=true", "study.guide.top_k=0",
         "hydra.sweeper.max_consecutive_failures=1000", f"trial.steps={STEPS}", "validate.verl=false",
         "tracking.enabled=false", "runner=estimate", "hardware=a2_64g", "model=qwen3_8b"]


def write_truth(land: Landscape, path: Path) -> None:
    path.write_text(json.dumps({config_key(list(k)): [t.tok_s, t.phase or "vllm_start", t.oom_at_start, t.step_s]
                                for k, t in land.truth.items()}))


def run_sweep(cluster: SlurmCluster, work: Path, truth: Path, mode: str, args: argparse.Namespace,
              seed: int) -> float:
    """One `-m` sweep in `work`; returns its process's wall seconds."""
    work.mkdir(parents=True)
    cmd = [sys.executable, str(APP), "-m", f"hydra.sweep.dir={work / 'sweep'}", *SWEEP, *SPACE_LINES, *SLURM,
           f"hydra.launcher.name=pt-{work.name}", f"hydra.sweeper.schedule={mode}",
           f"hydra.sweeper.n_jobs={args.slots}", f"hydra.sweeper.n_trials={args.trials}",
           f"hydra.sweeper.sampler.seed={seed}", f"+bench.truth={truth}", f"+bench.scale={args.scale}",
           f"+bench.startup_s={search_methods.STARTUP_S}", f"+bench.events={work / 'events'}"]
    env = {**cluster.client_env(), "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "VERLSWEEP_PLAN_TRAINER": "analytic"}
    env.pop("MLFLOW_TRACKING_URI", None)
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True, timeout=SWEEP_TIMEOUT_S)
    wall = time.monotonic() - started
    (work / "sweep.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        raise SystemExit(f"sweep failed ({work / 'sweep.log'}):\n{proc.stderr[-3000:]}")
    return wall


def _ts(d: datetime | None) -> float:
    assert d is not None
    return d.timestamp()


def _sacct_jobs(cluster: SlurmCluster, name: str) -> list[tuple[float, float]]:
    """(start, end) of each job of this name, from sacct (whole seconds)."""
    out = cluster.run("sacct", "-X", "-a", "-n", "-P", f"--name={name}", "-o", "JobID,Start,End,State")
    jobs = []
    for line in out.splitlines():
        _, start, end, _ = line.split("|")
        jobs.append((datetime.fromisoformat(start).timestamp(), datetime.fromisoformat(end).timestamp()))
    return jobs


def measure(cluster: SlurmCluster, work: Path, land: Landscape, args: argparse.Namespace) -> dict[str, Any]:
    storage = f"sqlite:///{work / DB}"
    [summary] = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=summary.study_name, storage=storage).get_trials(deepcopy=False)
    starts: Counter[int] = Counter()
    body: dict[int, dict[str, float]] = {}
    for line in (work / "events").read_text().splitlines():
        kind, number, t, _ = line.split()
        body.setdefault(int(number), {})[kind] = float(t)
        starts[int(number)] += kind == "start"
    asked = min(_ts(t.datetime_start) for t in trials)
    told = {t.number: _ts(t.datetime_complete) for t in trials if t.datetime_complete}
    wall = max(told.values()) - asked
    busy = sum(b["end"] - b["start"] for b in body.values() if "end" in b)
    jobs = _sacct_jobs(cluster, f"pt-{work.name}")
    hits = [told[t.number] for t in trials if t.user_attrs.get("outcome") == "completed" and t.values
            and t.values[0] >= parallel_trials.TARGET * land.best]
    reach = min(hits) if hits else asked + wall
    ends = sorted(b["end"] for b in body.values() if "end" in b)
    refill = []
    for t in trials:
        b = body.get(t.number)
        freed = [e for e in ends if e <= _ts(t.datetime_start)]
        if b and freed:
            refill.append(b["start"] - freed[-1])
    return {"wall_s": wall, "util": busy / (args.slots * wall),
            "job_util": sum(e - s for s, e in jobs) / (args.slots * wall),
            "dh_target": (reach - asked) * args.scale * args.slots * WORLD / 3600, "missed": 0 if hits else 1,
            "lost": sum(not t.state.is_finished() for t in trials) + (args.trials - len(trials)),
            "twice": sum(c > 1 for c in starts.values()), "jobs": len(jobs),
            "start_lat": statistics.median(b["start"] - _ts(t.datetime_start) for t in trials
                                           if (b := body.get(t.number))),
            "end_lat": statistics.median(told[n] - b["end"] for n, b in body.items() if n in told and "end" in b),
            "refill": statistics.median(refill) if refill else float("nan")}


def main(args: argparse.Namespace) -> None:
    reason = missing()
    if reason:
        print(f"skipped: no real Slurm here ({reason})")
        return
    # `timeout` / kill: stop the cluster's daemons on the way out (the finally below), not leave them running
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"stopped by signal {signum}"))
    land = hand_written(args.landscape, HAND_WRITTEN[args.landscape], all_configs(space()))
    print(f"{args.trials} trials, {args.slots} slots, landscape {args.landscape!r}, seeds {args.seeds}; "
          f"time scale 1/{args.scale:g}: start-up {search_methods.STARTUP_S / args.scale:.1f} s, a step "
          f"{min(t.step_s for t in land.truth.values()) / args.scale:.1f}-"
          f"{max(t.step_s for t in land.truth.values()) / args.scale:.1f} s")
    with tempfile.TemporaryDirectory(prefix="parallel-trials-slurm-") as tmp:
        root = Path(args.keep or tmp)
        root.mkdir(parents=True, exist_ok=True)
        truth = root / "truth.json"
        write_truth(land, truth)
        started = time.monotonic()
        cluster = SlurmCluster(root / "slurm", oversubscribe=args.slots).start()
        print(f"Slurm up in {time.monotonic() - started:.0f} s")
        rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
        try:
            for seed in range(args.seeds):
                # batch first on even seeds, async first on odd ones: neither always gets the quieter machine
                for mode in ("batch", "async") if seed % 2 == 0 else ("async", "batch"):
                    work = root / f"{mode}{seed}"
                    proc_wall = run_sweep(cluster, work, truth, mode, args, seed)
                    got = measure(cluster, work, land, args)
                    got["proc_wall"] = proc_wall
                    rows.setdefault(("Slurm", mode), []).append(got)
                    print(f"  seed {seed} {mode}: sweep process {proc_wall:.0f} s", flush=True)
                    fake = parallel_trials.one_sweep(land, seed, args.trials, args.slots, mode == "batch")
                    fake["wall_s"] = fake["wall_h"] * 3600 / args.scale
                    rows.setdefault(("fake clock", mode), []).append(fake)
        finally:
            cluster.stop()
        print(f"total {time.monotonic() - started:.0f} s (medians over seeds; wall in seconds at this scale)")
        print(f"{'where':<11} {'schedule':<8} {'wall s':>7} {'util':>5} {'job util':>9} {'dev-h to 3%':>12} "
              f"{'lost':>5} {'twice':>6} {'jobs':>5} {'start lat':>10} {'end lat':>8} {'refill':>7}")
        walls = {}
        for (where, mode), runs in sorted(rows.items(), key=lambda kv: (kv[0][0] != "fake clock", kv[0][1])):
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0] if k != "missed"}
            walls[where, mode] = med["wall_s"]
            missed = f" ({sum(r['missed'] for r in runs)}>)" if any(r["missed"] for r in runs) else ""
            slurm = (f"{med['job_util']:>9.0%} ", f" {sum(r['jobs'] for r in runs):>5} {med['start_lat']:>9.1f}s "
                     f"{med['end_lat']:>7.1f}s {med['refill']:>6.1f}s") if where == "Slurm" else (f"{'':>9} ", "")
            print(f"{where:<11} {mode:<8} {med['wall_s']:>7.1f} {med['util']:>5.0%} {slurm[0]}"
                  f"{med['dh_target']:>8.1f}{missed:<5} {sum(r['lost'] for r in runs):>4} "
                  f"{sum(r['twice'] for r in runs):>6}{slurm[1]}")
        for where in ("fake clock", "Slurm"):
            print(f"{where}: async wall / batch wall {walls[where, 'async'] / walls[where, 'batch']:.2f}")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="parallel_trials.py on a real Slurm")
    p.add_argument("--trials", type=int, default=16)
    p.add_argument("--slots", type=int, default=4)
    p.add_argument("--seeds", type=int, default=1)
    p.add_argument("--scale", type=float, default=200.0, help="cost-model seconds per second of sleep")
    p.add_argument("--keep", help="a new folder to keep the cluster's logs, sweeps and events in")
    p.add_argument("--landscape", default="drawn 1", choices=sorted(HAND_WRITTEN))
    return p


if __name__ == "__main__":
    main(parser().parse_args())
