"""Bad input is rejected before anything launches, with the key and the allowed values."""
from __future__ import annotations

import pytest
from hydra.errors import HydraException

from verlsweep.command.compose import build_command, compose_config
from verlsweep.common.errors import ConfigError

ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"

# (overrides, key the error must name, text the allowed-values part must contain)
CASES = {
    "util_zero": ([f"{ROLLOUT}.gpu_memory_utilization=0"], f"{ROLLOUT}.gpu_memory_utilization", "(0, 1]"),
    "util_above_one": ([f"{ROLLOUT}.gpu_memory_utilization=1.5"], f"{ROLLOUT}.gpu_memory_utilization", "(0, 1]"),
    "util_not_a_number": ([f"{ROLLOUT}.gpu_memory_utilization=abc"], f"{ROLLOUT}.gpu_memory_utilization", "(0, 1]"),
    "tp_not_dividing_devices": ([f"{ROLLOUT}.tensor_model_parallel_size=3"], f"{ROLLOUT}.tensor_model_parallel_size",
                                "[1, 2, 4, 8]"),
    "tp_more_than_devices": ([f"{ROLLOUT}.tensor_model_parallel_size=16"], f"{ROLLOUT}.tensor_model_parallel_size",
                             "[1, 2, 4, 8]"),
    "tp_not_dividing_heads": (["model=qwen3_14b", "hardware=a3_64g", f"{ROLLOUT}.tensor_model_parallel_size=16"],
                              f"{ROLLOUT}.tensor_model_parallel_size", "40 attention heads"),
    "unknown_estimator": (["verl.algorithm.adv_estimator=foo"], "verl.algorithm.adv_estimator", "remax"),
    "unknown_loss_mode": ([f"{ACTOR}.policy_loss.loss_mode=bogus"], f"{ACTOR}.policy_loss.loss_mode", "gspo"),
    "misspelled_verl_key": ([f"{ROLLOUT}.gpu_memory_utilizaton=0.5"], f"{ROLLOUT}.gpu_memory_utilizaton",
                            f"did you mean {ROLLOUT}.gpu_memory_utilization"),
    "batch_not_divisible_by_mini": (["verl.data.train_batch_size=100", f"{ACTOR}.ppo_mini_batch_size=64"],
                                    f"{ACTOR}.ppo_mini_batch_size", "divisor of verl.data.train_batch_size=100"),
    "batch_times_n_not_divisible_by_devices": (["verl.data.train_batch_size=3", f"{ACTOR}.ppo_mini_batch_size=1",
                                                f"{ROLLOUT}.n=1"], "verl.data.train_batch_size", "8 devices"),
    "negative_steps": (["trial.steps=-1"], "verl.trainer.total_training_steps", "positive integer"),
    "zero_samples_per_prompt": ([f"{ROLLOUT}.n=0"], f"{ROLLOUT}.n", "positive integer"),
    "offload_flag_not_boolean": ([f"{ACTOR}.fsdp_config.param_offload=maybe"],
                                 f"{ACTOR}.fsdp_config.param_offload", "true or false"),
    "wrongly_typed_verl_value": ([f"{ROLLOUT}.temperature=abc"], f"{ROLLOUT}.temperature", "float"),
    "token_budget_below_sequence": ([f"{ACTOR}.ppo_max_token_len_per_gpu=1024"],
                                    f"{ACTOR}.ppo_max_token_len_per_gpu", ">= "),
    "unknown_device": (["hardware.device=tpu"], "hardware.device", "npu, cuda"),
    "hardware_auto_without_a_profile": (["hardware=auto"], "hardware.name", "python -m verlsweep.plan detect"),
    "unknown_plan_trainer": (["plan.trainer=measured"], "plan.trainer", "traced, analytic"),
    "unset_environment_variable": (["paths.model_root=${oc.env:VERLSWEEP_TEST_UNSET_VAR}"], "model.path",
                                   "VERLSWEEP_TEST_UNSET_VAR"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_value_is_rejected_naming_key_and_allowed_values(name):
    overrides, key, allowed = CASES[name]
    with pytest.raises(ConfigError) as err:
        build_command(compose_config(overrides), require_paths=False)
    matching = [p for p in err.value.problems if p.key == key]
    assert matching, f"{key} not named in: {err.value}"
    assert allowed in matching[0].allowed, str(err.value)


def test_unknown_group_option_lists_the_available_ones():
    with pytest.raises(HydraException) as err:
        compose_config(["hardware=a9_99g"])
    assert "hardware/a9_99g" in str(err.value)
    assert "a2_64g" in str(err.value) and "h100_80g" in str(err.value)
