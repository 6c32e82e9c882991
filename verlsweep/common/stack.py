"""The software stack a trial ran on: what the planner does not model but the measurements carry (the
runtime's reserved memory, vLLM's non-KV overhead, the decode efficiency it reaches) is the same for every
device and model of one stack, so the planner's calibration from measured trials is keyed by it.

The parts are read in the process that reads them (the trial's, on its node): package versions with
importlib.metadata (no import of torch or vLLM), the CUDA / CANN driver from the files the drivers install.
The device type and count are planner inputs, not parts of the stack. A stand-in (or a site whose
driver version is elsewhere) states its stack in VERLSWEEP_STACK as `part=version,part=version`.
"""
from __future__ import annotations

import hashlib
import os
from importlib import metadata
from pathlib import Path

STACK_ENV = "VERLSWEEP_STACK"
STACK_TAG = "verlsweep.stack"           # the digest: what trials of one stack are found by
PACKAGES = ("torch", "torch_npu", "vllm", "vllm_ascend", "verl")
# NVIDIA's kernel module states its version here; CANN its toolkit's in version.cfg (the ascend-toolkit layout)
_NVIDIA_VERSION = Path("/proc/driver/nvidia/version")
_CANN_HOME_ENV = "ASCEND_TOOLKIT_HOME"


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _driver() -> dict[str, str]:
    out: dict[str, str] = {}
    try:
        words = _NVIDIA_VERSION.read_text().split()
        if "Module" in words:
            out["cuda_driver"] = words[words.index("Module") + 1]
    except (OSError, IndexError):
        pass
    home = os.environ.get(_CANN_HOME_ENV)
    if home:
        try:
            for line in (Path(home) / "version.cfg").read_text().splitlines():
                if "version=" in line and not line.lstrip().startswith("#"):
                    out["cann"] = line.split("=", 1)[1].strip().strip("[]")
                    break
        except OSError:
            pass
    return out


def read_stack(env: dict[str, str] | None = None) -> dict[str, str]:
    """{part: version} of this process's stack; VERLSWEEP_STACK (`part=version,...`) states it instead."""
    stated = (env if env is not None else os.environ).get(STACK_ENV)
    if stated:
        parts = (item.partition("=") for item in stated.split(",") if item.strip())
        return {k.strip(): v.strip() for k, _, v in parts}
    found = {name: _installed(name) for name in PACKAGES}
    return {**_driver(), **{k: v for k, v in found.items() if v}}


def digest(stack: dict[str, str]) -> str:
    """A short name of the stack: the same parts and versions give the same digest."""
    text = ",".join(f"{k}={stack[k]}" for k in sorted(stack))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def describe(stack: dict[str, str]) -> str:
    """`torch 2.5.1, verl 0.5.0` for the planner's one line."""
    return ", ".join(f"{k} {v}" for k, v in sorted(stack.items())) or "an empty stack"


def stack_tags(stack: dict[str, str]) -> dict[str, str]:
    """The MLflow tags of a trial run: the digest and each part (`verlsweep.stack.torch`)."""
    return {STACK_TAG: digest(stack), **{f"{STACK_TAG}.{k}": v for k, v in stack.items()}}


def from_tags(tags: dict[str, str]) -> dict[str, str]:
    """The parts back from a run's tags."""
    prefix = f"{STACK_TAG}."
    return {k[len(prefix):]: v for k, v in tags.items() if k.startswith(prefix)}
