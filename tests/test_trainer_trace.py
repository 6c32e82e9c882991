"""The trainer trace (verlsweep.plan.trace.trainer_trace) on a tiny Qwen3: exact state bytes, an activation range,
checkpointing and offload as the planner applies them, the disk cache and the fallback to the formula."""
from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.common.names import GIB
from verlsweep.plan.predictor import traced_terms
from verlsweep.plan.predictor.calibration import load
from verlsweep.plan.predictor.inputs import from_cfg
from verlsweep.plan.predictor.lengths import worst_lengths
from verlsweep.plan.predictor.trainer_memory import micro_tokens, trainer_phases
from verlsweep.plan.predictor.verdict import predict
from verlsweep.plan.trace.trainer_trace import PassSpec, TraceError, trace_pass, trace_states

H, L, HEADS, KV, HD, INTER, VOCAB = 64, 2, 4, 2, 16, 128, 512
TINY = {"model_type": "qwen3", "hidden_size": H, "num_hidden_layers": L, "num_attention_heads": HEADS,
        "num_key_value_heads": KV, "head_dim": HD, "intermediate_size": INTER, "vocab_size": VOCAB,
        "tie_word_embeddings": False}
# q, k, v, o projections; q/k RMSNorm over a head; two RMSNorms over the hidden size; gate, up, down
LAYER = H * HEADS * HD + 2 * H * KV * HD + HEADS * HD * H + 2 * HD + 2 * H + 3 * H * INTER
PARAMS = 2 * VOCAB * H + L * LAYER + H          # embeddings, lm_head (untied), layers, final norm
TENSORS = 2 + 11 * L + 1
TOKENS = 256


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("VERLSWEEP_CACHE", str(tmp_path / "cache"))


@pytest.mark.slow      # the first trace of a process imports torch and transformers (~10 s on CI's 2 cores)
def test_state_bytes_are_exactly_params_grads_and_adams_two_moments():
    states = trace_states(TINY, "fp32")
    assert states.params_bytes == 4 * PARAMS
    assert states.grads_bytes == 4 * PARAMS
    # exp_avg and exp_avg_sq per parameter, and one fp32 step counter per tensor (torch.optim.AdamW)
    assert states.optimizer_bytes == 2 * 4 * PARAMS + 4 * TENSORS
    # foreach AdamW's temporary: the sqrt of the second moment over the whole group
    assert states.step_bytes == 4 * PARAMS
    assert trace_states(TINY, "bf16").params_bytes == 2 * PARAMS


def test_a_training_pass_holds_logits_and_activations_and_checkpointing_keeps_fewer():
    logits = TOKENS * VOCAB * 2                               # bf16 (T, V)
    saved_inputs = L * TOKENS * H * 2                         # one bf16 hidden state per layer
    ckpt = trace_pass(TINY, PassSpec(tokens=TOKENS, update=True, grad_ckpt=True))
    full = trace_pass(TINY, PassSpec(tokens=TOKENS, update=True, grad_ckpt=False))
    for traced in (ckpt, full):
        assert traced.params_bytes == 2 * PARAMS and traced.grads_bytes == 2 * PARAMS   # the bf16 compute copy
        assert traced.peak_at == "backward"
    # with checkpointing: the logits, the checkpointed inputs, and at most ~3 layers' worth of working set
    per_layer = TOKENS * 2 * (7 * H + 4 * INTER)             # the analytic formula's per-layer estimate
    assert logits + saved_inputs < ckpt.work_bytes < logits + saved_inputs + 3 * per_layer
    # without it every layer keeps its intermediates: more than the checkpointed pass by over a layer
    assert full.work_bytes > ckpt.work_bytes + per_layer


def test_a_forward_pass_keeps_no_gradients_and_entropy_adds_a_vocab_sized_term():
    plain = trace_pass(TINY, PassSpec(tokens=TOKENS, update=False))
    entropy = trace_pass(TINY, PassSpec(tokens=TOKENS, update=False, entropy="full"))
    assert plain.grads_bytes == 0
    assert TOKENS * VOCAB * 2 <= plain.work_bytes < 2 * TOKENS * VOCAB * 2 + TOKENS * H * 16
    assert entropy.work_bytes >= plain.work_bytes + TOKENS * VOCAB * 2 / 2     # at least a bf16 softmax more


def test_a_second_trace_of_the_same_shape_is_a_cache_hit():
    spec = PassSpec(tokens=TOKENS, update=False)
    first = trace_pass(TINY, spec)
    start = time.perf_counter()
    second = trace_pass(TINY, spec)
    assert second.cached and not first.cached
    assert time.perf_counter() - start < 0.5
    assert (second.work_bytes, second.params_bytes) == (first.work_bytes, first.params_bytes)
    assert not trace_pass(TINY, replace(spec, tokens=2 * TOKENS)).cached     # another shape is traced


def test_a_trace_past_its_time_limit_raises():
    with pytest.raises(TraceError, match="time limit"):
        trace_pass(TINY, PassSpec(tokens=TOKENS, update=True), limit_s=0.0)


