"""Composition of config groups into the exact verl command."""
from __future__ import annotations

import itertools
from collections import Counter

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from verlsweep import CONF_DIR
from verlsweep.command.compose import build_command, compose_config
from verlsweep.command.overrides import format_value
from verlsweep.common.errors import ConfigError

ALGORITHMS = sorted(p.stem for p in (CONF_DIR / "algorithm").glob("*.yaml"))
HARDWARE = sorted(p.stem for p in (CONF_DIR / "hardware").glob("*.yaml") if p.stem != "auto")
MODELS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))


def overrides_of(trial) -> dict[str, str]:
    """key (without +) -> value text, as verl will receive them."""
    out = {}
    for item in trial.overrides:
        key, value = item.split("=", 1)
        out[key] = value
    return out


@pytest.fixture(scope="module")
def remax_trial():
    cfg = compose_config(["hardware=a2_64g", "algorithm=remax", "model=qwen3_8b"])
    return build_command(cfg, require_paths=False)


def test_remax_on_a2_composes_to_the_seed_recipe(remax_trial):
    """run_qwen3_8b_remax_fsdp_npu.sh (verl-ascend-recipe verl_ascend_practice/; docs/ascend.md, Seed recipe)."""
    o = overrides_of(remax_trial)
    expected = {
        "actor_rollout_ref.rollout.tensor_model_parallel_size": "2",
        "actor_rollout_ref.rollout.gpu_memory_utilization": "0.6",
        "actor_rollout_ref.rollout.n": "4",
        "actor_rollout_ref.actor.fsdp_config.param_offload": "True",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "True",
        "actor_rollout_ref.ref.fsdp_config.param_offload": "True",
        "actor_rollout_ref.actor.use_torch_compile": "False",
        "actor_rollout_ref.ref.use_torch_compile": "False",
        "actor_rollout_ref.rollout.free_cache_engine": "True",
        "actor_rollout_ref.rollout.enforce_eager": "False",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.cudagraph_mode": "FULL_DECODE_ONLY",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.cudagraph_capture_sizes":
            "[4,8,12,16,20,24,28,32]",
        "algorithm.adv_estimator": "remax",
        "algorithm.use_kl_in_reward": "True",
        "algorithm.kl_penalty": "kl",
        "algorithm.kl_ctrl.kl_coef": "0.001",
        "actor_rollout_ref.actor.use_kl_loss": "False",
        "actor_rollout_ref.actor.use_dynamic_bsz": "True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "16384",
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": "True",
        "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu": "16384",
        "actor_rollout_ref.ref.log_prob_use_dynamic_bsz": "True",
        "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu": "16384",
        "actor_rollout_ref.rollout.name": "vllm",
        "trainer.device": "npu",
        "trainer.n_gpus_per_node": "8",
        "trainer.nnodes": "1",
        "trainer.use_v1": "False",
        "data.train_batch_size": "256",
        "actor_rollout_ref.actor.ppo_mini_batch_size": "128",
        "data.max_prompt_length": "1024",
        "data.max_response_length": "2048",
    }
    mismatched = {k: (o.get(k), v) for k, v in expected.items() if o.get(k) != v}
    assert not mismatched, mismatched
    assert remax_trial.env == {
        "RAY_DEDUP_LOGS": "0",
        "HYDRA_FULL_ERROR": "1",
        "TASK_QUEUE_ENABLE": "1",
        "HCCL_EXEC_TIMEOUT": "3600",
        "HCCL_CONNECT_TIMEOUT": "3600",
        "HCCL_ASYNC_ERROR_HANDLING": "0",
        "CPU_AFFINITY_CONF": "1",
    }
    assert remax_trial.argv[:3] == ["python", "-m", "verl.trainer.main_ppo"]


def test_trial_settings_make_a_short_measurement_run(remax_trial):
    o = overrides_of(remax_trial)
    assert o["trainer.total_training_steps"] == "5"
    assert o["trainer.val_before_train"] == "False"
    assert o["trainer.save_freq"] == "-1" and o["trainer.test_freq"] == "-1"
    assert o["trainer.resume_mode"] == "disable"
    assert o["trainer.logger"] == "[console,mlflow,file]"
    assert o["trainer.experiment_name"].startswith("remax-qwen3_8b-a2_64g-")


