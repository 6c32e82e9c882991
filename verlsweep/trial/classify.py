"""A finished trial process -> one outcome, from its exit status and what it printed.

ONE table of patterns, built from the real texts of torch_npu (NPUCachingAllocator), CANN/HCCL
error codes and the vllm-ascend worker (docs/ascend.md, Error signatures) and of verl, vLLM, Ray
and Hydra (docs/verl.md, Failure modes: verl's device check in verl/single_controller/ray/base.py,
vLLM startup errors, Ray errors, Hydra's override errors in hydra/_internal/config_loader_impl.py).
Rows are in priority order: when a log holds several, the first row's outcome wins (an OOM on one
rank is the cause of the HCCL timeouts and ActorDiedErrors on the others). The matched line is kept
as the excerpt.

Lines are scanned as they stream (`LogScanner.feed`), so a cause printed long before the end of
a long log is not lost to the tail window.
"""
from __future__ import annotations

import re
import signal
from collections import deque
from dataclasses import dataclass
from typing import Iterable

# Ray prints actor output as "(TaskRunnerV1 pid=123, ip=10.0.0.1) <line>"; strip it from excerpts.
RAY_PREFIX = re.compile(r"^\((?:[\w.:-]+(?: pid=\d+)?(?:, ip=[\d.:a-fA-F]+)?)\)\s*")


@dataclass(frozen=True)
class Pattern:
    outcome: str
    label: str
    regex: re.Pattern[str]
    source: str


def _p(outcome: str, label: str, regex: str, source: str) -> Pattern:
    return Pattern(outcome, label, re.compile(regex), source)


PATTERNS: tuple[Pattern, ...] = (
    # --- the command itself was rejected (argv / Hydra override grammar / config keys) ---
    _p("config_error", "hydra override", r"Could not override '[^']*'|Could not append to config|"
       r"Error merging override|Error parsing override|Could not delete from config",
       "hydra/_internal/config_loader_impl.py, core/override_parser/overrides_parser.py"),
    _p("config_error", "config key", r"Key '[^']*' is not in struct|ConfigAttributeError|ConfigKeyError|"
       r"In '[^']*': Could not find '", "omegaconf / hydra/_internal/defaults_list.py"),
    # --- no accelerator where verl needs one ---
    _p("no_devices", "verl device check", r"Total available GPUs \d+ is less than total desired GPUs \d+",
       "verl/single_controller/ray/base.py ResourcePoolManager._check_resource_available"),
    _p("no_devices", "npu not visible", r"NPU device is not available or visible",
       "verl docs/ascend_tutorial/faq/faq.rst"),
    _p("no_devices", "no cuda device", r"No CUDA GPUs are available|Found no NVIDIA driver",
       "torch/cuda/__init__.py _lazy_init"),
    # --- device memory: training allocator, CANN, vLLM startup / KV cache, Ray host memory ---
    _p("oom", "npu out of memory", r"NPU out of memory", "torch_npu NPUCachingAllocator.cpp (vllm-ascend#6611)"),
    _p("oom", "cuda out of memory", r"CUDA out of memory|torch\.OutOfMemoryError",
       "torch c10/cuda/CUDACachingAllocator.cpp"),
    _p("oom", "cann allocation", r"\bEL0004\b|Failed to allocate", "torch_npu NPUException.cpp isCannOOM()"),
    _p("oom", "vllm startup memory", r"Free memory on device .* less than desired GPU memory utilization",
       "vllm_ascend/worker/worker.py, vllm/v1/worker/utils.py"),
    _p("oom", "vllm kv cache", r"No available memory for the cache blocks|"
       r"larger than the maximum number of tokens that can be stored in KV cache", "vllm/v1/core/kv_cache_utils.py"),
    _p("oom", "host memory (ray memory monitor)", r"which exceeds the memory usage threshold|"
       r"Task was killed due to the node running low on memory", "ray/_private/memory_monitor"),
    _p("oom", "out of memory in a ray task", r"RayTaskError\(OutOfMemoryError\)", "ray/exceptions.py RayTaskError"),
    # --- collectives that never completed ---
    # the same watchdog text is printed by torch's ProcessGroupNCCL (WorkNCCL) on GPUs
    _p("hccl_timeout", "collective watchdog", r"Watchdog caught collective operation timeout|"
       r"HCCL watchdog thread terminated", "torch_npu ProcessGroupHCCL.cpp (vllm-ascend#382), ProcessGroupNCCL.cpp"),
    _p("hccl_timeout", "hccl exec timeout", r"\bEI0002\b|error code is 507048|Notify register times out",
       "CANN HCCL_EXEC_TIMEOUT (vllm-ascend#1443)"),
    _p("hccl_timeout", "hccl connect timeout", r"\bEI0006\b|Getting socket times out|wait socket establish timeout",
       "CANN HCCL_CONNECT_TIMEOUT (vllm-ascend#486)"),
    _p("hccl_timeout", "hccl blocking wait", r"timed out in blocking wait \((?:TORCH_)?HCCL_BLOCKING_WAIT",
       "torch_npu ProcessGroupHCCL.cpp"),
    # --- a process died; the cause is elsewhere or unknown ---
    _p("crash", "ray actor died", r"ActorDiedError|The actor died unexpectedly", "ray/exceptions.py ActorDiedError"),
    _p("crash", "segfault", r"Segmentation fault|SIGSEGV|core dumped|Fatal Python error", "kernel / CPython"),
    _p("crash", "graph capture", r"\b207008\b|\bEL0009\b|Stream resources are insufficient",
       "torch_npu NPUGraph.cpp capture_begin (vllm-ascend docs/source/faqs.md)"),
)

