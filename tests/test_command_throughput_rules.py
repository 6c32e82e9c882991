"""verlsweep.command.throughput_rules (through check_rules) on the composed throughput space: invalid
combinations of token budgets, Ulysses SP, vLLM batching and capture sizes are refused with the key named."""
from __future__ import annotations

import copy

import pytest
from omegaconf import OmegaConf

from verlsweep.command.compose import compose_config
from verlsweep.command.resolvers import capture_sizes
from verlsweep.command.rules import check_rules

ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"
CAPTURE = f"{ROLLOUT}.engine_kwargs.vllm.compilation_config.cudagraph_capture_sizes"


@pytest.fixture(scope="module")
def composed():
    return compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo", "space=throughput"])


@pytest.fixture
def cfg(composed):
    return copy.deepcopy(composed)


def _problems(cfg, **values):
    for key, value in values.items():
        OmegaConf.update(cfg, key.replace("__", "."), value, force_add=True)
    return {p.key: p for p in check_rules(cfg)}


def test_the_throughput_space_composes_to_a_valid_trial_with_captures_within_max_num_seqs(cfg):
    assert check_rules(cfg) == []
    assert max(OmegaConf.select(cfg, CAPTURE)) <= 256


def test_an_sp_that_does_not_divide_the_heads_or_devices_is_refused_naming_the_key(cfg):
    key = f"{ACTOR}.ulysses_sequence_parallel_size"
    problems = _problems(cfg, **{key: 3})
    assert "one of [1, 2, 4, 8]" in problems[key].allowed and "attention heads" in problems[key].allowed
    assert key not in _problems(copy.deepcopy(cfg), **{key: 8})


def test_the_space_asks_twice_the_sequence_but_verls_own_minimum_stays_the_default(cfg, composed):
    key = f"{ACTOR}.ppo_max_token_len_per_gpu"
    # 2 x (1024 + 2048) = 6144 under sweeps/throughput.yaml's validate.token_budget_factor=2
    assert "6144" in _problems(cfg, **{key: 4096})[key].allowed
    assert key not in _problems(compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo"]),
                                **{key: 4096})
    log_prob = f"{ROLLOUT}.log_prob_max_token_len_per_gpu"
    assert log_prob in _problems(copy.deepcopy(composed), **{log_prob: 5000})


def test_vllm_batching_and_capture_sizes_beyond_max_num_seqs_are_refused(cfg):
    problems = _problems(cfg, **{f"{ROLLOUT}.max_num_seqs": 64, f"{ROLLOUT}.max_num_batched_tokens": 32,
                                 "throughput.max_capture_size": 256})
    assert "max_num_seqs=64" in problems[f"{ROLLOUT}.max_num_batched_tokens"].allowed
    assert CAPTURE not in problems          # the space's sizes are cut at max_num_seqs
    explicit = _problems(cfg, **{CAPTURE: [8, 128], f"{ROLLOUT}.max_num_batched_tokens": 8192})
    assert "max_num_seqs=64" in explicit[CAPTURE].allowed


def test_a_micro_batch_that_does_not_split_a_ranks_mini_batch_is_refused_without_dynamic_bsz(cfg):
    key = f"{ACTOR}.ppo_micro_batch_size_per_gpu"
    # mini-batch 128 prompts x n=5 over 8 ranks: 80 sequences per rank
    assert "80 sequences" in _problems(cfg, **{f"{ACTOR}.use_dynamic_bsz": False, key: 3})[key].allowed
    assert key not in _problems(copy.deepcopy(cfg), **{f"{ACTOR}.use_dynamic_bsz": False, key: 8})


def test_capture_sizes_follow_max_num_seqs_and_vanish_in_eager_mode():
    assert capture_sizes(256, 64, False)[-1] == 64
    assert capture_sizes(32, 512, False)[-1] == 32
    assert capture_sizes(256, 256, True) is None


@pytest.mark.slow
def test_a_representative_throughput_trial_passes_verls_own_validation():
    """One combination of every swept knob (not the matrix: each verl validation takes seconds)."""
    from verlsweep.command.compose import build_command

    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo", "space=throughput",
                          f"{ACTOR}.ppo_max_token_len_per_gpu=24576", f"{ROLLOUT}.log_prob_max_token_len_per_gpu=32768",
                          f"{ROLLOUT}.max_num_batched_tokens=16384", f"{ROLLOUT}.max_num_seqs=512",
                          f"{ROLLOUT}.enforce_eager=false", "throughput.max_capture_size=128",
                          f"{ACTOR}.ulysses_sequence_parallel_size=2", f"{ROLLOUT}.free_cache_engine=false"])
    argv = build_command(cfg, require_paths=False).argv
    assert "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2" in argv
    assert any(a.endswith("cudagraph_capture_sizes=[1,2,4,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120,128]")
               for a in argv), [a for a in argv if "capture" in a]
