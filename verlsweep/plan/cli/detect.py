"""A hardware profile (conf/hardware/<name>.yaml) for a device the repo does not know yet.

Sources, in order of preference:
* `npu-smi info` text (run now, or recorded in a file): chip name, number of devices (A3 cards show
  two chips, each a device to verl) and HBM used / total per device (docs/ascend.md, npu-smi output);
* torch: `torch.npu` / `torch.cuda` device count, name and `mem_get_info` (free, total).

What no tool reports (peak bf16 FLOPs, HBM bandwidth, host link) comes from KNOWN_CHIPS by chip name
or from the command line; an unknown chip without them is refused rather than guessed.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import yaml

from verlsweep.common.names import GIB, MIB
from verlsweep.config import Hardware
from verlsweep.plan.predictor.inputs import NUMBERS

# Per chip: verl/utils/flops_counter.py MFU denominators and docs/ascend.md, Hardware (bandwidths
# marked unverified there).
KNOWN_CHIPS: dict[str, dict[str, float]] = {
    "910B1": {"bf16_tflops": 354, "hbm_bandwidth_gbs": 1600, "host_link_gbs": 64},
    "910B2": {"bf16_tflops": 354, "hbm_bandwidth_gbs": 1600, "host_link_gbs": 64},
    "910B2C": {"bf16_tflops": 354, "hbm_bandwidth_gbs": 1600, "host_link_gbs": 64},
    "910B3": {"bf16_tflops": 313, "hbm_bandwidth_gbs": 1600, "host_link_gbs": 64},
    "910B4": {"bf16_tflops": 280, "hbm_bandwidth_gbs": 800, "host_link_gbs": 64},
    "910B4-1": {"bf16_tflops": 280, "hbm_bandwidth_gbs": 1600, "host_link_gbs": 64},
    "Ascend910": {"bf16_tflops": 354, "hbm_bandwidth_gbs": 1600, "host_link_gbs": 64},   # A3 die
    "A100": {"bf16_tflops": 312, "hbm_bandwidth_gbs": 2039, "host_link_gbs": 32},
    "H100": {"bf16_tflops": 989, "hbm_bandwidth_gbs": 3350, "host_link_gbs": 64},
    "H800": {"bf16_tflops": 989, "hbm_bandwidth_gbs": 3350, "host_link_gbs": 64},
    "H200": {"bf16_tflops": 989, "hbm_bandwidth_gbs": 4800, "host_link_gbs": 64},
    "H20": {"bf16_tflops": 148, "hbm_bandwidth_gbs": 4000, "host_link_gbs": 64},
}

# `| 0     910B3               | OK            | 92.1   48   0 / 0 |` : the NPU row of a device block
# (power W and temperature C; the second die of an A3 NPU shows power as `-`)
_NPU_ROW = re.compile(r"^\|\s*(\d+)\s+(\S+)\s*\|\s*([A-Za-z]+)\s*\|\s*([\d.]+|-)?\s*([\d.]+|-)?")
# `| <bus-id> | 12   0 / 0   3369 / 65536 |` : AICore %, memory used/total, HBM used/total of a chip row
_CHIP_USAGE = re.compile(r"\|\s*([\d.]+|-)\s+\d+\s*/\s*\d+\s+\d+\s*/\s*\d+\s*\|\s*$")
# `| 1       0                 | 45678         | python3                  | 12345                   |`
_PROCESS_ROW = re.compile(r"^\|\s*(\d+)\s+(\d+)\s*\|\s*(\d+)\s*\|\s*(\S.*?)\s*\|\s*(\d+)\s*\|\s*$")
# `| 0                         | 0000:C1:00.0  | 0  0 / 0  3369 / 65536 |` : a chip row (A3: `| 1   1 |`)
_CHIP_ROW = re.compile(r"^\|\s*(\d+)(?:\s+(\d+))?\s*\|\s*([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d)"
                       r"\s*\|.*?(\d+)\s*/\s*(\d+)\s*\|\s*$")


class DetectError(RuntimeError):
    """Nothing usable was found; the message says what to do instead."""


@dataclass
class Device:
    npu: int
    chip: int
    name: str
    hbm_used_mb: float
    hbm_total_mb: float
    aicore_pct: float | None = None
    power_w: float | None = None
    temp_c: float | None = None


@dataclass(frozen=True)
class DeviceProcess:
    """A row of npu-smi's process table: which process holds how much HBM on which NPU / chip."""

    npu: int
    chip: int
    pid: int
    name: str
    memory_mb: float


