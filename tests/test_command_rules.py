"""verlsweep.command.rules: our own checks on a composed config, what verl accepts but the hardware cannot
run. Every problem names the key, the value and what is allowed. tests/test_bad_input.py drives the same
rules through build_command and the CLI; here they are called directly, on one composed config."""
from __future__ import annotations

import copy

import pytest
from omegaconf import OmegaConf

from verlsweep.command.compose import compose_config
from verlsweep.command.rules import OFFLOAD_FLAGS, check_rules
from verlsweep.config import check_resolves

ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"


@pytest.fixture(scope="module")
def composed():
    return compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo"])


@pytest.fixture
def cfg(composed):
    return copy.deepcopy(composed)


def _set(cfg, **values):
    for key, value in values.items():
        OmegaConf.update(cfg, key, value, force_add=True)
    return cfg


def _by_key(problems):
    return {p.key: p for p in problems}


def test_the_shipped_config_breaks_no_rule(cfg):
    assert check_rules(cfg) == []
    assert check_resolves(cfg) == []


@pytest.mark.parametrize("util", [0, 1.01, -0.5, "0.5", True])
def test_util_must_be_a_number_in_the_open_closed_unit_interval(cfg, util):
    OmegaConf.update(cfg, f"{ROLLOUT}.gpu_memory_utilization", util)
    problem = _by_key(check_rules(cfg))[f"{ROLLOUT}.gpu_memory_utilization"]
    assert problem.value == util and problem.allowed == "a number in (0, 1]"


def test_util_of_exactly_one_is_allowed(cfg):
    OmegaConf.update(cfg, f"{ROLLOUT}.gpu_memory_utilization", 1.0)
    assert f"{ROLLOUT}.gpu_memory_utilization" not in _by_key(check_rules(cfg))


def test_a_tp_the_hardware_cannot_split_names_the_allowed_sizes_the_devices_and_the_heads(cfg):
    OmegaConf.update(cfg, f"{ROLLOUT}.tensor_model_parallel_size", 3)
    problem = _by_key(check_rules(cfg))[f"{ROLLOUT}.tensor_model_parallel_size"]
    assert problem.value == 3
    assert problem.allowed.startswith("one of [1, 2, 4, 8]")
    assert "8 devices of a2_64g" in problem.allowed and "32 attention heads of qwen3_8b" in problem.allowed


def test_a_boolean_is_not_a_count(cfg):
    """YAML's `true` is an int to Python; a count of True samples is a mistake, not 1."""
    OmegaConf.update(cfg, f"{ROLLOUT}.n", True)
    assert _by_key(check_rules(cfg))[f"{ROLLOUT}.n"].allowed == "a positive integer"


@pytest.mark.parametrize("key", ["verl.data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size", "trial.steps",
                                 "verl.data.max_response_length"])
def test_sizes_must_be_positive_integers(cfg, key):
    OmegaConf.update(cfg, key, 0)
    assert _by_key(check_rules(cfg))[key].allowed == "a positive integer"


@pytest.mark.parametrize("flag", OFFLOAD_FLAGS)
def test_every_offload_flag_must_be_a_boolean_when_set(cfg, flag):
    OmegaConf.update(cfg, flag, "yes", force_add=True)
    assert _by_key(check_rules(cfg))[flag].allowed == "true or false"


def test_an_unknown_device_lists_the_known_ones(cfg):
    OmegaConf.update(cfg, "hardware.device", "tpu")
    assert _by_key(check_rules(cfg))["hardware.device"].allowed == "one of npu, cuda"


def test_the_batch_arithmetic_is_not_checked_while_a_value_it_needs_is_bad(cfg):
    """A bad util alone is reported: the divisibility rules would only repeat it in other words."""
    OmegaConf.update(cfg, f"{ROLLOUT}.gpu_memory_utilization", 2)
    OmegaConf.update(cfg, "verl.data.train_batch_size", 100)
    OmegaConf.update(cfg, f"{ACTOR}.ppo_mini_batch_size", 64)
    assert list(_by_key(check_rules(cfg))) == [f"{ROLLOUT}.gpu_memory_utilization"]


