"""A trial process's output and exit -> one outcome.

Lines are scanned as they stream (`LogScanner.feed`), so a cause printed long before the end of a
long log is not lost to the tail window. Two things are learnt from them:

* **which failure texts appeared, and when** (the rows of verlsweep.common.patterns). The first
  unambiguous one in time decides the outcome of a failed trial: an OOM on one rank comes before the
  HCCL timeouts and dead actors it causes on the others, and an HCCL timeout that follows an
  allocator's retry warning is an HCCL timeout. Ambiguous texts (warnings healthy runs print too)
  only colour the outcome of a process that died with no unambiguous text.
* **whether a fatal text was printed**: a Python traceback's exception line (the lines after
  `Traceback (most recent call last):` or a frame `  File "...", line N`, as Python and Ray's
  RayTaskError print them) or Ray's actor-died notice. The supervisor stops a process that prints one
  and then makes no progress for `runner.stall_timeout` (verlsweep.trial.runners.process).
"""
from __future__ import annotations

import re
import signal
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from verlsweep.common.patterns import OOM_LABEL_PHASES, PATTERNS, Pattern

# Ray prints actor output as "(TaskRunnerV1 pid=123, ip=10.0.0.1) <line>", the prefix and ONE space
# (ray/_private/worker.py print_worker_logs), and vLLM's engine adds its own "(EngineCore_DP0 pid=7) ";
# strip them and nothing more: the line's own indentation is what tells a traceback's frames.
RAY_PREFIX = re.compile(r"^(?:\((?:[\w.:-]+(?: pid=\d+)?(?:, ip=[\d.:a-fA-F]+)?)\) ?)+")

# Where a trial is before its first step, from lines verl 0.9.1 and Ray print on the way (the furthest
# one seen wins: vLLM keeps printing during rollouts). A `hang` excerpt names it.
PHASES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple((label, re.compile(rx), src) for label, rx, src in (
    ("starting Ray", r"ray init kwargs:", "verl/trainer/main_ppo.py run_ppo"),
    ("TaskRunner: config, tokenizer, datasets, TransferQueue",
     r"Started a local Ray instance|Connected to Ray cluster", "ray/_private/worker.py init"),
    ("placing worker groups", r"Total training steps: \d+",
     "verl/trainer/ppo/v1/trainer_base.py, ray_trainer.py _create_dataloader"),
    ("worker init: model load", r"create worker group|worker group kwargs", "v1/trainer_base.py init_workers"),
    ("rollout engine start: weights, KV cache, graph capture",
     r"actor and ref model engine initialized|\(vLLMHttpServer pid=",
     "v1/trainer_base.py init_workers; vllm_rollout/vllm_async_server.py vLLMHttpServer"),
    ("first rollout and training step", r"all initialize finished, ready to fit|Initial validation metrics",
     "v1/trainer_base.py init_workers, fit"),
))
START_PHASE = "starting verl: imports, config validation"

_ANY = re.compile("|".join(f"(?:{p.regex.pattern})" for p in PATTERNS))
_EXCEPTION_LINE = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Interrupt)\b(?:\([^)]*\))?:?")
_TRACEBACK_START = re.compile(r"^Traceback \(most recent call last\):|^\s+File \".*\", line \d+")
_ACTOR_DIED = re.compile(r"The actor died unexpectedly before finishing this task")
_FRAME = re.compile(r'^\s+File ".*", line \d+, in (\w+)')

# Where in a step a device OOM struck, from the verl 0.9.1 worker methods on its traceback (the innermost
# one wins). What the OOM proves about other configs depends on it (verlsweep.proofs.rules).
#   training      verl/workers/engine_workers.py compute_ref_log_prob, compute_log_prob, update_actor;
#                 TrainingWorker.train_batch / infer_batch (the critic's update and values)
#   rollout_wake  engine_workers.py update_weights (resumes the rollout's weights, offloads the actor,
#                 resumes the KV cache); vllm_rollout/vllm_async_server.py wake_up
OOM_FRAME_PHASES: dict[str, str] = {
    **{name: "training" for name in ("compute_ref_log_prob", "compute_log_prob", "update_actor", "train_batch",
                                     "infer_batch")},
    **{name: "rollout_wake" for name in ("update_weights", "wake_up")},
}
EXCERPT_MAX = 2000