@dataclass(frozen=True)
class Profile(Hardware):
    """A detected device: its `Hardware` (what goes under `hardware:`) and where it came from."""

    chip: str = ""
    notes: list[str] = field(default_factory=list)

    def hardware_node(self, description: str) -> dict[str, Any]:
        """The profile's `hardware:` node: the planner's numbers and, when known, the node's CPUs; `device`
        and `visible_devices_env` are left to the `/device` option the file picks."""
        values = {k: round(v, 2) if isinstance(v, float) else v for k in NUMBERS for v in (getattr(self, k),)}
        if self.cpus is not None:
            values["cpus"] = self.cpus
        return {"name": self.name, "description": description, **values}


def _number(raw: str | None) -> float | None:
    return None if raw in (None, "-") else float(raw)


def parse_npu_smi(text: str) -> list[Device]:
    """Devices of an `npu-smi info` table: one per chip row, named by the NPU row above it, in the
    order of the table (on A2 and A3 that order is the logical device id ASCEND_RT_VISIBLE_DEVICES uses).

    The process table at the bottom (`| NPU Chip | Process id | ...`) has no Bus-Id column and is
    skipped by construction.
    """
    devices: list[Device] = []
    current: tuple[int, str, float | None, float | None] | None = None
    for line in text.splitlines():
        line = line.rstrip()
        chip = _CHIP_ROW.match(line)
        if chip and current is not None:
            usage = _CHIP_USAGE.search(line)
            devices.append(Device(npu=current[0], chip=int(chip.group(1)), name=current[1],
                                  hbm_used_mb=float(chip.group(4)), hbm_total_mb=float(chip.group(5)),
                                  aicore_pct=_number(usage.group(1)) if usage else None,
                                  power_w=current[2], temp_c=current[3]))
            current = None
            continue
        npu = _NPU_ROW.match(line)
        if npu and not npu.group(2).startswith(("Name", "Chip")):
            current = (int(npu.group(1)), npu.group(2), _number(npu.group(4)), _number(npu.group(5)))
    return devices


def parse_npu_smi_processes(text: str) -> list[DeviceProcess]:
    """The process table of `npu-smi info` (`No running processes found in NPU n` rows give nothing)."""
    return [DeviceProcess(npu=int(m.group(1)), chip=int(m.group(2)), pid=int(m.group(3)), name=m.group(4),
                          memory_mb=float(m.group(5)))
            for line in text.splitlines() if (m := _PROCESS_ROW.match(line.rstrip()))]


def profile_from_devices(devices: list[Device], *, name: str, host_memory_gb: float,
                         overrides: dict[str, float] | None = None) -> Profile:
    if not devices:
        raise DetectError("no device rows found in the npu-smi text (expected `| <id>  <chip> | OK | ...` "
                          "followed by a `| <chip> | <bus-id> | ... used / total |` row per device)")
    chips = {d.name for d in devices}
    totals = {d.hbm_total_mb for d in devices}
    if len(chips) > 1 or len(totals) > 1:
        raise DetectError(f"mixed devices on one node ({sorted(chips)}, HBM {sorted(totals)} MB): "
                          "write one profile per device type")
    chip = devices[0].name
    total_gb = devices[0].hbm_total_mb * MIB / GIB
    # the least-used device is the best view of the idle reservation (others may run jobs)
    idle_gb = min(d.hbm_used_mb for d in devices) * MIB / GIB
    notes = [f"measured by npu-smi: {len(devices)} devices of {chip}, {devices[0].hbm_total_mb:.0f} MB each, "
             f"least used {idle_gb * 1024:.0f} MB",
             "hbm_usable_gb: assumed HBM total minus the idle reservation (npu-smi does not show torch's capacity)"]
    if idle_gb > 0.1 * total_gb:
        notes.append("every device was busy: idle_reserved_gb includes other processes' memory")
    perf = _chip_numbers(chip, overrides or {})
    return Profile(
        name=name, device="npu", cpus=None, visible_devices_env=None, chip=chip, devices_per_node=len(devices),
        nnodes=1, hbm_total_gb=total_gb,
        # torch's total capacity is HBM minus the driver's share (60.96 GiB on a 64 GiB 910B3);
        # npu-smi cannot show it, total - idle is the estimate
        hbm_usable_gb=total_gb - idle_gb, idle_reserved_gb=idle_gb, host_memory_gb=host_memory_gb,
        notes=notes, **perf,
    )


def profile_from_torch(torch_mod: Any, *, name: str, host_memory_gb: float,
                       overrides: dict[str, float] | None = None) -> Profile:
    """Profile from torch's view of the devices (`torch.npu` with torch_npu, else `torch.cuda`)."""
    for kind in ("npu", "cuda"):
        backend = getattr(torch_mod, kind, None)
        if backend is not None and backend.is_available() and backend.device_count() > 0:
            break
    else:
        raise DetectError("torch sees no NPU or GPU here; run detect on the accelerator node, or pass "
                          "--from-npu-smi FILE with `npu-smi info` output recorded there")
    count = backend.device_count()
    free, total = backend.mem_get_info(0)
    chip = str(backend.get_device_name(0))
    perf = _chip_numbers(chip, overrides or {})
    usable_gb = total / GIB
    return Profile(
        name=name, device=kind, cpus=None, visible_devices_env=None, chip=chip, devices_per_node=count, nnodes=1,
        # torch's total is already net of the driver's share; what this process sees in use is the rest
        hbm_total_gb=usable_gb, hbm_usable_gb=usable_gb, idle_reserved_gb=(total - free) / GIB,
        host_memory_gb=host_memory_gb,
        notes=[f"measured by torch.{kind}: {count} x {chip}, mem_get_info free {free / GIB:.2f} / total "
               f"{usable_gb:.2f} GiB"],
        **perf,
    )


