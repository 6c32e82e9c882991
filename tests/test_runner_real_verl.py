"""runner=verl with the REAL installed verl on a CPU-only box: it gets through config, Ray, tokenizer and
data and stops at its device check; the trial must end as `no_devices`, FAILED in MLflow with the excerpt,
and no verl or Ray process (raylet, gcs_server, workers) of the trial may be left.

Timings and what verl needs to get there: tests/fixtures/REAL_VERL_NOTES.md (~25 s for ReMax's legacy
trainer; the v1 trainer needs TransferQueue storage units that a 2-core box cannot place).
"""
from __future__ import annotations

from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.trial_helpers import new_mark, run_sweep, survivors, tiny_overrides

pytestmark = pytest.mark.slow

DEVICE_CHECK = "Total available GPUs 0 is less than total desired GPUs 8"


def test_real_verl_without_accelerators_is_no_devices_and_leaves_no_process(tiny_model_dir, gsm8k_dir, store,
                                                                            tmp_path):
    mark = new_mark()
    offline = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store),
                                "algorithm=remax", "verl.data.max_prompt_length=256", "runner=verl",
                                "runner.startup_timeout=300"], mark, env=offline, timeout=400)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]      # a single run that failed
    assert "trial no_devices" in proc.stdout
    assert "runner=estimate" in proc.stdout                                      # what to do instead

    (log,) = (tmp_path / "out").rglob("trial.log")
    text = log.read_text()
    assert "Started a local Ray instance" in text        # Ray really ran, so the survivor check means something
    assert "Connecting to existing Ray cluster" not in text

    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FAILED"
    assert run.data.tags["trial.outcome"] == "no_devices"
    assert run.data.tags["sweep.algorithm"] == "remax"
    excerpt = Path(client.download_artifacts(run.info.run_id, "excerpt.txt", str(tmp_path / "dl"))).read_text()
    assert DEVICE_CHECK in excerpt

    assert survivors(mark) == []