def test_the_mini_batch_must_divide_the_batch(cfg):
    _set(cfg, **{"verl.data.train_batch_size": 96, f"{ACTOR}.ppo_mini_batch_size": 64})
    problem = _by_key(check_rules(cfg))[f"{ACTOR}.ppo_mini_batch_size"]
    assert problem.allowed == "a divisor of verl.data.train_batch_size=96"


@pytest.mark.parametrize("sp, ranks", [(1, 8), (2, 4)])
def test_the_mini_batch_times_n_is_split_over_the_data_parallel_ranks_that_sp_leaves(cfg, sp, ranks):
    """verl splits ppo_mini_batch_size x n over world / SP ranks (dp_actor.py)."""
    _set(cfg, **{"verl.data.train_batch_size": 16, f"{ACTOR}.ppo_mini_batch_size": 2, f"{ROLLOUT}.n": 1,
                 f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size": sp})
    problem = _by_key(check_rules(cfg))[f"{ACTOR}.ppo_mini_batch_size"]
    assert problem.allowed == f"mini-batch x rollout.n (2x1) divisible by the {ranks} data-parallel ranks"
    OmegaConf.update(cfg, f"{ROLLOUT}.n", ranks // 2)       # 2 x n now fills every rank
    assert f"{ACTOR}.ppo_mini_batch_size" not in _by_key(check_rules(cfg))


def test_the_batch_times_n_must_divide_over_the_devices(cfg):
    _set(cfg, **{"verl.data.train_batch_size": 10, f"{ACTOR}.ppo_mini_batch_size": 10, f"{ROLLOUT}.n": 2})
    problem = _by_key(check_rules(cfg))["verl.data.train_batch_size"]
    assert problem.allowed == "train_batch_size x rollout.n (10x2) divisible by the 8 devices"


@pytest.mark.parametrize("sp, ok", [(1, False), (2, True)])
def test_with_dynamic_bsz_the_token_budget_times_sp_must_hold_one_full_sequence(cfg, sp, ok):
    _set(cfg, **{f"{ACTOR}.use_dynamic_bsz": True, f"{ACTOR}.ppo_max_token_len_per_gpu": 1024,
                 "verl.data.max_prompt_length": 1024, "verl.data.max_response_length": 1024,
                 f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size": sp,
                 # keep the data-parallel arithmetic sane for SP 2
                 "verl.data.train_batch_size": 64, f"{ACTOR}.ppo_mini_batch_size": 16})
    problems = _by_key(check_rules(cfg))
    assert (f"{ACTOR}.ppo_max_token_len_per_gpu" not in problems) is ok
    if not ok:
        assert problems[f"{ACTOR}.ppo_max_token_len_per_gpu"].allowed.endswith("/ SP = 2048")


def test_a_broken_interpolation_is_named_by_its_own_key_without_omegaconfs_preamble(cfg, monkeypatch):
    monkeypatch.delenv("VERLSWEEP_RULES_TEST_UNSET", raising=False)
    OmegaConf.update(cfg, "hardware.name", "${oc.env:VERLSWEEP_RULES_TEST_UNSET}")
    (problem,) = check_resolves(cfg)
    assert problem.key == "hardware.name" and problem.rule == "interpolation"
    assert "VERLSWEEP_RULES_TEST_UNSET" in problem.allowed
    assert "raised while resolving interpolation" not in problem.allowed


def test_a_broken_group_is_named_before_the_keys_that_refer_to_it(cfg):
    """The model's path interpolates paths.model_root: a broken root is reported once, where the
    group order meets it first (hardware, model, ...), not as every key that refers to it."""
    OmegaConf.update(cfg, "paths.model_root", "${oc.env:VERLSWEEP_RULES_TEST_UNSET_ROOT}")
    problems = check_resolves(cfg)
    assert len(problems) == 1
    assert problems[0].key.startswith(("model.", "paths."))
