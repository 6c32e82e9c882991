"""What the throughput knobs (sweeps/throughput.yaml) cost in time, on top of verlsweep.plan.predictor.throughput's
roofline. Their memory costs live where the memory model is: the token budgets set the micro batch
(trainer_memory.micro_tokens -> activations and logits), capture sizes the graph pools
(memory.graph_pool_gb), max_num_seqs the sampler's logits inside vLLM's share (memory.vllm_profile_gb),
free_cache_engine whether vLLM's share stays during training (memory.memory_per_phase).

Time, per step:
* micro-batch efficiency (a guess): a pass over t tokens per device per micro batch runs at
  t / (t + half) of its asymptotic MFU, relative to the micro batch train_mfu was fitted at; so a
  bigger ppo_max_token_len_per_gpu / log_prob_max_token_len_per_gpu means fewer, fuller micro batches
  (verl's GSPO practice doc: a larger actor budget shortens the update; perf_tuning.rst).
* Ulysses SP (a guess at the bandwidth): four all-to-alls of the hidden states per layer in each
  forward (verl/utils/ulysses.py), repeated in backward and in the recomputation.
* chunked prefill: prompts enter vLLM at most max_num_batched_tokens per scheduler step, each step an
  eager launch (graphs cover decode only in FULL_DECODE_ONLY mode).
Decode batching (max_num_seqs, the KV cache), graph vs eager decode steps and recomputation
(gradient checkpointing: one more forward per update) are in throughput.py already.
"""
from __future__ import annotations

import math

from verlsweep.plan.predictor.calibration import Constants
from verlsweep.plan.predictor.lengths import Lengths
from verlsweep.plan.predictor.trainer_memory import micro_tokens
from verlsweep.plan.predictor.trial_spec import PlanInputs, Role


def micro_efficiency(tokens: float, c: Constants) -> float:
    """MFU of a pass over `tokens` per device per micro batch, relative to the fitted micro batch."""
    half = c.micro_batch_half_tokens

    def eff(t: float) -> float:
        return t / (t + half)

    return eff(max(tokens, 1.0)) / eff(c.micro_batch_ref_tokens)


def _a2a_s(inp: PlanInputs, role: Role, tokens: float, c: Constants, passes: float) -> float:
    """Ulysses all-to-alls of `tokens` per step and device: 4 per layer and pass, (sp-1)/sp of each leaves."""
    if role.sp <= 1:
        return 0.0
    m = inp.model
    per_device = tokens / inp.hardware.world
    moved = 4 * m.num_layers * per_device * m.hidden_size * 2 * (role.sp - 1) / role.sp * passes
    return moved / (c.ulysses_a2a_gbs * 1e9)


def _prefill_chunks_s(inp: PlanInputs, c: Constants, lengths: Lengths) -> float:
    r = inp.rollout
    replicas = max(1, inp.hardware.world // r.tp)
    prompts = inp.train_batch_size * (r.n + inp.extra_generations_per_prompt) / replicas * lengths.prompt
    return math.ceil(prompts / max(r.max_num_batched_tokens, 1)) * c.eager_step_overhead_ms / 1e3


def adjust(parts: dict[str, float], inp: PlanInputs, c: Constants, lengths: Lengths, tokens: float) -> dict[str, float]:
    """`parts` (throughput.step_throughput's seconds per component) with the knobs' time costs; `tokens`
    is the step's trained tokens."""
    out = dict(parts)
    passes = [(inp.actor, "old_log_prob", False, 1.0), (inp.actor, "update_actor", True, 3.0 + inp.actor.grad_ckpt)]
    if inp.ref is not None:
        passes.append((inp.ref, "ref", False, 1.0))
    if inp.critic is not None:
        passes += [(inp.critic, "values", False, 1.0), (inp.critic, "update_critic", True, 3.0 + inp.critic.grad_ckpt)]
    for role, part, update, n in passes:
        if part not in out:
            continue
        micro = micro_tokens(inp, role, lengths, update=update)
        calls = n * (role.epochs if update else 1)
        out[part] = out[part] / micro_efficiency(micro, c) + _a2a_s(inp, role, tokens, c, calls)
    out["gen"] = out.get("gen", 0.0) + _prefill_chunks_s(inp, c, lengths)
    return out
