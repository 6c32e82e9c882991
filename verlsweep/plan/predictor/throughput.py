"""A small roofline for one colocated verl step, in verl's `perf/throughput` unit.

verl reports tokens / (step time x devices) with tokens = prompt + response of every trained sequence
(verl/trainer/ppo/metric_utils.py compute_throughout_metrics). The step is modelled as the sum of:

* generation: each vLLM replica (TP devices) decodes its share of batch x n sequences; a decode step
  reads the weights / TP plus the KV of the active sequences from HBM, plus a per-step launch
  overhead that is small when the batch fits a captured graph; the number of steps is set by the
  work per replica over its concurrency (max_num_seqs, KV cache) and by the longest response.
  ReMax adds a greedy generation of one response per prompt (legacy ray_trainer.py).
  Prefill is compute at an MFU factor.
* training: 2N FLOPs per token per forward (old log-prob, ref, critic values) and 6N per update
  (+2N recompute with gradient checkpointing), at an MFU factor over all devices.
* offload traffic over the host link (param/optimizer offload, the host-resident ref, FSDP2 offload
  policy) and Adam on the host for offload_policy.
* weight sync to vLLM and its sleep/wake copies; a fixed per-step overhead.
* the throughput knobs' own time costs (verlsweep.plan.predictor.knob_costs): micro-batch efficiency, Ulysses
  all-to-alls, chunked-prefill steps.
"""
from __future__ import annotations

from dataclasses import dataclass

from verlsweep.common.names import GIB
from verlsweep.plan.predictor import knob_costs
from verlsweep.plan.predictor.calibration import Constants
from verlsweep.plan.predictor.lengths import Lengths
from verlsweep.plan.predictor.memory import concurrency, vllm_weights_gb
from verlsweep.plan.predictor.trainer_memory import micro_tokens, states
from verlsweep.plan.predictor.trial_spec import PlanInputs, Role


@dataclass
class Throughput:
    tokens_per_step: float
    step_s: float
    parts: dict[str, float]           # seconds per component
    world: int

    @property
    def tok_s(self) -> float:
        """perf/throughput: tokens per second per device."""
        return self.tokens_per_step / (self.step_s * self.world)


def _decode_s(inp: PlanInputs, c: Constants, seqs: float, lengths: Lengths, kv_tokens: float) -> float:
    """One generate call of `seqs` sequences on one replica."""
    r, m, hw = inp.rollout, inp.model, inp.hardware
    conc = min(concurrency(inp, kv_tokens, lengths), max(seqs, 1.0))
    longest = float(inp.max_response_length)
    steps = max(seqs * lengths.response / conc + c.decode_tail * (longest - lengths.response), longest)
    active = seqs * lengths.response / steps                      # mean running batch
    kv = active * (lengths.prompt + lengths.response / 2) * m.kv_bytes_per_token(r.tp)
    read = vllm_weights_gb(inp) * GIB + kv
    t_mem = read / (hw.stated("hbm_bandwidth_gbs") * 1e9 * c.decode_bw_efficiency)
    t_compute = 2 * m.params / r.tp * active / (hw.stated("bf16_tflops") * 1e12 * c.prefill_mfu)
    # vLLM replays a captured graph for a step whose batch fits its largest capture size and runs any larger
    # step eagerly (vllm/v1/cudagraph_dispatcher.py: a batch above max_cudagraph_capture_size dispatches
    # CUDAGraphMode.NONE; vllm-ascend's ACL graphs follow it). The bulk of a call runs the whole concurrent
    # batch; the tail, the longest sequences finishing alone, runs small batches. Deciding on the mean
    # batch instead made a higher util (more concurrency, fewer steps) predict a slower rollout.
    captured = max(r.capture_sizes) if not r.enforce_eager and r.cudagraph_mode != "NONE" and r.capture_sizes \
        else 0
    bulk = min(seqs * lengths.response / conc, steps)
    overhead = (bulk * _step_overhead_ms(c, conc <= captured)
                + (steps - bulk) * _step_overhead_ms(c, captured > 0)) / 1e3
    if r.tp > 1:
        overhead += steps * 2 * m.num_layers * c.tp_allreduce_us / 1e6
    prefill = seqs * lengths.prompt * 2 * m.params / r.tp / (hw.stated("bf16_tflops") * 1e12 * c.prefill_mfu)
    return steps * max(t_mem, t_compute) + overhead + prefill


