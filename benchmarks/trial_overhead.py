"""Framework time per trial, and how fast a fatal OOM frees the machine for the next trial.

    python benchmarks/trial_overhead.py [--trials 300] [--oom-every 10] [--keep DIR]

Runs one real `python sweep.py -m` (the verlsweep sweeper, TPE, no pruner, one trial at a time) whose
trials run an *instant* stand-in trainer instead of verl: it writes verl's console and file-logger
lines for `trial.steps` steps without sleeping and exits; every `--oom-every`-th trial prints torch_npu's
OOM line after step 1 and exits 1 like verl's driver. Each stand-in records when it started, when it
printed the OOM line and when it ended, so everything between two stand-ins is framework time:
sweeper ask/tell, Hydra job setup, composition and verl validation, planner preflight, MLflow child run
create/finish with artifacts, process launch, supervision and tree cleanup.

Prints (seconds):
  framework time per trial = next stand-in start - this stand-in's end (median, p90, first 30 vs last 30)
  fatal OOM line -> next trial's stand-in start (median, max)
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMES_ENV = "VERLSWEEP_BENCH_TIMES"

INSTANT_TRAINER = textwrap.dedent('''
    """Instant stand-in: verl's step lines and file-logger records, no work, timestamps to $VERLSWEEP_BENCH_TIMES."""
    import json, os, sys, time
    start = time.time()
    args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    steps = int(args.get("trainer.total_training_steps", 5))
    every = int(os.environ.get("BENCH_OOM_EVERY", "0"))
    oom = every > 0 and int(os.environ["BENCH_TRIAL"]) % every == every // 2
    record = {"trial": os.environ.get("BENCH_TRIAL"), "start": start, "oom": oom}
    with open(os.environ["VERL_FILE_LOGGER_PATH"], "wb", buffering=0) as fh:
        for step in range(1, steps + 1):
            data = {"perf/throughput": 1000.0 + step, "actor/perf/max_memory_reserved_gb": 30.0}
            fh.write((json.dumps({"step": step, "data": data}) + "\\n").encode())
            print(f"(TaskRunnerV1 pid={os.getpid()}) step:{step} - perf/throughput:np.float64({1000.0 + step})",
                  flush=True)
            if oom:
                record["oom_line"] = time.time()
                print("torch.OutOfMemoryError: NPU out of memory. Tried to allocate 2.57 GiB (NPU 0; 60.96 GiB "
                      "total capacity; 57.49 GiB already allocated)", flush=True)
                break
    record["end"] = time.time()
    with open(os.environ["VERLSWEEP_BENCH_TIMES"], "a") as out:
        out.write(json.dumps(record) + "\\n")
    sys.exit(1 if oom else 0)
''')

SEARCH_SPACE = textwrap.dedent('''
    # @package _global_
    defaults:
      - override /hydra/sweeper/pruner: none
    hydra:
      sweeper:
        n_trials: {trials}
        n_jobs: 1
        max_consecutive_failures: {trials}
        params:
          verl.actor_rollout_ref.rollout.gpu_memory_utilization: interval(0.3, 0.9)
    study:
      enqueue_recipe: false
''')


def run(trials: int, oom_every: int, work: Path, model_dir: Path, data_dir: Path) -> list[dict]:
    trainer = work / "instant_trainer.py"
    trainer.write_text(INSTANT_TRAINER)
    sweep_dir = work / "bench_conf" / "space"
    sweep_dir.mkdir(parents=True)
    (sweep_dir / "trial_overhead.yaml").write_text(SEARCH_SPACE.format(trials=trials))
    times = work / "times.jsonl"
    env = dict(os.environ, **{TIMES_ENV: str(times)})
    env.pop("MLFLOW_TRACKING_URI", None)
    argv = [
        sys.executable, str(REPO / "sweep.py"), "-m", f"hydra.searchpath=[file://{work / 'bench_conf'}]",
        "space=trial_overhead", "hardware=a2_64g", "model=qwen3_0_6b", f"model.path={model_dir}",
        f"data.dir={data_dir}", "verl.data.train_batch_size=8", "verl.actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "verl.data.max_prompt_length=64", "verl.data.max_response_length=64", "plan.enforce=false",
        f"runner.entrypoint=[python,{trainer}]", "runner.live_tail=0", f"paths.output_root={work / 'out'}",
        f"tracking.uri=sqlite:///{work / 'mlflow.db'}",
        "+env.BENCH_TRIAL=${trial.number}", f"+env.BENCH_OOM_EVERY={oom_every}",
    ]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-5000:])
        raise SystemExit(f"sweep failed with exit {proc.returncode}")
    records = [json.loads(line) for line in times.read_text().splitlines()]
    records.sort(key=lambda r: r["start"])
    print(f"sweep wall time {wall:.1f} s for {len(records)} trials ({trials} asked)")
    return records


def report(records: list[dict]) -> None:
    gaps = [b["start"] - a["end"] for a, b in zip(records, records[1:])]
    oom_to_next = [b["start"] - a["oom_line"] for a, b in zip(records, records[1:]) if a.get("oom_line")]
    standin = [r["end"] - r["start"] for r in records]

    def med(xs: list[float]) -> str:
        return f"{statistics.median(xs):.3f}" if xs else "n/a"

    p90 = sorted(gaps)[int(0.9 * (len(gaps) - 1))] if gaps else float("nan")
    print(f"stand-in own time per trial: median {med(standin)} s")
    print(f"framework time per trial: median {med(gaps)} s, p90 {p90:.3f} s over {len(gaps)} trial gaps")
    print(f"  first 30 trials: median {med(gaps[:30])} s;  last 30 trials: median {med(gaps[-30:])} s")
    print(f"fatal OOM line -> next trial's start: median {med(oom_to_next)} s, "
          f"max {max(oom_to_next):.3f} s over {len(oom_to_next)} OOM trials" if oom_to_next else
          "fatal OOM line -> next trial's start: no OOM trial")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--oom-every", type=int, default=10)
    parser.add_argument("--keep", type=Path, help="work dir to keep (default: a temp dir, removed)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.support.fixtures.tiny_verl import make_gsm8k_parquet, make_tiny_qwen3

    work = args.keep or Path(tempfile.mkdtemp(prefix="trial_overhead-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        model_dir = make_tiny_qwen3(work / "model")
        data_dir = work / "data"
        data_dir.mkdir()
        make_gsm8k_parquet(data_dir)
        report(run(args.trials, args.oom_every, work, model_dir, data_dir))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
