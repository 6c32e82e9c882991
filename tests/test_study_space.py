"""Search-space parsing and checks of the verlsweep sweeper (in-process, fast)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from verlsweep import CONF_DIR
from verlsweep.command.hydra_compose import compose_dir
from verlsweep.common.distributions import discrete_values
from verlsweep.study import space as _space
from verlsweep.study.space import SearchSpaceError

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"


def parse(*lines: str) -> _space.SearchSpace:
    return _space.parse(list(lines), OverridesParser.create())


def compose(*overrides: str):
    from verlsweep.command import config_store

    config_store.register()
    return compose_dir(CONF_DIR, "sweep", list(overrides), return_hydra_config=True)


def group_options(name: str) -> list[str]:
    group = CONF_DIR / name
    return sorted(p.stem for p in group.glob("*.yaml")) if group.is_dir() else []


def test_float_range_includes_its_stop_and_rounds_to_the_step():
    space = parse(f"{UTIL}=range(0.30,0.95,0.05)")
    dist = space.distributions[UTIL]
    assert isinstance(dist, FloatDistribution)
    assert (dist.low, dist.high, dist.step) == (0.3, 0.95, 0.05)
    assert discrete_values(dist, space.decimals[UTIL])[:3] == [0.3, 0.35, 0.4]
    assert space.value(UTIL, 0.7000000000000001) == 0.7
    assert space.overrides({UTIL: 0.8500000000000001}) == [f"{UTIL}=0.85"]


def test_grammar_maps_to_optuna_distributions():
    space = parse("a=choice(true,false)", "b=range(1,7,2)", "c=int(interval(1,10))",
                  "d=tag(log,interval(1e-5,1e-2))", "e=interval(0.1,0.9)", "f=1,2,4", "g=shuffle(range(1,3))",
                  "h=7")
    d = space.distributions
    assert d["a"] == CategoricalDistribution([True, False])
    assert d["b"] == IntDistribution(1, 7, step=2)
    assert d["c"] == IntDistribution(1, 10)
    assert d["d"] == FloatDistribution(1e-5, 1e-2, log=True)
    assert d["e"] == FloatDistribution(0.1, 0.9)
    assert d["f"] == CategoricalDistribution([1, 2, 4])
    assert isinstance(d["g"], CategoricalDistribution) and sorted(d["g"].choices) == [1, 2, 3]
    assert space.fixed == {"h": "7"}


def test_a_later_override_of_the_same_key_wins():
    space = parse(f"{UTIL}=range(0.3,0.95,0.05)", f"{UTIL}=choice(0.5,0.6)", "x=choice(1,2)", "x=3")
    assert space.distributions[UTIL] == CategoricalDistribution([0.5, 0.6])
    assert "x" not in space.distributions and space.fixed["x"] == "3"


def test_grid_lists_every_value_and_its_size():
    space = parse(f"{UTIL}=range(0.5,0.6,0.1)", "b=choice(x,y)", "n=range(1,3)")
    assert space.grid() == {UTIL: [0.5, 0.6], "b": ["x", "y"], "n": [1, 2, 3]}
    assert space.size() == 12


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (f"{UTIL}=choice()", "empty choice"),
        (f"{UTIL}=interval(0.9,0.3)", "low <= high"),
        (f"{UTIL}=range(0.9,0.3,0.1)", "non-empty range"),
        (f"{UTIL}=choice(0.5,0.5)", "distinct choices"),
        (f"{UTIL}=tag(log,interval(0,1))", "low > 0"),
    ],
)
def test_a_bad_param_is_rejected_naming_it(line, says):
    with pytest.raises(SearchSpaceError) as err:
        parse(line)
    assert f"hydra.sweeper.params.{UTIL}" in str(err.value)
    assert says in str(err.value)


def test_grid_refuses_a_continuous_param_naming_it():
    with pytest.raises(SearchSpaceError, match=f"params.{UTIL}.*discrete values"):
        parse(f"{UTIL}=interval(0.3,0.9)").grid()


# --- checks against the composed config ----------------------------------------------------------


@pytest.fixture(scope="module")
def a2_cfg():
    return compose("hardware=a2_64g", "model=qwen3_8b")


@pytest.mark.parametrize(("hardware", "model", "expanded"), [
    ("a2_64g", "qwen3_8b", "choice(1,2,4,8)"),          # 8 devices
    ("a3_64g", "qwen3_0_6b", "choice(1,2,4,8,16)"),     # 16 devices, 16 attention heads
    ("a3_64g", "qwen3_14b", "choice(1,2,4,8)"),         # 16 does not divide its 40 attention heads
])
def test_the_default_space_sweeps_the_tp_sizes_the_hardware_and_model_allow(hardware, model, expanded):
    assert compose(f"hardware={hardware}", f"model={model}").hydra.sweeper.params[TP] == expanded


def test_default_rollout_memory_space_passes_the_checks(a2_cfg):
    params = OmegaConf.to_container(a2_cfg.hydra.sweeper.params, resolve=True)
    space = parse(*[f"{k}={v}" for k, v in params.items()])
    assert _space.check(space, a2_cfg, group_options) == []
    assert space.size() == 14 * 4 * 2 * 2 * 2


@pytest.mark.parametrize(
    ("line", "says"),
    [
        (f"{TP}=choice(1,3)", "one of [1, 2, 4, 8]"),                          # 3 does not divide 8 devices
        (f"{TP}=choice(2,16)", "one of [1, 2, 4, 8]"),                         # more than the devices
        (f"{UTIL}=interval(0.5,1.5)", "(0, 1]"),
        ("verl.actor_rollout_ref.rollout.gpu_memroy_utilization=choice(0.5,0.6)", "verl 0.9.1's ppo_trainer"),
        ("no_such_node.knob=choice(1,2)", "existing config key"),
        ("algorithm=choice(grpo,not_an_algo)", "an option of group 'algorithm'"),
        ("verl.actor_rollout_ref.actor.fsdp_config.param_offload=choice(true,maybe)", "true or false"),
    ],
)
def test_a_space_the_trial_rules_reject_fails_naming_the_param(a2_cfg, line, says):
    space = parse(line)
    problems = _space.check(space, a2_cfg, group_options)
    assert problems, line
    text = "\n".join(map(str, problems))
    assert f"hydra.sweeper.params.{line.split('=')[0]}" in text
    assert says in text


def test_group_params_and_added_keys_are_accepted(a2_cfg):
    space = parse("algorithm=choice(grpo,remax)", "+verl.actor_rollout_ref.rollout.engine_kwargs.vllm.x=choice(1,2)")
    assert _space.check(space, a2_cfg, group_options) == []


def test_sweep_equals_name_selects_the_search_space_written_in_sweeps_name_yaml():
    files = sorted((Path(CONF_DIR).parent / "sweeps").glob("*.yaml"))
    assert {p.stem for p in files} >= {"rollout_memory", "smoke", "algorithms"}
    for path in files:
        declared = yaml.safe_load(path.read_text())["hydra"]["sweeper"]["params"]
        composed = OmegaConf.to_container(compose(f"space={path.stem}").hydra.sweeper.params, resolve=False)
        assert composed == declared, path.name
