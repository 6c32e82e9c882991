"""verl's per-step metrics as they arrive, and the trial's objective and peak memory from them.

Primary source: verl's `file` logger (verl/utils/tracking.py FileLogger), one JSON object per step,
`{"step": N, "data": {...}}`, written unbuffered to $VERL_FILE_LOGGER_PATH (NaN becomes null via
orjson). Fallback: the `console` logger's line (verl/utils/logger/aggregate_logger.py
concat_dict_to_str), `step:N - key:value - ...`, printed by a Ray actor so the driver shows it
behind a `(TaskRunnerV1 pid=...)` prefix, with numpy scalars as `np.float64(0.25)` (numpy >= 2).
Ray wraps that prefix (ray/_private/worker.py print_worker_logs, unless RAY_COLOR_PREFIX=0) and the
`ray::Cls.method()` of a RayTaskError (ray/exceptions.py RayTaskError.__str__, always) in ANSI colour
codes: every console line is read without them (`strip_ansi`).
"""
from __future__ import annotations

import json
import math
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from verlsweep.common.names import PEAK_MEMORY_METRIC

_STEP = re.compile(r"(?:^|[\s)])step:(\d+)(?= - |\s*$)")
_NP_SCALAR = re.compile(r"^np\.\w+\((.*)\)$")
# CSI sequences (colorama's Fore/Style codes are `ESC [ n m`) and the rarer two-byte escapes
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|[@-Z\\-_])")

AGGREGATES = ("mean", "median", "last", "max", "min")



def strip_ansi(line: str) -> str:
    """A console line without terminal colour codes."""
    return _ANSI.sub("", line) if "\x1b" in line else line


def parse_console_line(line: str) -> tuple[int, dict[str, float]] | None:
    """One console step line (any prefix before `step:`) -> (step, numeric metrics), else None."""
    match = _STEP.search(line)
    if not match:
        return None
    data: dict[str, float] = {}
    for part in line[match.end():].split(" - "):
        key, sep, raw = part.rpartition(":")
        if not sep or not key:
            continue
        value = _number(raw.strip())
        if value is not None:
            data[key.strip()] = value
    return int(match.group(1)), data


def _number(raw: str) -> float | None:
    unwrapped = _NP_SCALAR.match(raw)
    if unwrapped:
        raw = unwrapped.group(1)
    try:
        return float(raw)
    except ValueError:
        return None


def parse_jsonl_record(line: str) -> tuple[int, dict[str, float]] | None:
    """One FileLogger line -> (step, numeric metrics); None for a partial or foreign line."""
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("step"), int):
        return None
    data = record.get("data") or {}
    out = {}
    for key, value in data.items():
        if isinstance(value, bool) or value is None:
            continue
        if isinstance(value, (int, float)):
            out[key] = float(value)
    return record["step"], out


class JsonlTail:
    """Reads the complete lines appended to a JSONL file since the last call (it may not exist yet)."""

    def __init__(self, path: Path):
        self.path = path
        self._offset = 0
        self._partial = b""

    def read(self) -> list[tuple[int, dict[str, float]]]:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._offset)
                chunk = fh.read()
        except FileNotFoundError:
            return []
        if not chunk:
            return []
        self._offset += len(chunk)
        data = self._partial + chunk
        *lines, self._partial = data.split(b"\n")
        records = []
        for raw in lines:
            parsed = parse_jsonl_record(raw.decode("utf-8", "replace"))
            if parsed:
                records.append(parsed)
        return records


@dataclass
class StepLog:
    """Steps of one trial, merged from both sources: the file logger's record wins over the console's."""

    steps: dict[int, dict[str, float]] = field(default_factory=dict)
    source: dict[int, str] = field(default_factory=dict)
    arrived: dict[int, float] = field(default_factory=dict)     # wall-clock time each step was first read


    def add(self, step: int, data: dict[str, float], source: str) -> bool:
        """Store a step; True when the step is new (first time seen from any source)."""
        new = step not in self.steps
        if new:
            self.arrived[step] = time.time()
        if new or (source == "file" and self.source[step] != "file"):
            self.steps[step] = data
            self.source[step] = source
        return new

    def __len__(self) -> int:
        return len(self.steps)

    def training_steps(self) -> int:
        """Records of training steps; step 0 is verl's validation before training (val_before_train)."""
        return sum(1 for s in self.steps if s >= 1)

    def values(self, metric: str, after: int = 0) -> list[float]:
        return [d[metric] for s, d in sorted(self.steps.items())
                if s > after and metric in d and not math.isnan(d[metric])]

    def peak_memory_gb(self) -> float | None:
        """The trial's peak memory: the highest PEAK_MEMORY_METRIC of any step (None without one)."""
        peaks = [d[PEAK_MEMORY_METRIC] for d in self.steps.values()
                 if PEAK_MEMORY_METRIC in d and not math.isnan(d[PEAK_MEMORY_METRIC])]
        return max(peaks) if peaks else None


def aggregate(values: list[float], how: str) -> float | None:
    if not values:
        return None
    if how == "mean":
        return statistics.fmean(values)
    if how == "median":
        return statistics.median(values)
    if how == "last":
        return values[-1]
    if how == "max":
        return max(values)
    if how == "min":
        return min(values)
    raise ValueError(f"objective.aggregate={how!r}: one of {', '.join(AGGREGATES)}")


def objective(log: StepLog, metric: str, how: str, warmup_steps: int) -> float | None:
    """Aggregate of `metric` over the steps after the warm-up ones.

    If every logged step is a warm-up step (a 1-step trial), the warm-up steps are used rather than
    losing the measurement.
    """
    values = log.values(metric, after=warmup_steps) or log.values(metric)
    return aggregate(values, how)
