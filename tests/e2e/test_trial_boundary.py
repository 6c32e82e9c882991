"""The trial boundary end to end: `python sweep.py -m` runs the verl stand-in with Ray's default colours on
(the entrypoint re-enables them: RAY_COLOR_PREFIX=1 wins over the 0 the runner sets) and a 5 s stall limit.

* `noisy` prints lines healthy runs print (an allocator retry warning, an HCCL env warning, Ray's
  worker-failure summary counting 0 OOM kills), then loads for 8 s -- longer than the stall limit -- and
  trains: it must complete.
* `oom_linger` logs a step, then a worker's NPU OOM, and keeps running without steps: it must end as `oom`
  within runner.stall_timeout + 10 s of the OOM text.
* `ray_actor_died` crashes: its excerpt must hold the exception line without escape codes.
"""
from __future__ import annotations

import datetime as dt
import json
import re
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import STANDIN, copy_store, mode_sweep, new_mark, run_sweep, survivors, tiny_overrides

pytestmark = pytest.mark.slow

MODES = ["noisy", "oom_linger", "ray_actor_died"]
STALL_S = 5


@pytest.fixture(scope="module")
def boundary_sweep(tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path_factory):
    work = tmp_path_factory.mktemp("boundary_sweep")
    base = tiny_overrides(tiny_model_dir, gsm8k_dir, work / "out", copy_store(empty_mlflow_db, work))
    coloured = f"runner.entrypoint=[env,'RAY_COLOR_PREFIX=1',{sys.executable},{STANDIN}]"
    return mode_sweep(work, base, "e2e-boundary", MODES, [
        coloured, "validate.verl=false", f"runner.stall_timeout={STALL_S}", "runner.startup_timeout=120",
        "runner.grace_period=2", "+env.VERL_STANDIN_STARTUP_SECONDS=8", "+env.VERL_STANDIN_STEP_SECONDS=0.2",
        "verl.trainer.logger=[console,file]"])


def test_on_an_existing_ray_cluster_verl_still_logs_into_the_trials_run_and_file(tiny_model_dir, gsm8k_dir,
                                                                               store, tmp_path):
    """The stand-in drops the driver's environment for its actor when RAY_ADDRESS is set, as a cluster's
    raylet does: MLFLOW_RUN_ID and VERL_FILE_LOGGER_PATH arrive only through Ray's runtime_env."""
    mark = new_mark()
    proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store),
                                f"runner.entrypoint=[python,{STANDIN}]", "validate.verl=false", "trial.steps=2",
                                "runner.ray_address=127.0.0.1:6379"], mark)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.data.tags["trial.outcome"] == "completed"
    assert "trial.metrics_source" not in run.data.tags               # verl's own logger wrote the steps
    assert [m.step for m in client.get_metric_history(run.info.run_id, "perf/throughput")] == [1, 2]
    (metrics,) = (tmp_path / "out").rglob("metrics.jsonl")
    assert [json.loads(line)["step"] for line in metrics.read_text().splitlines()] == [1, 2]
    assert survivors(mark) == []


def artifact(sweep, run, name: str, tmp_path: Path) -> str:
    return Path(MlflowClient(sweep["uri"]).download_artifacts(run.info.run_id, name, str(tmp_path))).read_text()


def test_the_sweep_ran_each_trial_and_left_no_process(boundary_sweep):
    assert boundary_sweep["proc"].returncode == 0, boundary_sweep["proc"].stderr[-3000:]
    assert sorted(boundary_sweep["runs"]) == sorted(MODES)
    assert survivors(boundary_sweep["mark"]) == []


def test_harmless_lines_then_a_start_longer_than_the_stall_limit_still_complete(boundary_sweep, tmp_path):
    run = boundary_sweep["runs"]["noisy"]
    assert (run.info.status, run.data.tags["trial.outcome"]) == ("FINISHED", "completed")
    tail = artifact(boundary_sweep, run, "log_tail.txt", tmp_path)
    for harmless in ("Failed to allocate pinned buffer, retrying", "HCCL_BLOCKING_WAIT is deprecated",
                     "0 Workers (tasks / actors) killed due to memory pressure (OOM)"):
        assert harmless in tail


def test_an_oom_text_then_no_progress_is_oom_within_the_stall_limit_plus_10_s(boundary_sweep):
    run = boundary_sweep["runs"]["oom_linger"]
    assert (run.info.status, run.data.tags["trial.outcome"]) == ("FAILED", "oom")
    assert "after a fatal error" in run.data.tags["trial.reason"]
    log = next(p for p in (boundary_sweep["work"] / "out").rglob("trial.log") if "Unhandled error" in p.read_text())
    stamp = re.search(r"^(\S+ \S+)\tERROR worker\.py:\d+ -- Unhandled error", log.read_text(), re.M).group(1)
    printed = dt.datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
    assert run.info.end_time / 1000 - printed <= STALL_S + 10


def test_with_rays_colours_on_the_crash_excerpt_holds_the_exception_line_without_escape_codes(boundary_sweep,
                                                                                              tmp_path):
    run = boundary_sweep["runs"]["ray_actor_died"]
    assert run.data.tags["trial.outcome"] == "crash"
    excerpt = artifact(boundary_sweep, run, "excerpt.txt", tmp_path)
    assert "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunnerV1.run() (pid=" in excerpt
    assert "\x1b" not in excerpt
    raw = next(p for p in (boundary_sweep["work"] / "out").rglob("trial.log") if "ActorDiedError" in p.read_text())
    assert "\x1b[36mray::TaskRunnerV1.run()\x1b[39m" in raw.read_text()       # Ray did colour it
