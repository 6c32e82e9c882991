"""The trainer side of verlsweep.plan.predictor.memory: what one FSDP role (actor, ref, critic) holds on a device,
GiB per device. FSDP stores params, grads and Adam's two moments in fsdp_config.model_dtype, sharded
over the FSDP group, on the device unless offloaded; a pass adds the units FSDP gathers, the
activations of one micro batch and, for the vocabulary head, its logits (see memory.py's docstring for
the phases a step goes through).
"""
from __future__ import annotations

from verlsweep.common.names import GIB
from verlsweep.plan.predictor import traced_terms
from verlsweep.plan.predictor.calibration import Constants
from verlsweep.plan.predictor.lengths import Lengths
from verlsweep.plan.predictor.trial_spec import PlanInputs, Role


def _gib(nbytes: float) -> float:
    return nbytes / GIB


def states(role: Role) -> dict[str, float]:
    """Sharded params / grads / Adam moments of one role, GiB per device, wherever they live."""
    p = _gib(role.params * role.dtype_bytes / role.shard)
    trainable = 0.0 if (role.lora or not role.trains) else p
    return {"params": p, "grads": trainable, "optimizer": 2 * trainable}


def resident(role: Role | None, *, with_optimizer: bool) -> float:
    """What a role keeps on the device while another phase runs."""
    if role is None or role.offload_policy:
        return 0.0
    s = states(role)
    out = 0.0 if role.param_offload else s["params"]
    if with_optimizer and role.trains and not role.optimizer_offload:
        out += s["optimizer"]
    return out


