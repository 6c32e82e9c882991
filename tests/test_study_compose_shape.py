"""verlsweep.study.verl_hooks.compose_shape: which trials compose before their launch (one per shape)."""
from __future__ import annotations

from verlsweep.study.verl_hooks import compose_shape

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
CHOICES = {"algorithm": "grpo", "hardware": "a2_64g", "runner": "estimate"}


def _job(util: float, number: int, *extra: str) -> list[str]:
    return ["runner=estimate", f"{UTIL}={util}", f"trial.number={number}", f"trial.label='util={util}'",
            f"hydra.sweep.subdir=t{number:03d}", *extra]


def test_another_value_of_a_plain_key_composes_as_the_first_did():
    assert compose_shape(_job(0.5, 0), CHOICES) == compose_shape(_job(0.9, 7), CHOICES)


def test_another_config_group_option_an_added_key_or_a_hydra_setting_composes_again():
    first = compose_shape(_job(0.5, 0, "algorithm=grpo"), CHOICES)
    assert compose_shape(_job(0.5, 1, "algorithm=ppo"), CHOICES) != first
    assert (compose_shape(_job(0.5, 1, "+trial.extra=1"), CHOICES)
            != compose_shape(_job(0.5, 1, "+trial.extra=x"), CHOICES))
    assert compose_shape(_job(0.5, 1, "hydra.job.chdir=true"), CHOICES) != \
        compose_shape(_job(0.5, 1, "hydra.job.chdir=false"), CHOICES)


def test_another_set_of_keys_composes_again():
    assert compose_shape(_job(0.5, 0), CHOICES) != compose_shape(_job(0.5, 0, "verl.data.max_response_length=64"),
                                                                CHOICES)
