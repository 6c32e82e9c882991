"""The device monitor: npu-smi / NVML readings of a trial's devices in its MLflow run, never a failure."""
from __future__ import annotations

import logging
import os
import sys
import time
import types
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support import fake_npu_smi
from verlsweep.tracking.system_metrics import TrialMonitor, phase_of
from verlsweep.trial import devices


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    """Put a fake npu-smi replaying the given recorded outputs first on PATH."""
    def install(*files: str, exit_code: int = 0) -> Path:
        bin_dir = fake_npu_smi.install(tmp_path / "bin", *files, exit_code=exit_code)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
        return bin_dir
    return install


def test_npu_smi_reader_reads_hbm_aicore_power_and_temperature_of_an_a2_node(on_path):
    on_path("npu_smi_a2_910b3_busy.txt")
    readings, users = devices.NpuSmi().read()
    assert [r.index for r in readings] == list(range(8))
    r0 = readings[0]
    assert r0.hbm_used_gb == pytest.approx(52000 / 1024) and r0.hbm_total_gb == pytest.approx(64.0)
    assert (r0.util_pct, r0.power_w, r0.temp_c) == (87.0, 92.1, 48.0)
    assert [(u.index, u.pid) for u in users] == [(0, 51234), (1, 45678)]


def test_npu_smi_reader_numbers_the_two_dies_of_an_a3_npu_as_separate_devices(on_path):
    on_path("npu_smi_a3.txt")
    readings, _ = devices.NpuSmi().read()
    assert len(readings) == 16
    assert readings[1].power_w is None and readings[1].hbm_used_gb == pytest.approx(3186 / 1024)


@pytest.mark.parametrize("setup", ["missing", "malformed", "failing"])
def test_an_unusable_npu_smi_is_one_warning_then_silence(setup, on_path, monkeypatch, caplog):
    if setup == "missing":
        monkeypatch.setenv("PATH", "/nonexistent")
    else:
        on_path("npu_smi_malformed.txt", exit_code=0 if setup == "malformed" else 255)
    reader = devices.NpuSmi()
    with caplog.at_level(logging.WARNING, logger="verlsweep.trial.devices"):
        assert reader.read() == ([], [])
        assert reader.read() == ([], [])
    assert len(caplog.records) == 1 and "device monitor off" in caplog.text


def _fake_nvml(used_gb: list[float]) -> types.ModuleType:
    """The part of nvidia-ml-py's `pynvml` the reader uses, for len(used_gb) GPUs of 80 GiB."""
    nv = types.ModuleType("pynvml")
    gib = 1024**3
    nv.NVML_TEMPERATURE_GPU = 0
    nv.nvmlInit = lambda: None
    nv.nvmlDeviceGetCount = lambda: len(used_gb)
    nv.nvmlDeviceGetHandleByIndex = lambda i: i
    nv.nvmlDeviceGetMemoryInfo = lambda h: types.SimpleNamespace(used=used_gb[h] * gib, total=80 * gib)
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=50 + h)
    nv.nvmlDeviceGetPowerUsage = lambda h: 300_000
    nv.nvmlDeviceGetTemperature = lambda h, sensor: 60

    def procs(h: int) -> list:
        return [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=int(used_gb[h] * gib))] if used_gb[h] > 5 else []
    nv.nvmlDeviceGetComputeRunningProcesses = procs
    return nv


def test_nvml_reader_reads_each_gpu_and_names_the_processes_holding_memory(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", _fake_nvml([0.5, 40.0]))
    reader = devices.Nvml()
    readings, users = reader.read()
    assert [(r.index, round(r.hbm_used_gb, 1), r.util_pct, r.power_w, r.temp_c) for r in readings] == [
        (0, 0.5, 50.0, 300.0, 60.0), (1, 40.0, 51.0, 300.0, 60.0)]
    busy = devices.busy_devices(reader, visible=None, idle_gb=1.0)
    assert len(busy) == 1 and busy[0].startswith("gpu 1: 40.0 of 80.0 GB") and f"pid {os.getpid()}" in busy[0]


def test_busy_check_only_looks_at_the_devices_the_trial_may_use(on_path):
    on_path("npu_smi_a2_910b3_busy.txt")
    visible = devices.visible_indices({"ASCEND_RT_VISIBLE_DEVICES": "2,3"}, "ASCEND_RT_VISIBLE_DEVICES")
    lines = devices.busy_devices(devices.NpuSmi(), visible, idle_gb=4.3)
    assert [line.split(":")[0] for line in lines] == ["npu 2", "npu 3"]
    on_path("npu_smi_a2_910b3.txt")
    assert devices.busy_devices(devices.NpuSmi(), None, idle_gb=4.3) == []


def test_phase_of_a_reading_follows_the_step_log():
    arrived = {0: 10.0, 1: 20.0, 2: 30.0}       # step 0 is validation before training
    assert phase_of(5.0, arrived) == "step 1 (incl. start-up)"
    assert phase_of(25.0, arrived) == "step 2"
    assert phase_of(31.0, arrived) == "after step 2"
    assert phase_of(1.0, {}) == "start-up (no step logged)"


def test_trial_monitor_logs_device_series_and_mlflow_cpu_metrics_into_the_run(on_path, store):
    on_path("npu_smi_a2_910b3.txt", "npu_smi_a2_910b3_busy.txt")
    client = MlflowClient(store)
    run = client.create_run(client.create_experiment("monitor"))
    mon = TrialMonitor(run.info.run_id, store, 0.3, devices.NpuSmi(), visible={0, 1}).start()
    time.sleep(1.5)
    peak = mon.stop()
    client.set_terminated(run.info.run_id)
    data = client.get_run(run.info.run_id).data.metrics
    assert {"system/npu_0_hbm_used_gb", "system/npu_1_aicore_util_pct", "system/npu_0_power_w"} <= set(data)
    assert not any(k.startswith("system/npu_2_") for k in data)
    assert "system/cpu_utilization_percentage" in data and "system/system_memory_usage_megabytes" in data
    history = client.get_metric_history(run.info.run_id, "system/npu_0_hbm_used_gb")
    assert len(history) >= 2 and max(m.value for m in history) == pytest.approx(52000 / 1024, abs=1e-3)
    assert peak is not None and peak.hbm_gb == pytest.approx(52000 / 1024) and peak.device == "npu 0"