def micro_tokens(inp: PlanInputs, role: Role, lengths: Lengths, *, update: bool) -> float:
    """Tokens one device holds in one micro batch of this role's pass.

    Dynamic bsz packs up to max_token_len x SP tokens per micro batch (verl dp_actor /
    seqlen_balancing rearrange_micro_batches) but never more than the data-parallel rank has; a
    sequence longer than the budget still goes whole. Otherwise micro batch x sequence length. Ulysses
    SP splits the sequence over its ranks.
    """
    dp = max(1, inp.hardware.world // role.sp)
    seqs = (inp.mini_batch_size if update else inp.train_batch_size) * inp.rollout.n
    rank_tokens = max(seqs * lengths.seq / dp, lengths.seq)
    if role.dynamic_bsz:
        budget = (role.max_token_len if update else role.forward_max_token_len) * role.sp
        tokens = min(max(budget, lengths.seq), rank_tokens)
    else:
        micro = (role.micro_batch if update else role.forward_micro_batch) or role.micro_batch or 1
        tokens = min(micro * lengths.seq, rank_tokens)
    return tokens / role.sp


def _working_set(inp: PlanInputs, role: Role, *, backward: bool) -> float:
    """Unsharded bf16 compute copies FSDP gathers while a pass runs, GiB.

    FSDP1 keeps the root unit (embeddings, final norm, untied lm_head) gathered for the whole pass;
    FSDP2 wraps embed_tokens and lm_head on their own (verl/utils/fsdp_utils.py
    _select_fsdp2_wrap_targets), so only the unit in use plus the prefetched layer are gathered.
    Backward adds the unit's unsharded gradient.
    """
    m = inp.model
    head = m.embedding_params if role.vocab_head else 0.0
    root = m.embedding_params + (m.head_params if role.vocab_head else 0.0)
    layers = 2 * m.layer_params
    gathered = (root + layers) if role.strategy == "fsdp" else max(head, m.layer_params) + m.layer_params
    grads = max(head, m.layer_params) if backward else 0.0
    return _gib(2 * (gathered + grads))


def _activations(inp: PlanInputs, role: Role, tokens: float, c: Constants, *, backward: bool) -> float:
    """Per-token hidden states, GiB: with checkpointing one input per layer plus one layer
    recomputed; the layer's working set is ~7 hidden-size and ~4 intermediate-size bf16 tensors."""
    m = inp.model
    layer = 2 * (7 * m.hidden_size + 4 * m.intermediate_size) * c.activation_factor
    if not backward:
        return _gib(tokens * layer)
    saved = m.num_layers * 2 * m.hidden_size + layer if role.grad_ckpt else m.num_layers * layer
    return _gib(tokens * saved)


def _logits(inp: PlanInputs, role: Role, tokens: float, c: Constants, *, backward: bool) -> float:
    if not role.vocab_head:
        return 0.0
    v = inp.model.vocab_size
    per = c.logits_bytes if backward else c.forward_logits_bytes
    out = tokens * v * per
    # which passes compute entropy, and how: the tracer's rule (the old log-prob yes, the ref never)
    entropy = traced_terms.entropy_mode(role, update=backward)
    # verl/utils/torch_functional.py: entropy_from_logits makes a softmax and a product in the
    # logits' dtype (bf16); the chunked variant does the same in fp32 for one chunk at a time
    if entropy == "chunked":
        out += min(tokens, role.entropy_chunk) * v * 12
    elif entropy == "full":
        out += tokens * v * 4
    return _gib(out)


def analytic_work(inp: PlanInputs, role: Role, tokens: float, c: Constants, *, update: bool) -> dict[str, float]:
    """The analytic formula's terms of one micro batch of `tokens`, GiB: what FSDP gathers, the
    activations and the logits (verlsweep.plan.fit.trace_fit fits the last two to traces). A forward under
    no_grad frees each layer's activations before the head runs, so it peaks at the larger of the two
    (the trace's peak is in the layers or at the loss, never both); a training pass keeps every saved
    activation alive while the logits and their gradient are."""
    act = _activations(inp, role, tokens, c, backward=update)
    logits = _logits(inp, role, tokens, c, backward=update)
    work = {"activations": act, "logits": logits}
    if not update:
        work = {"logits": logits} if logits >= act else {"activations": act}
    return {"gathered": _working_set(inp, role, backward=update), **work}


def pass_memory(inp: PlanInputs, role: Role, lengths: Lengths, c: Constants, *, update: bool) -> dict[str, float]:
    """Trainer allocations at the peak of one role's forward (update=False) or training pass, GiB
    per device (see pass_memory_at)."""
    return pass_memory_at(inp, role, micro_tokens(inp, role, lengths, update=update), c, update=update)


def states_on_device(role: Role, *, update: bool) -> dict[str, float]:
    """A role's params / grads / Adam moments on the device during its pass, GiB."""
    s = states(role)
    return {
        "params": 0.0 if role.offload_policy else s["params"],
        "grads": 0.0 if (role.offload_policy or not update) else s["grads"],
        # the optimizer comes back for the update; otherwise it stays wherever it lives
        "optimizer": 0.0 if role.offload_policy or not role.trains else
        (s["optimizer"] if update or not role.optimizer_offload else 0.0),
    }


def pass_memory_at(inp: PlanInputs, role: Role, tokens: float, c: Constants, *, update: bool) -> dict[str, float]:
    """pass_memory for a micro batch of `tokens` per device. A training pass peaks either in backward
    (states + gathered units + activations + logits) or in the optimizer step, where torch's foreach
    Adam allocates a param-sized temporary (torch/optim/adam.py _multi_tensor_adam: the denominator of
    sqrt(v) + eps)."""
    s = states(role)
    on_device = states_on_device(role, update=update)
    work = analytic_work(inp, role, tokens, c, update=update)
    step = s["grads"] if update and not role.offload_policy else 0.0   # Adam's temporary: one grads-sized tensor
    traced = traced_terms.pass_terms(inp, role, tokens, update=update)
    if traced is not None:      # plan.trainer=traced: the model code's own activations, logits, step
        work = {"gathered": work["gathered"], "traced activations": traced.work}
        step = traced.step if update and not role.offload_policy else 0.0
    if step > sum(work.values()):
        return {**on_device, "optimizer step": step}
    return {**on_device, **work}


def trainer_phases(inp: PlanInputs, lengths: Lengths, c: Constants) -> dict[str, dict[str, float]]:
    """Trainer-process allocations per training phase, with the other roles' residency."""
    actor, ref, critic = inp.actor, inp.ref, inp.critic
    phases = {
        "log_prob": {**pass_memory(inp, actor, lengths, c, update=False),
                     "critic resident": resident(critic, with_optimizer=True)},
        "actor_update": {**pass_memory(inp, actor, lengths, c, update=True),
                         "critic resident": resident(critic, with_optimizer=True)},
    }
    if ref is not None:
        phases["ref"] = {**pass_memory(inp, ref, lengths, c, update=False),
                         "actor resident": resident(actor, with_optimizer=True),
                         "critic resident": resident(critic, with_optimizer=True)}
    if critic is not None:
        others = {"actor resident": resident(actor, with_optimizer=True)}
        phases["values"] = {**pass_memory(inp, critic, lengths, c, update=False), **others}
        phases["critic_update"] = {**pass_memory(inp, critic, lengths, c, update=True), **others}
    return phases
