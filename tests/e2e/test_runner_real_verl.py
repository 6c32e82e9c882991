"""runner=verl with the REAL installed verl on a CPU-only box: it gets through config, Ray, tokenizer and
data and stops at its device check; the trial must end as `no_devices`, FAILED in MLflow with the excerpt,
and no verl or Ray process (raylet, gcs_server, workers) of the trial may be left.

Timings and what verl needs to get there: tests/support/fixtures/REAL_VERL_NOTES.md (~25 s for ReMax's legacy
trainer; the v1 trainer needs TransferQueue storage units that a 2-core box cannot place).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import new_mark, run_sweep, survivors, tiny_overrides

pytestmark = pytest.mark.slow

DEVICE_CHECK = "Total available GPUs 0 is less than total desired GPUs 8"


def test_real_verl_without_accelerators_is_no_devices_and_leaves_no_process(tiny_model_dir, gsm8k_dir, store,
                                                                            tmp_path):
    mark = new_mark()
    offline = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store),
                                "algorithm=remax", "verl.data.max_prompt_length=256", "runner=verl",
                                "runner.startup_timeout=300"], mark, env=offline, timeout=400, verl_check=True)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]      # a single run that failed
    assert "trial no_devices" in proc.stdout
    assert "runner=estimate" in proc.stdout                                      # what to do instead

    (log,) = (tmp_path / "out").rglob("trial.log")
    text = log.read_text()
    assert "Started a local Ray instance" in text        # Ray really ran, so the survivor check means something
    assert "Connecting to existing Ray cluster" not in text
    # remax runs verl's legacy trainer (main_ppo_v0.TaskRunner), not TaskRunnerV1: the command says so and verl did
    (command,) = (tmp_path / "out").rglob("command.json")
    assert "trainer.use_v1=False" in json.loads(command.read_text())["argv"]
    assert "ray::TaskRunner.run()" in text

    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED"
    assert run.data.tags["trial.outcome"] == "no_devices"
    assert run.data.tags["sweep.algorithm"] == "remax"
    excerpt = Path(client.download_artifacts(run.info.run_id, "excerpt.txt", str(tmp_path / "dl"))).read_text()
    assert DEVICE_CHECK in excerpt

    assert survivors(mark) == []


# ---- verl's v1 trainer (GRPO) without a storage-unit override: TransferQueue's SimpleStorage asks Ray for a
# placement group of 8 one-CPU bundles (plus its controller) that a 2-CPU Ray can never place.

STORAGE_KEY = "verl.transfer_queue.backend.SimpleStorage.num_data_storage_units"


def _grpo_v1(tiny_model_dir, gsm8k_dir, tmp_path, store, *extra: str) -> list[str]:
    return [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store), "algorithm=grpo",
            "verl.data.max_prompt_length=256", "runner=verl", *extra]


@pytest.mark.skipif(len(os.sched_getaffinity(0)) >= 34, reason="this machine has the CPUs verl asks for")
def test_real_verl_v1_with_too_few_cpus_is_refused_before_launch(tiny_model_dir, gsm8k_dir, store, tmp_path):
    mark = new_mark()
    proc = run_sweep(tmp_path, _grpo_v1(tiny_model_dir, gsm8k_dir, tmp_path, store, "plan.enforce=true"), mark,
                     timeout=300, verl_check=True)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    cpus = len(os.sched_getaffinity(0))
    assert "asks for 34" in proc.stderr and f"has {cpus}" in proc.stderr  # demand and CPUs found
    assert STORAGE_KEY in proc.stderr                                      # the key to change
    assert not list((tmp_path / "out").rglob("trial.log"))                 # verl never started
    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED" and run.data.tags["trial.outcome"] == "infeasible"
    assert survivors(mark) == []


def test_real_verl_v1_with_too_few_cpus_ends_unschedulable_when_launched_anyway(tiny_model_dir, gsm8k_dir,
                                                                                store, tmp_path):
    offline = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    mark = new_mark()
    # ray_init.num_cpus=2 gives verl's Ray this box's 2 CPUs on any machine
    proc = run_sweep(tmp_path, _grpo_v1(tiny_model_dir, gsm8k_dir, tmp_path, store, "plan.enforce=false",
                                        "runner.schedule_timeout=60", "verl.ray_kwargs.ray_init.num_cpus=2"),
                     mark, env=offline, timeout=400, verl_check=True)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "trial unschedulable" in proc.stdout
    # launch -> stopped: verl's start-up on a loaded 2-core box (~60 s) and one probe, not startup_timeout's hour
    duration = float(re.search(r"trial unschedulable, 0 step\(s\), ([\d.]+) s", proc.stdout).group(1))
    assert duration < 150, duration
    (log,) = (tmp_path / "out").rglob("trial.log")
    assert "Started a local Ray instance" in log.read_text()

    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED" and run.data.tags["trial.outcome"] == "unschedulable"
    excerpt = Path(client.download_artifacts(run.info.run_id, "excerpt.txt", str(tmp_path / "dl"))).read_text()
    assert "8 bundles, {CPU: 8}" in excerpt and "CPU 2 total" in excerpt  # pending demand, cluster resources
    assert survivors(mark) == []
