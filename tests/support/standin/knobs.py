"""The stand-in's knobs (``+standin.KNOB=VALUE`` or ``VERL_STANDIN_<KNOB>``), split from verl's overrides.

The knobs and modes are described in verl_standin.py's docstring.
"""
from __future__ import annotations

import dataclasses
import os
import re
import signal
from typing import Any

MODES: tuple[str, ...] = (
    "ok",
    "auto",
    "oom",
    "vllm_cache_oom",
    "vllm_startup_oom",
    "hccl_timeout",
    "hccl_connect_timeout",
    "crash",
    "ray_actor_died",
    "hang",
    "stall",
    "slow_start",
    "no_devices",
    "noisy",
    "oom_linger",
    "unschedulable",
)
# Modes that strike inside fit() at `fail_at_step` (or during worker init when it is 0).
STEP_MODES: frozenset[str] = frozenset({"oom", "hccl_timeout", "ray_actor_died", "crash", "stall", "oom_linger"})
USAGE_EXIT = 2
_KNOB_ARG = re.compile(r"^\+{0,2}standin\.([A-Za-z0-9_]+)=(.*)$", re.S)


@dataclasses.dataclass
class Knobs:
    """Stand-in control knobs (see the module docstring for their meaning)."""

    mode: str = "ok"
    fail_at_step: int = 2
    step_seconds: float = 0.05
    startup_seconds: float = -1.0  # negative: mode default (5 s for slow_start, else 0)
    throughput: float = 1000.0
    peak_memory_gb: float = 24.0
    length_gib: float = 0.0  # what a batch at maximum lengths adds to the trainer peak (lengths.py)
    truth: str = ""  # memory and tokens/s from a stack's hidden truth: "stack" or a stack (truth_steps.py)
    truth_config: str = ""  # the trial's composed config the truth reads ("": its job dir's .hydra/config.yaml)
    seed: int = 0
    device_memory_gib: float = 60.96
    model_weights_gib: float = 16.0
    steps_per_epoch: int = 1
    signal: str = "SIGSEGV"
    child_lifetime_s: float = 600.0

    @property
    def startup_delay(self) -> float:
        if self.startup_seconds >= 0:
            return self.startup_seconds
        return 5.0 if self.mode == "slow_start" else 0.0


class KnobError(ValueError):
    """A bad stand-in knob; reported with exit status 2 so it cannot pass for a verl failure."""


def _coerce(name: str, raw: str, kind: Any) -> Any:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        raw = raw[1:-1]
    try:
        if kind in (int, "int"):
            return int(float(raw)) if raw.lower() not in ("", "none") else 0
        if kind in (float, "float"):
            return float(raw)
    except ValueError as exc:
        raise KnobError(f"standin.{name}={raw!r} is not a {kind}") from exc
    return raw


def parse_standin_args(argv: list[str], environ: dict[str, str] | None = None) -> tuple[Knobs, list[str]]:
    """Split ``standin.*`` knobs from verl's Hydra overrides; env ``VERL_STANDIN_<KNOB>`` fills the gaps."""
    environ = dict(os.environ if environ is None else environ)
    types_ = {f.name: f.type for f in dataclasses.fields(Knobs)}
    values: dict[str, Any] = {}
    for name, kind in types_.items():
        env = environ.get(f"VERL_STANDIN_{name.upper()}")
        if env is not None:
            values[name] = _coerce(name, env, kind)
    rest: list[str] = []
    for arg in argv:
        m = _KNOB_ARG.match(arg)
        if not m:
            if arg.lstrip("+~").startswith("standin.") or arg.lstrip("+~") == "standin":
                raise KnobError(f"malformed stand-in knob {arg!r}; use +standin.KNOB=VALUE")
            rest.append(arg)
            continue
        name, raw = m.group(1), m.group(2)
        if name not in types_:
            raise KnobError(f"unknown knob standin.{name} (known: {', '.join(types_)})")
        values[name] = _coerce(name, raw, types_[name])
    knobs = Knobs(**values)
    if knobs.mode not in MODES:
        raise KnobError(f"unknown standin.mode={knobs.mode!r} (known: {', '.join(MODES)})")
    _signal_number(knobs.signal)
    return knobs, rest


def _signal_number(spec: str) -> int:
    spec = str(spec).strip().upper()
    if spec.isdigit():
        return int(spec)
    name = spec if spec.startswith("SIG") else f"SIG{spec}"
    try:
        return int(getattr(signal, name))
    except AttributeError as exc:
        raise KnobError(f"unknown signal {spec!r} for standin.signal") from exc