def _tiny_inputs(*overrides: str):
    cfg = compose_config(["model=qwen3_0_6b", "plan.trainer=traced", "verl.data.max_prompt_length=64",
                          "verl.data.max_response_length=64", *overrides])
    inp = from_cfg(cfg)
    model = replace(inp.model, params=float(PARAMS), num_layers=L, hidden_size=H, num_attention_heads=HEADS,
                    num_key_value_heads=KV, head_dim=HD, intermediate_size=INTER, vocab_size=VOCAB,
                    tie_word_embeddings=False, hf_config=json.dumps(TINY, sort_keys=True))
    return replace(inp, model=model, actor=replace(inp.actor, params=float(PARAMS)))


@pytest.mark.parametrize("offload", [False, True])
def test_the_planner_takes_traced_activations_and_keeps_exact_states_where_offload_leaves_them(offload):
    a = "verl.actor_rollout_ref.actor.fsdp_config"
    inp = _tiny_inputs(f"{a}.param_offload={offload}", f"{a}.optimizer_offload={offload}",
                       "verl.actor_rollout_ref.model.enable_gradient_checkpointing=true")
    c = load().constants
    phases = trainer_phases(inp, worst_lengths(inp), c)
    shard = inp.actor.shard
    update, log_prob = phases["actor_update"], phases["log_prob"]
    assert update["params"] * GIB == pytest.approx(4 * PARAMS / shard)
    assert update["optimizer"] * GIB == pytest.approx(2 * 4 * PARAMS / shard)
    # offloaded params come back for the actor's own passes, the optimizer only for its update; while the
    # ref runs, an offloaded actor keeps nothing on the device (verl/workers/engine/base.py BaseEngineCtx)
    assert log_prob["params"] * GIB == pytest.approx(4 * PARAMS / shard)
    assert log_prob["optimizer"] == (0.0 if offload else pytest.approx(2 * 4 * PARAMS / shard / GIB))
    assert phases["ref"]["actor resident"] == (0.0 if offload else pytest.approx(3 * 4 * PARAMS / shard / GIB))
    tokens = micro_tokens(inp, inp.actor, worst_lengths(inp), update=True)
    traced = trace_pass(TINY, PassSpec(tokens=traced_terms.grid_tokens(tokens), update=True, grad_ckpt=True))
    assert update["traced activations"] * GIB == pytest.approx(
        traced.work_bytes * tokens / traced_terms.grid_tokens(tokens))
    assert "activations" not in update and "logits" not in update
    assert predict(inp, load()).trainer == "traced"


def test_without_a_model_type_or_with_a_failing_trace_the_planner_says_it_used_the_formula():
    inp = _tiny_inputs()
    unknown = replace(inp, model=replace(inp.model, hf_config=None))
    assert "no Hugging Face config" in predict(unknown, load()).trainer
    broken = replace(inp, model=replace(inp.model, hf_config=json.dumps({**TINY, "model_type": "no_such_model"})))
    verdict = predict(broken, load())
    assert verdict.trainer.startswith("analytic (the trace failed")
    assert "activations" in verdict.checks["actor_update"].trainer       # the analytic terms


def test_token_counts_are_traced_on_a_grid_of_eight_steps_per_octave():
    assert [traced_terms.grid_tokens(t) for t in (1, 15.2, 4096, 4097, 5000, 8191)] == [1, 16, 4096, 4608, 5120, 8192]


@pytest.mark.parametrize("model_type, extra", [
    ("qwen2", {}), ("llama", {"head_dim": HD}),
    ("qwen3_moe", {"head_dim": HD, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32})])
def test_qwen2_llama_and_qwen3_moe_configs_trace_too(model_type, extra):
    config = {**TINY, **extra, "model_type": model_type}
    traced = trace_pass(config, PassSpec(tokens=TOKENS, update=True, grad_ckpt=True))
    assert traced.work_bytes > TOKENS * VOCAB * 2 and traced.grads_bytes == traced.params_bytes


@pytest.mark.parametrize("group, params_b", [("qwen3_30b_a3b", 30.532), ("qwen2_5_7b_instruct", 7.616)])
def test_the_new_model_groups_build_the_published_parameter_count(group, params_b):
    import torch
    import transformers

    inp = from_cfg(compose_config([f"model={group}"]))
    config = json.loads(inp.model.hf_config)
    assert inp.model.params == params_b * 1e9
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            transformers.AutoConfig.for_model(config.pop("model_type"), **config))
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(params_b * 1e9, rel=1e-4)


def test_the_checkpoints_config_json_wins_over_the_groups_shapes(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**TINY, "architectures": ["Qwen3ForCausalLM"]}))
    on_disk = from_cfg(compose_config(["model=qwen3_0_6b", f"model.path={tmp_path}"]))
    assert json.loads(on_disk.model.hf_config)["hidden_size"] == H
    group_cfg = compose_config(["model=qwen3_0_6b", f"model.path={tmp_path}/absent"])
    from_group = json.loads(from_cfg(group_cfg).model.hf_config)
    assert (from_group["model_type"], from_group["hidden_size"], from_group["num_hidden_layers"]) == ("qwen3", 1024, 28)
