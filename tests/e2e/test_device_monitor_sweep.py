"""The device monitor through `python sweep.py`: a stand-in trial's MLflow run ends with npu-smi series
and their peak (unit tests: tests/test_device_monitor.py)."""
from __future__ import annotations

import os

import pytest
from mlflow.tracking import MlflowClient

from tests.support import fake_npu_smi
from tests.support.trial_helpers import copy_store, new_mark, run_sweep, standin_entrypoint, survivors, tiny_overrides


@pytest.mark.slow
def test_a_standin_trial_through_sweep_py_ends_with_npu_series_and_its_peak(tmp_path, tiny_model_dir, gsm8k_dir,
                                                                              empty_mlflow_db):
    bin_dir = fake_npu_smi.install(tmp_path / "bin", "npu_smi_a2_910b3.txt", "npu_smi_a2_910b3_busy.txt")
    uri = copy_store(empty_mlflow_db, tmp_path)
    mark = new_mark()
    proc = run_sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri), standin_entrypoint(),
                                "validate.verl=false", "trial.steps=3", "+env.VERL_STANDIN_STEP_SECONDS=0.8",
                                "monitor.interval=0.5", "+env.ASCEND_RT_VISIBLE_DEVICES='0,1,2,3'"], mark,
                     env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = MlflowClient(uri)
    [run] = client.search_runs([e.experiment_id for e in client.search_experiments()])
    data = run.data
    assert {f"system/npu_{i}_hbm_used_gb" for i in range(4)} <= set(data.metrics)
    assert "system/npu_4_hbm_used_gb" not in data.metrics          # not visible to the trial
    assert data.metrics["peak_device_hbm_gb"] == pytest.approx(52000 / 1024, abs=1e-3)
    assert data.tags["peak_device_hbm.device"] == "npu 0" and data.tags["peak_device_hbm.phase"].startswith("step")
    assert len(client.get_metric_history(run.info.run_id, "system/npu_0_hbm_used_gb")) >= 2
    assert fake_npu_smi.calls(bin_dir) >= 3
    assert survivors(mark) == []