def test_overrides_come_in_verl_script_order(remax_trial):
    sections = ["data.", "actor_rollout_ref.model.", "actor_rollout_ref.actor.", "actor_rollout_ref.rollout.",
                "actor_rollout_ref.ref.", "algorithm.", "trainer."]
    ranks = [next(i for i, s in enumerate(sections) if o.lstrip("+").startswith(s)) for o in remax_trial.overrides]
    assert ranks == sorted(ranks)


def test_only_keys_verl_adds_dynamically_get_plus(remax_trial):
    plus = [o.split("=", 1)[0] for o in remax_trial.overrides if o.startswith("+")]
    assert plus == [
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.cudagraph_mode",
        "+actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.cudagraph_capture_sizes",
    ]
    assert not any(o.startswith("++") for o in remax_trial.overrides)


def test_dataclass_only_field_gets_plus_and_schema_key_does_not():
    cfg = compose_config(["algorithm=grpo", "verl.actor_rollout_ref.rollout.enable_sleep_mode=false",
                          "verl.actor_rollout_ref.rollout.max_num_seqs=64"])
    o = overrides_of(build_command(cfg, require_paths=False))
    assert o["+actor_rollout_ref.rollout.enable_sleep_mode"] == "False"
    assert o["actor_rollout_ref.rollout.max_num_seqs"] == "64"


def test_command_line_sets_any_verl_key_without_plus():
    cfg = compose_config(["verl.trainer.rollout_data_dir=/tmp/rollouts", "verl.trainer.total_training_steps=3"])
    o = overrides_of(build_command(cfg, require_paths=False))
    assert o["trainer.rollout_data_dir"] == "/tmp/rollouts"
    assert o["trainer.total_training_steps"] == "3"


@pytest.mark.parametrize("value", [0.6, 1e-06, -1, True, False, None, "vllm", "FULL_DECODE_ONLY", "1",
                                   "true", "a b,c", "it's", "/root/x.parquet", "${HOME}", [4, 8], ["console", "mlflow"],
                                   "", "[a]"])
def test_values_round_trip_through_hydras_override_parser(value):
    parsed = OverridesParser.create().parse_override(f"k={format_value(value)}").value()
    assert parsed == value


def test_remax_runs_the_legacy_trainer_and_grpo_the_v1_trainer():
    grpo = overrides_of(build_command(compose_config(["algorithm=grpo"]), require_paths=False))
    assert "trainer.use_v1" not in grpo  # verl 0.9.1's default: v1
    remax = overrides_of(build_command(compose_config(["algorithm=remax"]), require_paths=False))
    assert remax["trainer.use_v1"] == "False"


def test_gpu_hardware_switches_device_env_and_offload():
    o = overrides_of(build_command(compose_config(["hardware=h100_80g"]), require_paths=False))
    assert o["trainer.device"] == "cuda"
    assert o["actor_rollout_ref.actor.fsdp_config.param_offload"] == "False"
    assert not any("engine_kwargs" in k for k in o)


def test_no_recipe_hard_codes_a_home_path():
    text = "\n".join(p.read_text() for p in CONF_DIR.rglob("*.yaml"))
    assert "/root" not in text and "/home/" not in text


def test_paths_follow_environment_roots(monkeypatch, tmp_path):
    monkeypatch.setenv("VERLSWEEP_MODEL_ROOT", str(tmp_path / "models"))
    monkeypatch.setenv("VERLSWEEP_DATA_ROOT", str(tmp_path / "data"))
    cfg = compose_config(["model=qwen3_4b", "data=math"])
    assert cfg.verl.actor_rollout_ref.model.path == str(tmp_path / "models" / "Qwen3-4B")
    assert cfg.verl.data.train_files == str(tmp_path / "data" / "math" / "train.parquet")


