"""Console output: Ray's per-line log prefixes and colours, verl's console line (``concat_dict_to_str``),
CANN/Ray time stamps."""
from __future__ import annotations

import datetime as _dt
import numbers
import os
import pprint
import re
from typing import Any, TextIO

# colorama's codes as Ray uses them (ray/_private/worker.py print_worker_logs, ray/exceptions.py)
CYAN, YELLOW, FORE_RESET, RESET_ALL = "\x1b[36m", "\x1b[33m", "\x1b[39m", "\x1b[0m"
_PID_COLOURS = ("\x1b[35m", "\x1b[36m", "\x1b[32m", "\x1b[90m", "\x1b[94m", "\x1b[95m")


def ray_prefix(prefix: str) -> str:
    """A log prefix as Ray's driver prints it: no colour with RAY_COLOR_PREFIX=0, one colour per pid with
    RAY_COLOR_PREFIX=1, else cyan (yellow for the raylet). Only Ray's own ``(name pid=N)`` is coloured;
    a prefix the process printed itself (vLLM's ``(EngineCore_DP0 pid=M)``) stays plain."""
    setting = os.environ.get("RAY_COLOR_PREFIX")
    if setting == "0":
        return prefix
    own, sep, rest = prefix.partition(") ")
    own += ")" if sep else ""
    if own == "(raylet)":
        colour = YELLOW
    elif setting == "1":
        pid = re.search(r"pid=(\d+)", own)
        colour = _PID_COLOURS[int(pid.group(1)) % len(_PID_COLOURS)] if pid else _PID_COLOURS[0]
    else:
        colour = CYAN
    return f"{colour}{own}{RESET_ALL}" + (f" {rest}" if sep else "")


class RayLogStream:
    """File-like stream that prefixes each complete line like Ray's log monitor does for actor output."""

    def __init__(self, target: TextIO, prefix: str) -> None:
        self._target = target
        self._prefix = prefix
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._target.write(f"{ray_prefix(self._prefix)} {line}\n")
        self._target.flush()
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def close_line(self) -> None:
        if self._pending:
            self.write("\n")

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._target, "encoding", "utf-8")


def _emit(stream: TextIO, text: str) -> None:
    stream.write(text if text.endswith("\n") else text + "\n")
    stream.flush()


def _now_ms() -> str:
    return _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def _cann_time(precise: bool = False) -> str:
    now = _dt.datetime.now()
    base = now.strftime("%Y-%m-%d-%H:%M:%S")
    return f"{base}.{now.microsecond // 1000:03d}.{now.microsecond % 1000:03d}" if precise else base


def concat_dict_to_str(data: dict[str, Any], step: int) -> str:
    """verl's console line: ``step:N - k:v - ...`` over numeric values, each ``pprint.pformat``-ed."""
    parts = [f"step:{step}"]
    parts += [f"{k}:{pprint.pformat(v)}" for k, v in data.items() if isinstance(v, numbers.Number)]
    return " - ".join(parts)
