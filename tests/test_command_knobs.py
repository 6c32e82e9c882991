"""verlsweep.command.knobs: the knobs a trial sets (its verl./env. overrides, values read from the composed
config) and verlsweep.command.suggest's 'did you mean' for a misspelt key or option."""
from __future__ import annotations

from omegaconf import OmegaConf

from verlsweep.command.knobs import job_overrides, knobs, override_keys
from verlsweep.command.suggest import close_matches, did_you_mean


def test_override_keys_drop_the_prefix_signs_deletions_and_repeats():
    assert override_keys(["+a.b=1", "++c=2", "~d", "a.b=3", "hardware=a2_64g"]) == ["a.b", "c", "hardware"]


def test_knobs_are_the_overridden_verl_and_env_keys_with_their_composed_values():
    cfg = OmegaConf.create({"verl": {"x": {"util": 0.6, "lst": [1, 2]}, "tp": "${verl.x.util}"},
                            "env": {"HCCL_BUFFSIZE": 400}, "hardware": {"name": "a2"}})
    got = knobs(cfg, ["verl.x.util=0.6", "verl.tp=0.6", "env.HCCL_BUFFSIZE=400", "hardware.name=a2",
                      "verl.x.lst=[1,2]"])
    assert got == {"x.util": 0.6, "tp": 0.6, "env.HCCL_BUFFSIZE": 400, "x.lst": [1, 2]}


def test_outside_a_hydra_job_there_are_no_job_overrides():
    assert job_overrides() == []


def test_a_case_difference_is_the_one_match():
    assert close_matches("A2_64G", ["a2_64g", "a2_32g"]) == ["a2_64g"]


def test_close_spellings_are_suggested_best_first_and_far_ones_not():
    assert close_matches("gpu_memory_utilizaton", ["gpu_memory_utilization", "max_num_seqs"]) == \
        ["gpu_memory_utilization"]
    assert did_you_mean("qwen3-8b", ["qwen3_8b", "qwen3_14b"], prefix="model=") == \
        "; did you mean model=qwen3_8b, model=qwen3_14b?"
    assert did_you_mean("zzz", ["qwen3_8b"]) == ""
