"""System metrics of a trial's MLflow run: MLflow's own (CPU, host RAM, disk, network) plus the devices.

verl logs only torch's allocator peak (`actor/perf/max_memory_allocated_gb`, in the actor update), so
vLLM's KV pool, HCCL buffers and graph pools never show in its metrics, and MLflow's system metrics
know NVIDIA and AMD GPUs only. MLflow's SystemMetricsMonitor (mlflow/system_metrics/
system_metrics_monitor.py in 3.17) samples and logs on its own thread; it takes a list of monitors,
so the device readings join it as one more monitor and are logged under its `system/` prefix:
`system/npu_<i>_hbm_used_gb`, `_hbm_total_gb`, `_aicore_util_pct`, `_power_w`, `_temp_c` (`gpu_<i>_...`
and `_util_pct` on CUDA). The highest HBM reading of any device is kept as the run's
`peak_device_hbm_gb`, with the phase the step log places it in.
"""
from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from verlsweep.trial.devices import DeviceReader

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DevicePeak:
    """The highest HBM in use seen on any device of the trial, and when (wall-clock seconds)."""

    hbm_gb: float
    device: str
    at: float


def _device_monitor_class() -> type:
    from mlflow.system_metrics.metrics.base_metrics_monitor import BaseMetricsMonitor

    class DeviceMetrics(BaseMetricsMonitor):
        """A BaseMetricsMonitor over a DeviceReader, restricted to the trial's visible devices."""

        def __init__(self, reader: DeviceReader, visible: set[int] | None) -> None:
            super().__init__()
            self.reader = reader
            self.visible = visible
            self.peak: DevicePeak | None = None
            self._lock = threading.Lock()

        def collect_metrics(self) -> None:
            try:
                readings, _ = self.reader.read()
            except Exception as exc:  # noqa: BLE001 - a reader bug must not stop CPU/RAM sampling or the trial
                log.warning("device monitor: %s", exc)
                return
            now = time.time()
            kind = self.reader.kind
            util = "aicore_util_pct" if kind == "npu" else "util_pct"
            for r in readings:
                if self.visible is not None and r.index not in self.visible:
                    continue
                p = f"{kind}_{r.index}_"
                self._metrics[p + "hbm_used_gb"].append(r.hbm_used_gb)
                self._metrics[p + "hbm_total_gb"].append(r.hbm_total_gb)
                for name, value in ((util, r.util_pct), ("power_w", r.power_w), ("temp_c", r.temp_c)):
                    if value is not None:
                        self._metrics[p + name].append(value)
                with self._lock:
                    if self.peak is None or r.hbm_used_gb > self.peak.hbm_gb:
                        self.peak = DevicePeak(r.hbm_used_gb, f"{kind} {r.index}", now)

        def aggregate_metrics(self) -> dict[str, float]:
            # the last reading, not a mean: a peak between two publishes must not be averaged away
            return {k: round(v[-1], 3) for k, v in self._metrics.items() if v}

    return DeviceMetrics


class TrialMonitor:
    """MLflow's SystemMetricsMonitor for one child run, with the trial's devices added."""

    def __init__(self, run_id: str, uri: str, interval: float, reader: DeviceReader | None,
                 visible: set[int] | None) -> None:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        # its start / stop / terminated INFO lines, four per trial, say nothing the trial line does not
        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
        self._mon: Any = SystemMetricsMonitor(run_id, sampling_interval=interval, tracking_uri=uri)
        # MLflow's own NVIDIA/AMD monitors would log the same devices a second time under other names
        self._mon.monitors = [m for m in self._mon.monitors if type(m).__name__ not in ("GPUMonitor", "ROCMMonitor")]
        self.devices = _device_monitor_class()(reader, visible) if reader is not None else None
        if self.devices is not None:
            self._mon.monitors.append(self.devices)

    def start(self) -> TrialMonitor:
        self._mon.start()
        return self

    def stop(self) -> DevicePeak | None:
        """Stop sampling; what was sampled after the last publish is published too (MLflow's loop
        drops it when the run ends between two publishes, which is every trial shorter than the
        interval)."""
        try:
            self._mon.finish()
            if any(m.metrics for m in self._mon.monitors):
                self._mon.publish_metrics(self._mon.aggregate_metrics())
                self._mon.mlflow_logger.flush()
        except Exception as exc:  # noqa: BLE001 - system metrics are extras: the trial's result stands
            log.warning("MLflow system metrics: %s", exc)
        return self.devices.peak if self.devices is not None else None


def phase_of(at: float, step_times: dict[int, float]) -> str:
    """Where a moment falls in the trial: before the first step's metrics arrived (model load, engine
    start, the first rollout), during step N (after step N-1's metrics, up to step N's), or after the last."""
    steps = sorted((t, s) for s, t in step_times.items() if s >= 1)
    if not steps or at <= steps[0][0]:
        return "step 1 (incl. start-up)" if steps else "start-up (no step logged)"
    for t, s in steps:
        if at <= t:
            return f"step {s}"
    return f"after step {steps[-1][1]}"
