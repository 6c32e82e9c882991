"""What one OOM or one fit proves about its neighbours in the rollout-memory space.

A config is its rollout util, rollout TP and three offloads (actor params, actor optimizer, ref
params: sweeps/rollout_memory.yaml). "More offloads" is componentwise: every offload on in the other
config is on in this one. Each rule says which configs a trial's outcome decides; `infer` applies them
all. Only rules that follow from the code they cite are proofs; PRIORS are only likely.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
OFFLOADS = ("verl.actor_rollout_ref.actor.fsdp_config.param_offload",
            "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload",
            "verl.actor_rollout_ref.ref.fsdp_config.param_offload")
KNOBS = (UTIL, TP, *OFFLOADS)
_EPS = 1e-9


@dataclass(frozen=True)
class Observed:
    """A finished trial: its knobs, outcome (verlsweep.common.result.OUTCOMES) and failure phase."""

    number: int
    params: Mapping[str, object]
    outcome: str
    phase: str | None = None


def _offs(p: Mapping[str, object]) -> tuple[bool, ...]:
    return tuple(bool(p[n]) for n in OFFLOADS)


def _fewer(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    """Every offload on in `a` is on in `b` (a has the same or fewer offloads)."""
    return all(y or not x for x, y in zip(_offs(a), _offs(b)))


def _num(params: Mapping[str, object], key: str) -> float:
    """A numeric knob of a trial's params (util, TP) as a number."""
    value = params[key]
    if not isinstance(value, (int, float, str)):
        raise TypeError(f"{key}={value!r} is not a number")
    return float(value)


def _same_tp(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    return _num(a, TP) == _num(b, TP)


@dataclass(frozen=True)
class Rule:
    name: str
    applies: Callable[[Observed], bool]                                    # which trials it reads
    covers: Callable[[Mapping[str, object], Mapping[str, object]], bool]   # (trial's params, other) -> decided
    verdict: str                                                           # "fail" | "fit"
    source: str


def _oom(*phases: str) -> Callable[[Observed], bool]:
    return lambda o: o.outcome == "oom" and o.phase in phases


RULES: tuple[Rule, ...] = (
    # vLLM asks for util x total HBM at start and raises when less is free; re-mapping the KV cache for a
    # rollout needs its util share again next to what the trainer keeps; fewer offloads leave less free
    Rule("vllm start / wake-up: higher util, same or fewer offloads", _oom("vllm_start", "rollout_wake"),
         lambda t, c: _same_tp(t, c) and _num(c, UTIL) >= _num(t, UTIL) - _EPS and _fewer(c, t), "fail",
         "vllm/v1/worker/gpu_worker.py init_device / determine_available_memory ('Free memory on device "
         "... is less than desired GPU memory utilization'); verl/workers/engine_workers.py update_weights "
         "offloads the actor (engine.to('cpu')) only when its offload is on, then resumes kv_cache"),
    # with free_cache_engine the KV cache is released before training (sleep) and re-mapped only for the
    # rollout, so training's peak does not depend on util; one fewer offload keeps more on the device
    Rule("training: every util, same or fewer offloads", _oom("training"),
         lambda t, c: _same_tp(t, c) and _fewer(c, t), "fail",
         "verl/workers/rollout/vllm_rollout/vllm_async_server.py sleep (free_cache_engine); "
         "verl/workers/engine_workers.py update_weights (resume weights, offload actor, resume kv_cache); "
         "verl/workers/config/rollout.py free_cache_engine = True"),
    # the KV cache is util x total minus the engine's own non-KV memory: a lower util only shrinks it (kept
    # to the same offloads: whether other processes' memory enters the profile is not relied on)
    Rule("kv cache too small: lower util, same TP and offloads", _oom("kv_cache"),
         lambda t, c: _same_tp(t, c) and _num(c, UTIL) <= _num(t, UTIL) + _EPS and _offs(c) == _offs(t), "fail",
         "vllm/v1/worker/gpu_worker.py determine_available_memory (requested_memory - non_kv_cache_memory); "
         "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory"),
    # a fit passed vLLM's start check (holds at its util with more free memory: more offloads) and the
    # training peak (lower with more offloads); the KV check is the same at the same util and TP
    Rule("fit: same util and TP, same or more offloads", lambda o: o.outcome == "completed",
         lambda t, c: _same_tp(t, c) and abs(_num(c, UTIL) - _num(t, UTIL)) < _EPS and _fewer(t, c), "fit",
         "the vllm start and training rules above, read the other way"),
)

# Likely, not proven: what a search may bet on, never what it may rule out
PRIORS: tuple[tuple[str, str], ...] = (
    ("throughput nondecreasing in util within the feasible band (a bigger KV cache batches more, until "
     "it saturates)", "vllm/v1/core/sched/scheduler.py: requests are admitted while KV blocks are free"),
    ("a fit at util u with the same TP and offloads fits at util u' < u unless the KV cache gets too "
     "small", "the kv cache rule: only the KV check depends on util from below"),
)


@dataclass(frozen=True)
class Decided:
    verdict: str            # "fail" | "fit" | "unknown"
    trial: int | None = None
    rule: str | None = None

    def __str__(self) -> str:
        if self.verdict == "unknown":
            return "unknown"
        return f"proven {self.verdict} by trial {self.trial} ({self.rule})"


UNKNOWN = Decided("unknown")


def infer(trials: Iterable[Observed], configs: Iterable[Mapping[str, object]]) -> list[Decided]:
    """One verdict per config: the first rule (earliest trial) that decides it; proofs of failure win
    over proofs of fit (a contradiction means a rule's premise failed: launching again decides)."""
    trials = sorted(trials, key=lambda o: o.number)
    out = []
    for config in configs:
        found = UNKNOWN
        for verdict in ("fail", "fit"):
            for obs in trials:
                rule = next((r for r in RULES if r.verdict == verdict and r.applies(obs)
                             and r.covers(obs.params, config)), None)
                if rule is not None:
                    found = Decided(verdict, obs.number, rule.name)
                    break
            if found is not UNKNOWN:
                break
        out.append(found)
    return out


def decide(trials: Iterable[Observed], config: Mapping[str, object]) -> Decided:
    return infer(trials, [config])[0]