def _step_overhead_ms(c: Constants, graph: bool) -> float:
    return c.graph_step_overhead_ms if graph else c.eager_step_overhead_ms


def _flops_per_token(inp: PlanInputs, params: float, lengths: Lengths) -> float:
    """Forward FLOPs per token: 2N for the matmuls plus attention over the mean context."""
    m = inp.model
    return 2 * params + 4 * m.num_layers * m.num_attention_heads * m.head_dim * lengths.seq / 2


def _train_s(inp: PlanInputs, c: Constants, tokens: float, lengths: Lengths) -> dict[str, float]:
    hw = inp.hardware
    rate = hw.world * hw.stated("bf16_tflops") * 1e12 * c.train_mfu
    out: dict[str, float] = {}

    def passes(role: Role, forward: str, update: str | None) -> None:
        f = _flops_per_token(inp, role.params, lengths)
        out[forward] = tokens * f / rate
        if update:
            mult = 3 + (1 if role.grad_ckpt else 0)               # fwd + 2x bwd (+ recompute)
            out[update] = tokens * f * mult * role.epochs / rate

    passes(inp.actor, "old_log_prob", "update_actor")
    if inp.ref is not None:
        passes(inp.ref, "ref", None)
    if inp.critic is not None:
        passes(inp.critic, "values", "update_critic")
    return out


def _host_traffic_s(inp: PlanInputs, c: Constants, lengths: Lengths) -> tuple[float, float]:
    """(seconds moving states over the host link, seconds of host-side Adam) per step."""
    link = inp.hardware.stated("host_link_gbs") * 1e9 * c.host_link_efficiency
    moved = 0.0   # GiB per device
    adam = 0.0
    optimizer_steps = max(1, inp.train_batch_size // max(inp.mini_batch_size, 1))
    for role, forward_passes in ((inp.actor, 2), (inp.ref, 1), (inp.critic, 1)):
        if role is None:
            continue
        s = states(role)
        fwd_micro = max(1.0, _rank_tokens(inp, role, lengths) / max(micro_tokens(inp, role, lengths, update=False)
                                                                    * role.sp, 1.0))
        if role.offload_policy:
            # FSDP2 CPUOffloadPolicy copies each unit's shard in for every forward / backward
            moved += s["params"] * fwd_micro * forward_passes
            if role.trains:
                upd_micro = max(1.0, fwd_micro * (1 + role.grad_ckpt))
                moved += (2 * s["params"] + s["grads"]) * upd_micro * role.epochs
                adam += role.params / role.shard * role.epochs * optimizer_steps / c.cpu_adam_params_per_s
            continue
        if role.param_offload:
            moved += 2 * s["params"] * (forward_passes + (1 if role.trains else 0))
        if role.trains and role.optimizer_offload:
            moved += 2 * s["optimizer"]
    return moved * GIB / link, adam


def _rank_tokens(inp: PlanInputs, role: Role, lengths: Lengths) -> float:
    dp = max(1, inp.hardware.world // role.sp)
    return inp.train_batch_size * inp.rollout.n * lengths.seq / dp


def step_throughput(inp: PlanInputs, c: Constants, lengths: Lengths, kv_tokens: float) -> Throughput:
    hw, r = inp.hardware, inp.rollout
    replicas = max(1, hw.world // r.tp)
    tokens = inp.train_batch_size * r.n * lengths.seq
    parts = {"gen": _decode_s(inp, c, inp.train_batch_size * r.n / replicas, lengths, kv_tokens)}
    if inp.extra_generations_per_prompt:
        parts["gen_baseline"] = _decode_s(inp, c, inp.train_batch_size / replicas, lengths, kv_tokens)
    parts.update(_train_s(inp, c, tokens, lengths))
    parts["offload"], parts["host_adam"] = _host_traffic_s(inp, c, lengths)
    weights = 2 * inp.model.params
    sleep_copies = 2 * vllm_weights_gb(inp) * GIB if (r.free_cache_engine and hw.device == "npu") else 0.0
    parts["update_weights"] = weights / (c.weight_sync_gbs * 1e9) + sleep_copies / (
        hw.stated("host_link_gbs") * 1e9 * c.host_link_efficiency)
    parts["other"] = c.step_overhead_s
    parts = knob_costs.adjust(parts, inp, c, lengths, tokens)   # micro batches, Ulysses SP, chunked prefill
    return Throughput(tokens_per_step=tokens, step_s=sum(parts.values()), parts=parts, world=hw.world)
