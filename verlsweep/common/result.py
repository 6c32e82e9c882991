"""What a trial produces, shared by the runners, the tracker, the planner and the sweeper."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

# Every trial ends in exactly one of these. `oom`, `infeasible` (the planner refused it) and
# `unschedulable` (its Ray could never place what verl asked for) are told to Optuna as constraint
# violations, `pruned` as PRUNED, the rest of the failures as FAIL.
OUTCOMES: tuple[str, ...] = (
    "completed",
    "pruned",
    "oom",
    "hccl_timeout",
    "hang",
    "timeout",
    "config_error",
    "no_devices",
    "crash",
    "infeasible",
    "preempted",      # the scheduler took the job away (Slurm PREEMPTED, CANCELLED, NODE_FAIL); re-run once
    "unschedulable",
)
CONSTRAINT_OUTCOMES: frozenset[str] = frozenset({"oom", "infeasible", "unschedulable"})
# vllm_start: vLLM's start-up free-memory check; kv_cache: vLLM's KV cache cannot hold one max-length
# request; rollout_wake: re-mapping the KV cache for a rollout next to what the trainer keeps on the
# device; training: the trainer's own allocation (model load, log-prob, actor update)
FAILURE_PHASES: tuple[str, ...] = ("vllm_start", "kv_cache", "rollout_wake", "training")
# Where a run that one of the planner's checks stops fails (verlsweep/plan/predictor/memory.py ORDER); host memory
# is not device memory: no phase.
PLAN_CHECK_PHASES: dict[str, str] = {
    "vllm_start": "vllm_start", "kv_cache": "kv_cache", "rollout": "rollout_wake",
    **{n: "training" for n in ("log_prob", "ref", "values", "critic_update", "actor_update")}}


@dataclass
class TrialResult:
    """One trial's outcome and measurement. Returned by the trial task to the sweeper."""

    outcome: str
    objective: float | None = None          # aggregate of objective.metric over the measured steps
    peak_memory_gb: float | None = None     # measured: max of names.PEAK_MEMORY_METRIC over the steps
    metrics: dict[str, float] = field(default_factory=dict)   # other named aggregates (multi-objective)
    steps: int = 0                          # training steps seen
    excerpt: str | None = None              # the log lines that decided a failure outcome
    run_id: str | None = None               # MLflow run of this trial
    backend: str = "verl"                   # runner that produced it: verl | script | estimate
    duration_s: float = 0.0
    peak_device_hbm_gb: float | None = None  # max HBM in use on any of its devices, from npu-smi / NVML
    predicted_peak_gb: float | None = None  # the planner's PEAK_MEMORY_METRIC for a trial that never ran
    predicted: dict[str, float] = field(default_factory=dict)  # the planner's numbers before launch (plan/...)
    # where an `oom` happened, when the log tells (FAILURE_PHASES); None: not known. What one OOM proves
    # about its neighbours depends on it (verlsweep.proofs.rules)
    failure_phase: str | None = None
    # config_error: the config keys the trial rules refused (verlsweep.common.errors.Problem.key); a
    # sweep does not count a refusal of its own params' values as a broken environment (study.failures)
    refused_keys: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")
        if self.failure_phase is not None and self.failure_phase not in FAILURE_PHASES:
            raise ValueError(f"failure_phase {self.failure_phase!r} is not one of {', '.join(FAILURE_PHASES)}")

    @property
    def ok(self) -> bool:
        return self.outcome == "completed"

    def value(self, name: str) -> float | None:
        """A named measurement: `objective`, `peak_memory_gb`, or any key of `metrics`."""
        if name == "objective":
            return self.objective
        if name == "peak_memory_gb":
            return self.peak_memory_gb
        return self.metrics.get(name)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class StepReporter(Protocol):
    """Receives each training step's objective value as it arrives (the sweeper's pruning hook)."""

    def report(self, step: int, value: float) -> bool:
        """Record the value; True means the trial should be stopped now (pruned)."""
        ...

    def record(self, key: str, value: Any) -> None:
        """Keep a fact about the running trial with the sweep (e.g. what identifies its processes)."""
        ...


class NullReporter:
    """Single runs: nothing to report to, never prune."""

    def report(self, step: int, value: float) -> bool:
        return False

    def record(self, key: str, value: Any) -> None:
        pass
