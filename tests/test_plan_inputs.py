"""verlsweep.plan.predictor.inputs.from_cfg: a composed sweep config read into the planner's dataclasses
(verlsweep.plan.predictor.trial_spec), verl's defaults filling what the config leaves unset, and NotPlannable
for what the model does not cover. verlsweep.plan.predictor.verl_config's defaults are checked against the
installed verl by tests/test_plan_model.py."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from verlsweep.command.compose import compose_config
from verlsweep.plan.predictor.inputs import from_cfg
from verlsweep.plan.predictor.trial_spec import NotPlannable, PlanInputs
from verlsweep.plan.predictor.verl_config import (
    DEFAULT_CUDAGRAPH_MODE,
    VERL_DEFAULTS,
    VerlValues,
    default_capture_sizes,
)

ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"


def inputs(*overrides: str, algorithm: str = "grpo") -> PlanInputs:
    return from_cfg(compose_config(["hardware=a2_64g", "model=qwen3_8b", f"algorithm={algorithm}", *overrides]))


@pytest.fixture(scope="module")
def grpo() -> PlanInputs:
    return inputs()


def test_hardware_and_model_come_from_their_groups(grpo):
    assert (grpo.hardware.name, grpo.hardware.device, grpo.hardware.world) == ("a2_64g", "npu", 8)
    assert grpo.model.name == "qwen3_8b" and grpo.model.params == pytest.approx(8.19e9, rel=0.01)
    assert grpo.actor.params == grpo.model.params


def test_grpo_has_a_host_resident_ref_for_its_kl_loss_and_no_critic(grpo):
    assert grpo.ref is not None and grpo.critic is None
    assert grpo.ref.param_offload and grpo.ref.offload_policy and not grpo.ref.trains


def test_gae_brings_a_critic_without_the_vocabulary_head():
    ppo = inputs(algorithm="ppo")
    assert ppo.critic is not None and not ppo.critic.vocab_head
    assert ppo.critic.params == pytest.approx(ppo.model.params - ppo.model.head_params)


def test_an_explicit_critic_enable_wins_over_the_estimator():
    assert inputs("verl.critic.enable=false", algorithm="ppo").critic is None


def test_with_lora_the_ref_is_the_actor_with_adapters_off():
    lora = inputs("+verl.actor_rollout_ref.model.lora_rank=16")
    assert lora.actor.lora and lora.ref is None


def test_the_deprecated_actor_sp_key_wins_when_it_is_above_one():
    sp = inputs(f"+{ACTOR}.ulysses_sequence_parallel_size=2")
    assert sp.actor.sp == 2 and sp.ref.sp == 2


def test_fsdp_size_minus_one_or_beyond_the_world_shards_over_every_device():
    assert inputs(f"{ACTOR}.fsdp_config.fsdp_size=-1").actor.shard == 8
    assert inputs(f"{ACTOR}.fsdp_config.fsdp_size=64").actor.shard == 8
    assert inputs(f"{ACTOR}.fsdp_config.fsdp_size=4").actor.shard == 4


def test_offload_policy_counts_only_under_fsdp2():
    assert not inputs(f"{ACTOR}.strategy=fsdp", f"{ACTOR}.fsdp_config.offload_policy=true").actor.offload_policy
    assert inputs(f"{ACTOR}.strategy=fsdp2", f"{ACTOR}.fsdp_config.offload_policy=true").actor.offload_policy


def test_capture_sizes_given_as_a_string_are_parsed_and_sorted():
    sizes = inputs(f"++{ROLLOUT}.engine_kwargs.vllm.compilation_config.cudagraph_capture_sizes='[16, 4, 8]'")
    assert sizes.rollout.capture_sizes == (4, 8, 16)


def test_without_a_max_model_len_vllm_takes_the_models_position_limit(grpo):
    assert grpo.rollout.max_model_len == grpo.model.max_position_embeddings
    assert inputs(f"{ROLLOUT}.max_model_len=4096").rollout.max_model_len == 4096


def test_the_hccl_buffer_is_npu_only_with_cann_s_200_mb_default(grpo):
    assert grpo.hccl_buffsize_mb == pytest.approx(float(OmegaConf.select(
        compose_config(["hardware=a2_64g"]), "env.HCCL_BUFFSIZE", default=200)))
    assert inputs("hardware=h100_80g").hccl_buffsize_mb == 4.0


def test_plan_lengths_and_margin_are_read_when_given(grpo):
    assert grpo.prompt_tokens is None
    given = inputs("plan.prompt_tokens=300", "plan.response_tokens=900", "plan.margin_gb=1.5")
    assert (given.prompt_tokens, given.response_tokens, given.margin_gb) == (300.0, 900.0, 1.5)


@pytest.mark.parametrize("override, says", [
    (f"{ROLLOUT}.name=sglang", "vLLM only"),
    (f"{ACTOR}.strategy=megatron", "fsdp/fsdp2"),
    (f"{ACTOR}.fsdp_config.model_dtype=int8", "the planner knows"),
    ("hardware.bf16_tflops=null", "lacks hardware.bf16_tflops"),
])
def test_what_the_model_does_not_cover_is_refused_by_key(override, says):
    with pytest.raises(NotPlannable, match=says):
        inputs(override)


def test_with_knobs_changes_the_rollout_and_the_training_roles_offloads_not_the_ref(grpo):
    v = grpo.with_knobs(util=0.35, tp=4, param_offload=False, optimizer_offload=False)
    assert (v.rollout.tp, v.rollout.util) == (4, 0.35)
    assert not v.actor.param_offload and not v.actor.optimizer_offload
    assert v.ref == grpo.ref and grpo.rollout.util != 0.35          # the original is left as it was


def test_verl_values_fall_back_to_verls_defaults_then_to_the_callers():
    v = VerlValues(OmegaConf.create({"verl": {"data": {"train_batch_size": 64}}}))
    assert v.get("data.train_batch_size") == 64 and v.has("data.train_batch_size")
    assert v.get("data.max_prompt_length") == VERL_DEFAULTS["data.max_prompt_length"]
    assert not v.has("data.max_prompt_length")
    assert v.get("no.such.key", "fallback") == "fallback"
    assert v.first("data.max_response_length", "data.train_batch_size") == 64       # the first that is set
    assert v.first("a.b", "data.max_prompt_length") == VERL_DEFAULTS["data.max_prompt_length"]


def test_vllms_default_capture_list_is_1_2_4_then_steps_of_8_up_to_twice_max_num_seqs():
    assert default_capture_sizes(8) == (1, 2, 4, 8, 16)
    assert max(default_capture_sizes(1024)) == 512
    assert DEFAULT_CUDAGRAPH_MODE == "FULL_AND_PIECEWISE"