@dataclass(frozen=True)
class Diagnosis:
    outcome: str
    reason: str             # the pattern label, or why it was decided without one
    excerpt: str | None
    phase: str | None = None    # an `oom`'s verlsweep.common.result.FAILURE_PHASES entry, when the log tells


@dataclass
class _Hit:
    seq: int                # line number of the first match: earlier causes win
    lines: list[str]        # the matched line and the lines after it (the excerpt)
    block: int | None       # the traceback it is part of, if any


class LogScanner:
    """Fed every output line (ANSI-free); remembers the first line of each pattern (plus 2 following),
    the first fatal text and a tail."""

    def __init__(self, tail_lines: int = 200, context_after: int = 2):
        self.tail: deque[str] = deque(maxlen=tail_lines)
        self.hits: dict[int, _Hit] = {}                # pattern index -> its first match
        self.fatal: str | None = None                  # the first fatal text (a traceback's exception line)
        self._open: list[tuple[list[str], int]] = []   # excerpts still collecting following lines
        self._context_after = context_after
        self._seq = 0
        self._in_traceback = False
        self._block = 0                                # tracebacks seen
        self._phase_frames: dict[int, str] = {}        # traceback -> phase of its innermost verl worker frame
        self._phase = -1                                # furthest PHASES index seen

    def feed(self, line: str) -> bool:
        """Add one line; True when it is a fatal text (the supervisor's cue to watch for progress)."""
        line = line.rstrip("\n")
        self._seq += 1
        self.tail.append(line)
        for idx in range(len(PHASES) - 1, self._phase, -1):
            if PHASES[idx][1].search(line):
                self._phase = idx
                break
        text = strip_prefix(line)
        if self._open:
            for lines, _ in self._open:
                lines.append(text)
            self._open = [(lines, left - 1) for lines, left in self._open if left > 1]
        fatal = self._is_fatal(text)
        frame = _FRAME.match(text) if self._in_traceback else None
        if frame and frame.group(1) in OOM_FRAME_PHASES:
            self._phase_frames[self._block] = OOM_FRAME_PHASES[frame.group(1)]
        if fatal and self.fatal is None:
            self.fatal = text.strip()
        if _ANY.search(line):
            for idx, pattern in enumerate(PATTERNS):
                if pattern.regex.search(line):
                    if idx not in self.hits:
                        block = self._block if self._in_traceback else None
                        self.hits[idx] = _Hit(self._seq, [text], block)
                        if self._context_after:
                            self._open.append((self.hits[idx].lines, self._context_after))
                    break
        return fatal

    @property
    def phase(self) -> str:
        """The furthest start-up phase its lines show (START_PHASE before any)."""
        return PHASES[self._phase][0] if self._phase >= 0 else START_PHASE

    def _is_fatal(self, text: str) -> bool:
        if _ACTOR_DIED.search(text):
            return True
        if _TRACEBACK_START.match(text):
            if not self._in_traceback:
                self._block += 1
            self._in_traceback = True
            return False
        if not self._in_traceback or text[:1].isspace() or not text.strip():
            return False
        if _EXCEPTION_LINE.match(text):
            return True          # still inside: Ray's nested errors repeat header, frames, exception
        self._in_traceback = False
        return False

    def cause(self, *, ambiguous: bool) -> tuple[Pattern, str] | None:
        """The earliest matched unambiguous pattern and its excerpt; with `ambiguous`, the earliest
        ambiguous one when no unambiguous pattern matched."""
        found = [(hit.seq, idx) for idx, hit in self.hits.items() if not PATTERNS[idx].ambiguous]
        if not found and ambiguous:
            found = [(hit.seq, idx) for idx, hit in self.hits.items()]
        if not found:
            return None
        _, idx = min(found)
        block = self.hits[idx].block
        if block is not None:
            # one traceback is one failure: its innermost exception (the last line) is the cause, the
            # RayTaskError(...) headers before it only wrap it
            _, idx = max((s, i) for s, i in found if self.hits[i].block == block)
        return PATTERNS[idx], _clip("\n".join(self.hits[idx].lines))

    def oom_phase(self, pattern: Pattern) -> str | None:
        """Where the OOM of `pattern` (a cause) struck: named by vLLM's own check, else by the verl
        worker method on its traceback; None when neither tells (a host OOM, a bare allocator line)."""
        if pattern.label in OOM_LABEL_PHASES:
            return OOM_LABEL_PHASES[pattern.label]
        hit = self.hits.get(PATTERNS.index(pattern))
        if hit is None or hit.block is None:
            return None
        return self._phase_frames.get(hit.block)