def test_missing_model_is_an_error_in_a_real_run(monkeypatch, tmp_path):
    monkeypatch.setenv("VERLSWEEP_MODEL_ROOT", str(tmp_path))
    with pytest.raises(ConfigError) as err:
        build_command(compose_config([]))
    [missing] = [p for p in err.value.problems if p.key == "model.path"]
    assert str(missing) == f"not found: model.path={tmp_path}/Qwen3-8B (set VERLSWEEP_MODEL_ROOT or paths.model_root)"


def one_line(text: object, limit: int = 400) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def combination_failure(algorithm: str, hardware: str, model: str) -> str | None:
    """Why this shipped combination fails, or None. Only our own rules, naming a verl or hardware key and
    what it allows, may refuse one; verl itself must accept every command we build, each key once."""
    try:
        trial = build_command(compose_config([f"algorithm={algorithm}", f"hardware={hardware}", f"model={model}"]),
                            require_paths=False)
    except ConfigError as exc:
        foreign = [p for p in exc.problems
                   if p.rule or not p.key.startswith(("verl.", "hardware.")) or not p.allowed]
        return f"refused by {'; '.join(map(str, foreign))}" if foreign else None
    except Exception as exc:                    # noqa: BLE001 -- listed with the others, not the first only
        return f"{type(exc).__name__}: {exc}"
    keys = Counter(o.split("=", 1)[0].lstrip("+") for o in trial.overrides)
    twice = sorted(k for k, n in keys.items() if n > 1)
    return f"keys given twice: {', '.join(twice)}" if twice else None


def every_pair(*groups: list[str]) -> list[tuple[str, ...]]:
    """Combinations (one option per group) in which every pair of options from two groups meets at least
    once: a pairwise covering array. Greedy: the first two groups' full product, each row given the option
    of every later group that meets the most pairs not met yet; rows are added for any pair still missing."""
    def pairs(row: tuple[str, ...]) -> set[tuple[int, str, int, str]]:
        return {(i, row[i], j, row[j]) for i, j in itertools.combinations(range(len(row)), 2)}

    wanted = {(i, a, j, b) for i, j in itertools.combinations(range(len(groups)), 2)
              for a in groups[i] for b in groups[j]}
    rows: list[tuple[str, ...]] = []
    for head in itertools.product(*groups[:2]):
        row = head
        for group in groups[2:]:
            row = max((row + (option,) for option in group), key=lambda r: len(pairs(r) & wanted))
        rows.append(row)
        wanted -= pairs(row)
    for i, a, j, b in sorted(wanted):
        row = tuple(a if k == i else b if k == j else groups[k][0] for k in range(len(groups)))
        rows.append(row)
    return rows


# every (hardware, model), (algorithm, hardware) and (algorithm, model) pair composes together at least
# once: 60 combinations in place of all 392 (7 x 7 x 8), each taking our compose, verl's compose and its
# validation (about a second). A fault that needs three particular options together can slip through.
SHIPPED_PAIRS = [(a, h, m) for h, m, a in every_pair(HARDWARE, MODELS, ALGORITHMS)]


def test_every_pair_meets_every_pair_of_options_at_least_once():
    groups = (["a", "b", "c"], ["x", "y"], ["1", "2", "3", "4"], ["p", "q"])
    rows = every_pair(*groups)
    for i, j in itertools.combinations(range(len(groups)), 2):
        assert {(r[i], r[j]) for r in rows} == set(itertools.product(groups[i], groups[j]))
    assert len(rows) < len(list(itertools.product(*groups)))
    for i, j, first, second in ((0, 1, ALGORITHMS, HARDWARE), (0, 2, ALGORITHMS, MODELS), (1, 2, HARDWARE, MODELS)):
        assert {(r[i], r[j]) for r in SHIPPED_PAIRS} == set(itertools.product(first, second))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm,hardware,model", SHIPPED_PAIRS)
def test_every_pair_of_shipped_choices_is_accepted_by_verl_or_refused_by_our_own_rule(algorithm, hardware, model):
    why = combination_failure(algorithm, hardware, model)
    assert why is None, f"algorithm={algorithm} hardware={hardware} model={model}: {one_line(why)}"
