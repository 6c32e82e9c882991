"""The planner's trainer terms from traces (verlsweep.plan.trace.trainer_trace) when plan.trainer=traced.

A role's pass becomes one traced micro batch: the activations, logits and temporaries it holds at its
peak, and the AdamW step's temporaries for an update. Parameters, gradients and Adam's moments stay
the planner's exact arithmetic (trainer_memory.states: params x model_dtype / FSDP group), which the
state trace reproduces byte for byte (tests/test_trainer_trace.py), and so does what the FSDP units
gather (trainer_memory._working_set): the trace runs one device at world size 1.

Micro-batch token counts are traced on a grid of eight steps per octave and scaled linearly to the
count asked (a pass's activations and logits grow with its tokens), so a sweep whose lengths vary
traces a few shapes, not one per trial. A trace that fails or runs past plan.trace_limit_s leaves the
analytic formula in place and says why (`source`).
"""
from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from verlsweep.common.names import GIB
from verlsweep.plan.predictor.trial_spec import PlanInputs, Role

log = logging.getLogger(__name__)

_FAILED: dict[str, str] = {}        # hf_config JSON -> why its trace failed, once per process
_MEMO: dict[tuple, Any] = {}     # one process plans a table's grid: no disk read per variant


@dataclass(frozen=True)
class TracedTerms:
    work: float          # GiB: activations + logits + temporaries of one micro batch
    step: float          # GiB: the optimizer step's temporaries on this role's shard (0 for a forward)


def grid_tokens(tokens: float) -> int:
    """The traced token count for `tokens`: rounded up to 1/8 of its power of two."""
    t = max(1, math.ceil(tokens))
    step = 2 ** max(0, t.bit_length() - 4)
    return math.ceil(t / step) * step


def entropy_mode(role: Role, *, update: bool) -> str:
    # the old log-prob computes entropy unless LoRA, the ref never (verl/workers/fsdp_workers.py
    # compute_log_prob `calculate_entropy = not is_lora`, compute_ref_log_prob `calculate_entropy=False`);
    # the update only when the loss uses it (entropy_coeff / calculate_entropy)
    wanted = role.entropy_in_update if update else (role.name == "actor" and not role.lora)
    if not role.vocab_head or not wanted:
        return "none"
    if role.entropy_chunking:
        return "chunked"
    return "checkpointed" if role.entropy_checkpointing and update else "full"


def _dtype(role: Role) -> str:
    return {4: "fp32", 2: "bf16"}[role.dtype_bytes]


def wanted(inp: PlanInputs) -> bool:
    return inp.trainer == "traced" and inp.model.hf_config is not None


def source(inp: PlanInputs) -> str:
    """Where the trainer's activation terms come from, for the table and the verdict."""
    if inp.trainer != "traced":
        return "analytic"
    if inp.model.hf_config is None:
        return "analytic (no Hugging Face config for this model: add model.config.model_type to its model file)"
    why = _FAILED.get(inp.model.hf_config)
    return f"analytic (the trace failed: {why})" if why else "traced"


def pass_spec(role: Role, tokens: int, *, update: bool):
    """What the tracer runs for one micro batch of `tokens` of this role's pass (a trainer_trace.PassSpec)."""
    from verlsweep.plan.trace import trainer_trace

    return trainer_trace.PassSpec(tokens=tokens, update=update, grad_ckpt=role.grad_ckpt and update,
                                  vocab_head=role.vocab_head, entropy=entropy_mode(role, update=update),
                                  entropy_chunk=role.entropy_chunk or 2048)


def pass_terms(inp: PlanInputs, role: Role, tokens: float, *, update: bool) -> TracedTerms | None:
    """Traced terms of one role's pass, or None when the planner keeps its analytic formula."""
    hf_config = inp.model.hf_config
    if not wanted(inp) or hf_config is None or hf_config in _FAILED:
        return None
    from verlsweep.plan.trace import trainer_trace

    config = json.loads(hf_config)
    traced_tokens = grid_tokens(tokens)
    spec = pass_spec(role, traced_tokens, update=update)
    value_head = not role.vocab_head
    try:
        key = ("pass", inp.model.hf_config, spec)
        if key not in _MEMO:
            _MEMO[key] = trainer_trace.trace_pass(config, spec, limit_s=inp.trace_limit_s)
        traced = _MEMO[key]
        step = 0.0
        if update:
            skey = ("states", inp.model.hf_config, _dtype(role), value_head)
            if skey not in _MEMO:
                _MEMO[skey] = trainer_trace.trace_states(config, _dtype(role), value_head=value_head,
                                                         limit_s=inp.trace_limit_s)
            step = _MEMO[skey].step_bytes / role.shard / GIB
    except trainer_trace.TraceError as exc:
        _FAILED[hf_config] = str(exc)
        log.warning("planner: trainer trace of %s failed, analytic formula used: %s", inp.model.name, exc)
        return None
    return TracedTerms(work=traced.work_bytes * tokens / traced_tokens / GIB, step=step)