def strip_prefix(line: str) -> str:
    return RAY_PREFIX.sub("", line, count=1)


def _clip(text: str) -> str:
    return text if len(text) <= EXCERPT_MAX else text[:EXCERPT_MAX] + " …"


def last_error(lines: Iterable[str], context: int = 20) -> str | None:
    """The last exception line of a tail (or its last lines) as the excerpt of an unexplained crash."""
    lines = [strip_prefix(line) for line in lines]
    for i in range(len(lines) - 1, -1, -1):
        if _EXCEPTION_LINE.match(lines[i].strip()):
            return _clip(lines[i].strip())
    tail = [line for line in lines[-context:] if line.strip()]
    return _clip("\n".join(tail)) if tail else None


def classify(returncode: int | None, scanner: LogScanner, *, steps: int,
             stopped: str | None = None, detail: str | None = None) -> Diagnosis:
    """Decide the outcome.

    `stopped` is why the supervisor ended the process, if it did: `pruned`, `timeout` (whole-trial
    limit), `hang` (startup/stall limit), `unschedulable` (its Ray cannot place verl's demand, read
    from the cluster by trial/ray_watch.py; `detail` is the excerpt) or `fatal` (a fatal text and then
    no progress for the stall limit); `detail` says which limit. A kill for pruning is the sweeper's
    decision and wins. A process that exited 0 after training steps completed, whatever it printed.
    Otherwise the first unambiguous failure text in time explains the end (an HCCL hang, an OOM that
    left the driver waiting); an ambiguous one only explains a process that died or printed its own
    fatal text, never one we stopped for a limit. A `hang`/`timeout` excerpt names the phase.
    """
    if stopped == "pruned":
        return Diagnosis("pruned", "pruned by the sweeper", None)
    if stopped == "unschedulable":
        return Diagnosis("unschedulable", "Ray cannot place what verl asked for", _clip(detail or stopped))
    if returncode == 0 and stopped is None:
        if steps > 0:
            return Diagnosis("completed", "exit 0", None)
        return Diagnosis("crash", "exit 0 but no training step logged",
                       last_error(scanner.tail) or "the process exited 0 but logged no training step")
    found = scanner.cause(ambiguous=stopped not in ("timeout", "hang"))
    if found is not None:
        pattern, excerpt = found
        reason = pattern.label if stopped != "fatal" else f"{pattern.label}; {detail}"
        phase = scanner.oom_phase(pattern) if pattern.outcome == "oom" else None
        return Diagnosis(pattern.outcome, reason, excerpt, phase)
    if stopped in ("timeout", "hang"):
        last = "\n".join(strip_prefix(line) for line in list(scanner.tail)[-5:])
        phase = f"training, after step {steps}" if steps else scanner.phase
        return Diagnosis(stopped, detail or stopped,
                       _clip(f"{detail or stopped}; phase: {phase}; last output:\n{last}"))
    if stopped == "fatal":
        return Diagnosis("crash", detail or "fatal error", _clip(scanner.fatal or last_error(scanner.tail) or ""))
    if returncode is not None and returncode < 0:
        name = _signal_name(-returncode)
        hint = " (host OOM killer?)" if -returncode == signal.SIGKILL else ""
        return Diagnosis("crash", f"killed by {name}{hint}", last_error(scanner.tail))
    return Diagnosis("crash", f"exit {returncode}", last_error(scanner.tail))


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