class ChipNumbers(TypedDict):
    """A chip's speeds: from KNOWN_CHIPS, or the command line's --bf16-tflops and the like."""
    bf16_tflops: float
    hbm_bandwidth_gbs: float
    host_link_gbs: float


def _chip_numbers(chip: str, overrides: dict[str, float]) -> ChipNumbers:
    keys = ("bf16_tflops", "hbm_bandwidth_gbs", "host_link_gbs")
    known = next((v for k, v in KNOWN_CHIPS.items() if k.lower() == chip.lower()), None)
    if known is None:   # torch names: "NVIDIA H100 80GB HBM3" -> H100
        known = next((v for k, v in sorted(KNOWN_CHIPS.items(), key=lambda kv: -len(kv[0]))
                      if re.search(rf"\b{re.escape(k)}\b", chip, re.IGNORECASE)), None)
    out = {k: overrides[k] for k in keys if overrides.get(k) is not None}
    missing = [k for k in keys if k not in out and known is None]
    if missing:
        raise DetectError(f"chip {chip!r} is not in verlsweep.plan.cli.detect.KNOWN_CHIPS: pass "
                          + ", ".join(f"--{k.replace('_', '-')}" for k in missing))
    value = {k: float(out.get(k, known[k] if known else 0.0)) for k in keys}
    return ChipNumbers(bf16_tflops=value["bf16_tflops"], hbm_bandwidth_gbs=value["hbm_bandwidth_gbs"],
                       host_link_gbs=value["host_link_gbs"])


def run_npu_smi() -> str:
    exe = shutil.which("npu-smi")
    if exe is None:
        raise DetectError("npu-smi is not on PATH; on the accelerator node record `npu-smi info > npu_smi.txt` "
                          f"and `free -g > {FREE_FILE}` side by side and pass --from-npu-smi npu_smi.txt, or "
                          "run detect there (--torch for torch's view)")
    return subprocess.run([exe, "info"], check=True, capture_output=True, text=True, timeout=60).stdout


FREE_FILE = "free.txt"     # `free -g` recorded beside a `npu-smi info` file, on the same node
_FREE_MEM_ROW = re.compile(r"^Mem:\s+(\d+(?:\.\d+)?)")


def parse_free_g(text: str) -> float | None:
    """The `Mem:` total of `free -g` output (GiB), or None."""
    for line in text.splitlines():
        match = _FREE_MEM_ROW.match(line.strip())
        if match:
            return float(match.group(1))
    return None


def recorded_host_memory_gb(npu_smi_file: Path) -> tuple[float, Path] | None:
    """Host RAM from `free -g` output recorded beside an npu-smi file (free.txt), with its path."""
    path = npu_smi_file.with_name(FREE_FILE)
    if not path.is_file():
        return None
    gb = parse_free_g(path.read_text())
    if gb is None:
        raise DetectError(f"{path}: no `Mem:` row; record it with `free -g > {FREE_FILE}`")
    return gb, path


def host_memory_gb() -> float:
    import psutil

    return psutil.virtual_memory().total / GIB


def write_profile(profile: Profile, conf_dir: Path, *, force: bool = False) -> Path:
    """conf/hardware/<name>.yaml in the shape of the shipped profiles (device defaults + `hardware:`)."""
    if not re.fullmatch(r"[A-Za-z][\w-]*", profile.name):
        raise DetectError(f"--name {profile.name!r}: letters, digits, '_' or '-', starting with a letter")
    if profile.name == "auto":
        raise DetectError("--name auto is reserved for the `hardware=auto` placeholder")
    path = conf_dir / "hardware" / f"{profile.name}.yaml"
    if path.exists() and not force:
        raise DetectError(f"{path} exists; pass --force to overwrite it")
    description = f"{profile.devices_per_node}x {profile.chip}, detected by `python -m verlsweep.plan detect`"
    header = ["# @package _global_", f"# {description}."]
    header += [f"# {n}" for n in profile.notes]
    body = {"defaults": [{"/device": profile.device}], "hardware": profile.hardware_node(description)}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(header) + "\n" + yaml.safe_dump(body, sort_keys=False))
    return path