_ANY = re.compile("|".join(f"(?:{p.regex.pattern})" for p in PATTERNS))
_PRIORITY = {id(p): i for i, p in enumerate(PATTERNS)}
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)\b(?:\([^)]*\))?:?")
EXCERPT_MAX = 2000


@dataclass(frozen=True)
class Verdict:
    outcome: str
    reason: str             # the pattern label, or why it was decided without one
    excerpt: str | None


class LogScanner:
    """Fed every output line; remembers the first line of each pattern (plus 2 following) and a tail."""

    def __init__(self, tail_lines: int = 200, context_after: int = 2):
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self.hits: dict[int, list[str]] = {}          # pattern index -> excerpt lines
        self._open: list[tuple[int, int]] = []         # (pattern index, lines still to add)
        self._context_after = context_after

    def feed(self, line: str) -> Pattern | None:
        """Add one line; returns the pattern it matched first time, if any (fatal-line detection)."""
        line = line.rstrip("\n")
        self.tail.append(line)
        if self._open:
            still = []
            for idx, left in self._open:
                self.hits[idx].append(strip_prefix(line))
                if left > 1:
                    still.append((idx, left - 1))
            self._open = still
        if not _ANY.search(line):
            return None
        for idx, pattern in enumerate(PATTERNS):
            if idx not in self.hits and pattern.regex.search(line):
                self.hits[idx] = [strip_prefix(line)]
                if self._context_after:
                    self._open.append((idx, self._context_after))
                return pattern
        return None

    def best(self) -> tuple[Pattern, str] | None:
        if not self.hits:
            return None
        idx = min(self.hits)
        return PATTERNS[idx], _clip("\n".join(self.hits[idx]))


def strip_prefix(line: str) -> str:
    return RAY_PREFIX.sub("", line, count=1)


def _clip(text: str) -> str:
    return text if len(text) <= EXCERPT_MAX else text[:EXCERPT_MAX] + " …"


def last_error(lines: Iterable[str], context: int = 20) -> str | None:
    """The last exception line of a tail (or its last lines) as the excerpt of an unexplained crash."""
    lines = [strip_prefix(l) for l in lines]
    for i in range(len(lines) - 1, -1, -1):
        if _EXCEPTION_LINE.match(lines[i].strip()):
            return _clip(lines[i].strip())
    tail = [l for l in lines[-context:] if l.strip()]
    return _clip("\n".join(tail)) if tail else None


def classify(returncode: int | None, scanner: LogScanner, *, steps: int,
             stopped: str | None = None, detail: str | None = None) -> Verdict:
    """Decide the outcome.

    `stopped` is why the supervisor ended the process, if it did: `pruned`, `timeout` (whole-trial
    limit), `hang` (startup/stall limit) or `fatal` (a fatal line was printed and the process did not
    exit by itself); `detail` says which limit. A kill for pruning is the sweeper's decision and wins;
    otherwise a cause found in the log explains the kill (an HCCL hang, an OOM that left the driver
    waiting).
    """
    if stopped == "pruned":
        return Verdict("pruned", "pruned by the sweeper", None)
    found = scanner.best()
    if returncode == 0 and stopped is None:
        if steps > 0:
            return Verdict("completed", "exit 0", None)
        return Verdict("crash", "exit 0 but no training step logged",
                       last_error(scanner.tail) or "the process exited 0 but logged no training step")
    if found is not None:
        pattern, excerpt = found
        return Verdict(pattern.outcome, pattern.label, excerpt)
    if stopped in ("timeout", "hang"):
        last = "\n".join(strip_prefix(l) for l in list(scanner.tail)[-5:])
        return Verdict(stopped, detail or stopped, _clip(f"{detail or stopped}; last output:\n{last}"))
    if returncode is not None and returncode < 0:
        name = _signal_name(-returncode)
        hint = " (host OOM killer?)" if -returncode == signal.SIGKILL else ""
        return Verdict("crash", f"killed by {name}{hint}", last_error(scanner.tail))
    return Verdict("crash", f"exit {returncode}", last_error(scanner.tail))


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
