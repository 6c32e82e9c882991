"""verlsweep.command.verl_check: verl 0.9.1's own checks moved before launch. The type check mirrors
OmegaConf's structured merge of a `_target_` node into its dataclass; composition errors name the
verl key with a 'did you mean'; the registries list what they accept. tests/test_bad_input.py runs the
same checks through build_command."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pytest

from verlsweep.command.verl_check import _matches, _type_check, check_with_verl

TARGET = f"{__name__}.Outer"


@dataclass
class Inner:
    size: int = 1


@dataclass
class Outer:
    util: float = 0.5
    name: str = "x"
    eager: bool = False
    limit: int | None = None


@pytest.mark.parametrize("value, expected, ok", [
    (True, bool, True), (1, bool, False),                  # a bool is not an int and an int not a bool
    (3, int, True), (True, int, False), (3.0, int, False),
    (3, float, True), ("abc", float, False),
    ("s", str, True), (5, str, True), ([1], str, False),
    # verl's dataclasses spell it Optional[...]: typing.Union, not the `int | None` UnionType
    (None, Optional[int], True), (4, Optional[int], True), ("4", Optional[int], False),  # noqa: UP045
    ({"a": 1}, dict, True),                                 # containers are left to verl
])
def test_scalars_are_checked_as_omegaconfs_structured_merge_would(value, expected, ok):
    assert _matches(value, expected) is ok


def test_a_wrongly_typed_field_is_named_by_its_verl_key_and_dataclass_field():
    node = {"_target_": TARGET, "util": "abc", "name": "ok", "eager": "yes", "limit": None,
            "inner": {"_target_": f"{__name__}.Inner", "size": 2.5}}
    problems = {p.key: p for p in _type_check(node, "actor_rollout_ref.rollout")}
    assert set(problems) == {"verl.actor_rollout_ref.rollout.util", "verl.actor_rollout_ref.rollout.eager",
                             "verl.actor_rollout_ref.rollout.inner.size"}
    util = problems["verl.actor_rollout_ref.rollout.util"]
    assert (util.value, util.allowed, util.rule) == ("abc", "a value of type float (Outer.util)", "verl types")
    assert problems["verl.actor_rollout_ref.rollout.inner.size"].allowed == "a value of type int (Inner.size)"


def test_a_node_without_a_dataclass_target_is_not_checked():
    assert _type_check({"util": "abc"}, "x") == []
    assert _type_check({"_target_": f"{__name__}.NoSuchClass", "util": "abc"}, "x") == []


ROLLOUT = "actor_rollout_ref.rollout"


@pytest.fixture
def verl():
    return pytest.importorskip("verl")


def test_a_misspelt_verl_key_is_named_with_the_key_it_resembles(verl):
    (problem,) = check_with_verl([f"{ROLLOUT}.gpu_memory_utilizaton=0.5"], model_path_exists=False)
    assert problem.key == f"verl.{ROLLOUT}.gpu_memory_utilizaton" and problem.value == "0.5"
    assert f"did you mean verl.{ROLLOUT}.gpu_memory_utilization" in problem.allowed
    assert problem.rule == "verl compose"


def test_an_unknown_estimator_lists_the_registered_ones(verl):
    (problem,) = check_with_verl(["algorithm.adv_estimator=nope"], model_path_exists=False)
    assert problem.key == "verl.algorithm.adv_estimator" and problem.rule == "verl registry"
    assert "grpo" in problem.allowed and "remax" in problem.allowed


MICRO = ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu=2",
         "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "algorithm.adv_estimator=grpo"]


def test_a_config_verl_accepts_has_no_problem(verl):
    assert check_with_verl(MICRO, model_path_exists=False) == []


def test_an_assertion_of_verls_config_classes_is_a_problem_not_a_crash(verl):
    """verl's dataclasses assert in __post_init__ and hydra's instantiate wraps the assertion."""
    (problem,) = check_with_verl(MICRO[1:], model_path_exists=False)      # no actor micro batch size
    assert problem.rule == "verl validate_config"
    assert "ppo_micro_batch_size_per_gpu" in problem.allowed


@pytest.mark.parametrize("overrides", [
    [],
    [f"{ROLLOUT}.gpu_memory_utilization=0.5", "+actor_rollout_ref.rollout.engine_kwargs.vllm.x=1", "~trainer.logger"],
    [f"{ROLLOUT}.gpu_memory_utilizaton=0.5"],             # unknown key
    [f"+{ROLLOUT}.gpu_memory_utilization=0.5"],            # + on a key verl has
    ["trainer.logger={a:1}"],                              # a dict onto a list
    [f"{ROLLOUT}.n=1,2"],                                  # a sweep: the full compose refuses it
], ids=["none", "set-add-delete", "unknown", "plus-on-known", "dict-on-list", "sweep"])
def test_verl_compose_from_the_cached_defaults_equals_hydras_full_compose(verl, overrides):
    from omegaconf import OmegaConf

    from verlsweep.command import verl_schema
    from verlsweep.command.hydra_compose import compose_dir

    def outcome(compose):
        try:
            cfg = compose(list(overrides))
        except Exception as exc:  # noqa: BLE001 -- the same error, type and text, is the point
            return type(exc).__name__, str(exc)
        return OmegaConf.to_yaml(cfg), OmegaConf.is_struct(cfg), OmegaConf.is_readonly(cfg)

    full = outcome(lambda ov: compose_dir(verl_schema.config_dir(), "ppo_trainer", ov))
    assert outcome(verl_schema.compose_verl) == full
    assert outcome(verl_schema.compose_verl) == full       # the cached defaults are copied, never changed


@pytest.fixture
def verdicts(tmp_path, monkeypatch):
    """An empty cache directory for verl's verdicts."""
    monkeypatch.setenv("VERLSWEEP_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "verl"


HIT_IN_A_NEW_PROCESS = """
import json, sys
from verlsweep.command.verl_check import check_with_verl
problems = check_with_verl(json.loads(sys.argv[1]), model_path_exists=False)
print(json.dumps({"problems": [[p.key, p.value, p.allowed, p.rule] for p in problems],
                  "verl_imported": "verl" in sys.modules}))
"""


def test_a_checked_config_is_answered_from_the_cache_by_a_later_process_without_importing_verl(verl, verdicts):
    import json
    import os
    import subprocess
    import sys

    first = check_with_verl([*MICRO[1:], "trainer.experiment_name=remax-20261205-0101"], model_path_exists=False)
    assert [p.rule for p in first] == ["verl validate_config"] and len(list(verdicts.glob("verdict-*.json"))) == 1
    # another run's name (a time stamp, a trial number) is the same config to verl
    again = json.dumps([*MICRO[1:], "trainer.experiment_name=remax-20261205-0202"])
    proc = subprocess.run([sys.executable, "-c", HIT_IN_A_NEW_PROCESS, again], capture_output=True, text=True,
                          env=os.environ, timeout=120, check=True)
    out = json.loads(proc.stdout)
    assert out == {"problems": [[p.key, p.value, p.allowed, p.rule] for p in first], "verl_imported": False}


def test_a_verdict_is_kept_per_config_and_one_that_read_the_model_is_not_kept(verl, verdicts, monkeypatch):
    from verlsweep.command import verl_check

    assert check_with_verl(MICRO, model_path_exists=False) == []
    assert check_with_verl(MICRO, model_path_exists=True) == []                    # another entry
    (problem,) = check_with_verl([*MICRO, "algorithm.adv_estimator=nope"], model_path_exists=False)
    assert problem.rule == "verl registry" and len(list(verdicts.glob("verdict-*.json"))) == 3
    checks = []
    monkeypatch.setattr(verl_check, "_check", lambda ov, ok: checks.append(ov) or ([], True))
    assert check_with_verl(MICRO, model_path_exists=False) == [] and checks == []  # read back
    critic = [*MICRO[:3], "algorithm.adv_estimator=gae"]
    for _ in range(2):              # read the critic's model config: checked each time, never kept
        check_with_verl(critic, model_path_exists=True)
    assert checks == [critic, critic] and len(list(verdicts.glob("verdict-*.json"))) == 3
