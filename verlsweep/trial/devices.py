"""Reading the accelerators a trial uses, from outside the trial: `npu-smi info` on Ascend, NVML on CUDA.

Never torch_npu or torch.cuda here: importing either in the sweep process would create a device
context on the very devices the trial is about to need. A reader that cannot read (no `npu-smi`, no
NVML, an unparsable table) says so once and from then on returns nothing: device readings are a view
on a trial, never a reason for it to fail.
"""
from __future__ import annotations

import functools
import logging
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from verlsweep.common.names import GIB, MIB
from verlsweep.plan.cli.detect import parse_npu_smi, parse_npu_smi_processes

log = logging.getLogger(__name__)

# npu-smi answers in well under a second on an idle node; a hung driver must not hold the monitor
NPU_SMI_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class DeviceReading:
    """One device at one moment; `index` is the logical id the *_VISIBLE_DEVICES variables use."""

    index: int
    hbm_used_gb: float
    hbm_total_gb: float
    util_pct: float | None = None      # AICore % on Ascend, SM utilisation % on CUDA
    power_w: float | None = None
    temp_c: float | None = None


@dataclass(frozen=True)
class DeviceUser:
    """A process holding device memory, as the driver reports it."""

    index: int
    pid: int
    name: str
    memory_gb: float


class DeviceReader(Protocol):
    kind: str                           # "npu" | "gpu": the prefix of the metric names

    def read(self) -> tuple[list[DeviceReading], list[DeviceUser]]:
        ...


class _Once:
    """A reader's failure state: the first failure is a warning, then the reader stays silent."""

    def __init__(self) -> None:
        self.broken = False

    def fail(self, what: str) -> tuple[list[DeviceReading], list[DeviceUser]]:
        if not self.broken:
            log.warning("device monitor off: %s", what)
        self.broken = True
        return [], []


class NpuSmi(_Once):
    """`npu-smi info`: HBM used/total, AICore %, power and temperature per chip, and the process table."""

    kind = "npu"

    def __init__(self, command: str = "npu-smi") -> None:
        super().__init__()
        self.command = command

    def read(self) -> tuple[list[DeviceReading], list[DeviceUser]]:
        if self.broken:
            return [], []
        exe = shutil.which(self.command)
        if exe is None:
            return self.fail(f"`{self.command}` is not on PATH")
        try:
            out = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=NPU_SMI_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return self.fail(f"`{self.command} info` failed: {exc}")
        devices = parse_npu_smi(out.stdout) if out.returncode == 0 else []
        if not devices:
            first = (out.stderr or out.stdout).strip().splitlines()[:1]
            return self.fail(f"`{self.command} info` gave no device rows (exit {out.returncode}"
                             f"{': ' + first[0] if first else ''})")
        # a process row names NPU and chip; the table's order of chips is the logical device order
        order = {(d.npu, d.chip): i for i, d in enumerate(devices)}
        readings = [DeviceReading(i, d.hbm_used_mb * MIB / GIB, d.hbm_total_mb * MIB / GIB, d.aicore_pct,
                                  d.power_w, d.temp_c) for i, d in enumerate(devices)]
        users = [DeviceUser(order[(p.npu, p.chip)], p.pid, p.name, p.memory_mb * MIB / GIB)
                 for p in parse_npu_smi_processes(out.stdout) if (p.npu, p.chip) in order]
        return readings, users


class Nvml(_Once):
    """NVML through nvidia-ml-py (`import pynvml`): the same readings on NVIDIA GPUs."""

    kind = "gpu"

    def __init__(self) -> None:
        super().__init__()
        self._nvml = None

    def _init(self):
        if self._nvml is None:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
        return self._nvml

    def read(self) -> tuple[list[DeviceReading], list[DeviceUser]]:
        if self.broken:
            return [], []
        try:
            nv = self._init()
            readings, users = [], []
            for i in range(nv.nvmlDeviceGetCount()):
                h = nv.nvmlDeviceGetHandleByIndex(i)
                mem = nv.nvmlDeviceGetMemoryInfo(h)
                readings.append(DeviceReading(
                    i, mem.used / GIB, mem.total / GIB, float(nv.nvmlDeviceGetUtilizationRates(h).gpu),
                    _optional(lambda h=h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),          # mW -> W
                    _optional(lambda h=h: float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)))))
                for p in _optional(lambda h=h: nv.nvmlDeviceGetComputeRunningProcesses(h)) or []:
                    users.append(DeviceUser(i, int(p.pid), _process_name(int(p.pid)),
                                            (p.usedGpuMemory or 0) / GIB))
            return readings, users
        except Exception as exc:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, a driver error, ...
            return self.fail(f"NVML: {type(exc).__name__}: {exc}")


def _optional(read):
    try:
        return read()
    except Exception:  # noqa: BLE001 - an optional NVML field: absent is the answer
        return None


def _process_name(pid: int) -> str:
    import psutil

    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return "?"


@functools.cache
def reader_for(device: str) -> DeviceReader:
    """The reader for `hardware.device` (npu or cuda), one per process so a missing tool warns once."""
    return NpuSmi() if device == "npu" else Nvml()


def visible_indices(env: Mapping[str, str], variable: str | None) -> set[int] | None:
    """The device ids a trial may use, from its ASCEND_RT_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES;
    None (all devices) when unset or not a list of ids (e.g. GPU UUIDs)."""
    raw = env.get(variable or "", "").strip()
    if not raw:
        return None
    try:
        return {int(part) for part in raw.split(",") if part.strip()}
    except ValueError:
        return None


def busy_devices(reader: DeviceReader, visible: set[int] | None, idle_gb: float) -> list[str]:
    """One line per device the trial may use whose HBM in use is above `idle_gb`, naming the processes
    the driver says hold it (a leftover trial, another user's job)."""
    readings, users = reader.read()
    lines = []
    for r in readings:
        if (visible is None or r.index in visible) and r.hbm_used_gb > idle_gb:
            holders = [f"pid {u.pid} {u.name} {u.memory_gb:.1f} GB" for u in users if u.index == r.index]
            lines.append(f"{reader.kind} {r.index}: {r.hbm_used_gb:.1f} of {r.hbm_total_gb:.1f} GB in use "
                         f"(idle is {idle_gb:.1f} GB){'; ' + ', '.join(holders) if holders else ''}")
    return lines
