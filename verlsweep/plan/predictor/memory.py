"""HBM per device and per phase of one colocated verl step, and host RAM per node.

Colocated verl (FSDP trainer + vLLM rollout on the same devices) goes through these phases, in this
order (verl/trainer/ppo/ray_trainer.py fit, verl/trainer/ppo/v1/trainer_base.py _step_once):
vLLM start (once) -> rollout -> old log-prob -> ref log-prob -> critic values -> critic update ->
actor update -> weight sync -> next rollout. What each phase holds, per device (GiB = 2**30 bytes):

* trainer residency: FSDP stores params, grads and Adam's two moments in fsdp_config.model_dtype
  (fp32 by default in verl 0.9.1), sharded over the FSDP group. param/optimizer offload move them to
  the host between phases (they come back for the phase that uses them: BaseEngineCtx in
  verl/workers/engine/base.py); FSDP2 offload_policy keeps them on the host throughout. The ref is
  always host-resident in verl 0.9.1 (transformer_impl.py forces CPUOffload for forward-only models).
  Adam's state appears at the first optimizer step, so vLLM's start sees params only.
* training activations: with gradient checkpointing one hidden state per layer per token plus one
  layer's working set, and the logits (tokens x vocab, fp32 for log-probs) of the micro batch; the
  micro batch is ppo_max_token_len_per_gpu tokens (dynamic bsz) or micro batch x sequence length,
  divided by Ulysses SP.
* rollout: vLLM takes gpu_memory_utilization x total at start and refuses to start when less is free
  (vllm(-ascend) worker: "Free memory on device ... less than desired GPU memory utilization"); its
  share holds weights / TP, the profiled activation peak and the KV cache. Graph pools sit outside that
  share and survive sleep. With free_cache_engine the engine sleeps during training (level 1 on NPU:
  weights to host RAM, KV dropped).
* fixed: one runtime context per process on the device, HCCL buffers (2 x HCCL_BUFFSIZE per
  communicator, CANN env reference) and the configured margin.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from verlsweep.common.names import GIB
from verlsweep.plan.predictor import band, traced_terms
from verlsweep.plan.predictor.calibration import Constants
from verlsweep.plan.predictor.lengths import Lengths, worst_lengths
from verlsweep.plan.predictor.trainer_memory import resident, states, trainer_phases
from verlsweep.plan.predictor.trial_spec import PlanInputs

# Phases in the order a step meets them; the first that does not fit is what stops a real run.
ORDER = ("host_memory", "vllm_start", "kv_cache", "log_prob", "ref", "values", "critic_update",
         "actor_update", "rollout")

# What each constraint means, for messages and the table legend.
MEANING = {
    "host_memory": "offloaded states + vLLM sleep copies + worker processes exceed the node's host RAM",
    "vllm_start": "vLLM refuses to start: free HBM < gpu_memory_utilization x total",
    "kv_cache": "vLLM's share leaves no KV cache for one max_model_len sequence",
    "log_prob": "OOM computing old log-probs",
    "ref": "OOM computing ref log-probs",
    "values": "OOM computing critic values",
    "critic_update": "OOM in the critic update",
    "actor_update": "OOM in the actor update",
    "rollout": "trainer residency + vLLM's reservation + graph pools exceed HBM when vLLM wakes",
}


@dataclass
class Check:
    """One constraint: what is needed against what there is (GiB)."""

    name: str
    need: float
    limit: float
    margin: float
    parts: dict[str, float] = field(default_factory=dict)     # adds up to `need`
    trainer: dict[str, float] = field(default_factory=dict)   # what the trainer part is made of
    low: float | None = None          # the favourable end of `need`'s band (verlsweep.plan.predictor.band); None: need

    @property
    def headroom(self) -> float:
        return self.limit - self.need - self.margin

    @property
    def favourable(self) -> float:
        return self.need if self.low is None else self.low

    @property
    def status(self) -> str:
        """ok: fits with the margin; tight: fits only without it; edge: does not fit as predicted but
        does at the favourable end of the band; fail: does not fit even there."""
        if self.headroom >= 0:
            return "ok"
        if self.headroom >= -self.margin:
            return "tight"
        return "edge" if self.favourable <= self.limit else "fail"

    def message(self) -> str:
        def fmt(items: dict[str, float]) -> str:
            return ", ".join(f"{k} {v:.1f}" for k, v in items.items() if abs(v) >= 0.05)

        parts = fmt(self.parts)
        if self.trainer:
            parts += f"; trainer = {fmt(self.trainer)}"
        # the consequence only where it is predicted; a fitting check states how much is left
        if self.status == "ok":
            verdict = f"fits, {self.headroom:.1f} GiB to spare beyond the margin"
        elif self.status == "tight":
            verdict = f"fits only inside the {self.margin:.1f} GiB margin; any more: {MEANING[self.name]}"
        elif self.status == "edge":
            verdict = (f"fits only at the favourable end of the planner's error band ({self.favourable:.1f} GiB): "
                       f"launched as an edge probe; if it does not fit: {MEANING[self.name]}")
        else:
            verdict = MEANING[self.name] + (f", even at the favourable end of the planner's error band "
                                            f"({self.favourable:.1f} GiB)" if self.favourable < self.need else "")
        return (f"{self.name}: need {self.need:.1f} GiB of {self.limit:.1f} (margin {self.margin:.1f}; "
                f"headroom {self.headroom:+.1f}) [{parts}] - {verdict}")


@dataclass
class MemoryPrediction:
    checks: dict[str, Check]
    trainer_peak_gb: float            # torch allocated in the trainer process: verl's max_memory_allocated_gb
    kv_tokens: float                  # tokens of KV cache per vLLM replica's TP rank
    host_gb: float

    @property
    def phases(self) -> dict[str, float]:
        """Device total per phase (host_memory excluded), what a device-level monitor would show."""
        return {k: c.need for k, c in self.checks.items() if k not in ("host_memory", "kv_cache")}

    @property
    def phases_low(self) -> dict[str, float]:
        """`phases` at the favourable end of the band (verlsweep.plan.predictor.band)."""
        return {k: c.favourable for k, c in self.checks.items() if k not in ("host_memory", "kv_cache")}

    @property
    def binding(self) -> Check:
        """The first constraint a run would hit (fail, then tight, in step order), else the device
        phase with the least headroom (the KV and host checks only bind when they do not fit)."""
        for status in ("fail", "edge", "tight"):
            hit = [self.checks[k] for k in ORDER if k in self.checks and self.checks[k].status == status]
            if hit:
                return hit[0]
        device = [c for k, c in self.checks.items() if k not in ("host_memory", "kv_cache")]
        return min(device, key=lambda c: c.headroom)

    @property
    def status(self) -> str:
        statuses = {c.status for c in self.checks.values()}
        return next((s for s in ("fail", "edge", "tight") if s in statuses), "ok")


# ---- rollout side -------------------------------------------------------------------------------

def vllm_weights_gb(inp: PlanInputs) -> float:
    """bf16 weights per TP rank; vLLM shards embeddings and lm_head over TP too."""
    return 2 * inp.model.params / inp.rollout.tp / GIB


def vllm_profile_gb(inp: PlanInputs) -> float:
    """vLLM's profiled activation peak (a max_num_batched_tokens forward) plus the sampler's logits
    for max_num_seqs sequences: what it keeps free of KV inside its share."""
    m, r = inp.model, inp.rollout
    per_token = 2 * (4 * m.hidden_size + (3 * m.intermediate_size
                     + (m.num_attention_heads + 2 * m.num_key_value_heads) * m.head_dim) / r.tp)
    sampler = r.max_num_seqs * m.vocab_size * 4 * 2
    return (r.max_num_batched_tokens * per_token + sampler) / GIB


def graph_pool_gb(inp: PlanInputs, c: Constants) -> float:
    r = inp.rollout
    if r.enforce_eager or r.cudagraph_mode == "NONE":
        return 0.0
    factor = c.piecewise_graph_factor if "PIECEWISE" in r.cudagraph_mode else 1.0
    return c.graph_pool_base_gb + c.graph_pool_per_size_gb * len(r.capture_sizes) * factor


def communicators(inp: PlanInputs) -> int:
    """HCCL/NCCL communicators a device joins: the trainer's world group (a 1-D FSDP mesh over all
    ranks reuses it: torch DeviceMesh), Ulysses' dp and sp groups when SP > 1, and vLLM's TP group
    when TP > 1 (vLLM's world group has no device communicator)."""
    sp = max(inp.actor.sp, inp.critic.sp if inp.critic else 1)
    return 1 + (2 if sp > 1 else 0) + (1 if inp.rollout.tp > 1 else 0)


def fixed_gb(inp: PlanInputs, c: Constants) -> dict[str, float]:
    return {
        "runtime contexts": 2 * c.runtime_context_gb,   # the trainer process and a vLLM worker
        "comm buffers": communicators(inp) * 2 * inp.hccl_buffsize_mb / 1024,
    }


# ---- host ----------------------------------------------------------------------------------

def host_gb(inp: PlanInputs, c: Constants) -> dict[str, float]:
    """Host RAM per node: every rank's offloaded shards, vLLM's sleep copies, worker processes, and
    the full fp32 model rank 0 loads before sharding (once, the largest role)."""
    per_node = inp.hardware.devices_per_node
    offloaded = 0.0
    for role in (inp.actor, inp.ref, inp.critic):
        if role is None:
            continue
        s = states(role)
        if role.offload_policy:
            offloaded += sum(s.values())
        else:
            offloaded += (s["params"] if role.param_offload else 0.0) + (
                s["optimizer"] if role.trains and role.optimizer_offload else 0.0)
    out = {"offloaded states": offloaded * per_node}
    # level-1 sleep keeps the weights in host RAM; verl uses it on NPU (vllm_async_server.py
    # _resolve_sleep_level) and level 2 (weights dropped) on GPU
    if inp.rollout.free_cache_engine and inp.hardware.device == "npu":
        out["vLLM sleep copies"] = vllm_weights_gb(inp) * per_node
    out["worker processes"] = c.host_process_gb * per_node
    out["model load"] = inp.model.params * inp.actor.dtype_bytes / GIB
    return out


# ---- the prediction -------------------------------------------------------------------------

def memory_per_phase(inp: PlanInputs, c: Constants, *, lengths: Lengths | None = None) -> MemoryPrediction:
    """All checks for one trial; `lengths` defaults to the worst case (every sequence at its maximum)."""
    lengths = lengths or worst_lengths(inp)
    hw, r = inp.hardware, inp.rollout
    cap, margin = hw.capacity_gb, inp.margin_gb
    fixed = fixed_gb(inp, c)
    graphs = graph_pool_gb(inp, c)
    reservation = r.util * hw.stated("hbm_usable_gb")          # vLLM: requested = util x total capacity
    checks: dict[str, Check] = {}

    host = host_gb(inp, c)
    checks["host_memory"] = Check("host_memory", sum(host.values()), hw.stated("host_memory_gb"), 0.0, host)

    at_start = sum(resident(role, with_optimizer=False) for role in (inp.actor, inp.critic))
    start_parts = {**fixed, "trainer params": at_start * c.fragmentation}
    checks["vllm_start"] = Check("vllm_start", sum(start_parts.values()) + reservation, cap, margin,
                                 {**start_parts, "vLLM reservation": reservation})

    weights, profile = vllm_weights_gb(inp), vllm_profile_gb(inp)
    kv_budget = reservation - weights - profile
    kv_per_token = inp.model.kv_bytes_per_token(r.tp)
    one_seq = r.max_model_len * kv_per_token / GIB
    checks["kv_cache"] = Check("kv_cache", weights + profile + one_seq, reservation, 0.0,
                               {"weights/TP": weights, "profile peak": profile, "KV of one max_model_len": one_seq})

    # with free_cache_engine=False vLLM keeps its whole share through training
    asleep = 0.0 if r.free_cache_engine else reservation
    trainer_peak = 0.0
    for name, parts in trainer_phases(inp, lengths, c).items():
        allocated = sum(parts.values())
        trainer_peak = max(trainer_peak, allocated)
        device = {**fixed, "trainer": allocated * c.fragmentation, "graph pools": graphs, "vLLM asleep": asleep}
        checks[name] = Check(name, sum(device.values()), cap, margin, device, parts)

    steady = sum(resident(role, with_optimizer=True) for role in (inp.actor, inp.critic))
    roll = {**fixed, "trainer residency": steady * c.fragmentation, "vLLM reservation": reservation,
            "graph pools": graphs}
    checks["rollout"] = Check("rollout", sum(roll.values()), cap, margin, roll)

    error = band.trainer_error(traced_terms.source(inp), c)    # after the traces: a failed one is analytic
    for check in checks.values():
        check.low = band.favourable(check.parts, error, c.rollout_band_error)
    return MemoryPrediction(checks=checks, trainer_peak_gb=trainer_peak,
                      kv_tokens=max(0.0, kv_budget) * GIB / kv_per_token, host_gb=sum(host.values()))


def concurrency(inp: PlanInputs, kv_tokens: float, lengths: Lengths) -> float:
    """Sequences one vLLM replica decodes at once: its max_num_seqs, the KV cache and the work given."""
    replicas = inp.hardware.world // inp.rollout.tp
    per_replica = inp.train_batch_size * (inp.rollout.n + inp.extra_generations_per_prompt) / replicas
    by_kv = kv_tokens / max(lengths.seq, 1.0)
    return max(1.0, min(float(inp.rollout.max_num_seqs), by_kv, math.ceil(per_replica)))
