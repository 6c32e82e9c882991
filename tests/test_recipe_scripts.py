"""A recipe script a user already has is the trial's config: captured by running it with a shim python,
planned and validated as it is, its knobs set the way it takes them, recorded as what runs.

The scripts under tests/support/recipes/ are written here in the forms of verl's example scripts
(variables with defaults, override arrays, plain continuations, exports, preprocessing, with and without
"$@")."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from verlsweep.command import argv as cli_args
from verlsweep.command import recipe_config, recipe_routes
from verlsweep.command.compose import compose_config
from verlsweep.command.recipe_capture import capture
from verlsweep.command.recipe_routes import find_routes
from verlsweep.common.errors import ConfigError
from verlsweep.prepare import prepare

RECIPES = Path(__file__).parent / "support" / "recipes"
REMAX = RECIPES / "remax_ascend.sh"
NO_ARGS = RECIPES / "tp_from_env_no_args.sh"
FORMS = sorted(RECIPES.glob("*.sh"))
UTIL = "actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"
OFFLOAD = "actor_rollout_ref.actor.fsdp_config.param_offload"
ALWAYS = {"trainer.total_training_steps", "trainer.logger", "trainer.project_name", "trainer.experiment_name",
          "trainer.val_before_train", "trainer.test_freq", "trainer.save_freq", "trainer.resume_mode"}


def prepared(script: Path, *knobs: str, validate: bool = False, hardware: str = "a2_64g"):
    overrides = ["runner=script", f"runner.script={script}", f"hardware={hardware}", "dry_run=true",
                 f"validate.verl={str(validate).lower()}", *knobs]
    return prepare(compose_config(overrides), dry=True, overrides=overrides)


@pytest.mark.parametrize("script", FORMS, ids=[p.stem for p in FORMS])
def test_every_form_dry_runs_validates_and_plans_as_its_own_config(script):
    own = capture(script.resolve())
    trial = prepared(script, validate=True)
    assert trial.command.script is not None and trial.command.script["sha256"] == own.sha256
    for key, raw in recipe_config.parse_overrides(own.overrides).items():
        if key not in ALWAYS:
            assert trial.config.verl[key] == recipe_config._plain(raw), key
    assert trial.clearance.memory is not None, trial.clearance.unplannable    # planned on the script's model


def test_the_remax_form_keeps_its_batch_and_lengths_under_swept_knobs(tmp_path, monkeypatch):
    monkeypatch.setenv("MODEL_PATH", str(tmp_path / "Qwen3-8B"))      # not there: the dry run says so
    trial = prepared(REMAX, f"verl.{UTIL}=0.8", f"verl.{TP}=4", f"verl.{OFFLOAD}=false")
    verl = trial.config.verl
    assert (verl["data.train_batch_size"], verl["actor_rollout_ref.actor.ppo_mini_batch_size"],
            verl["data.max_response_length"]) == (128, 32, 1024)
    assert (verl[UTIL], verl[TP], verl[OFFLOAD]) == (0.8, 4, False)
    planned = trial.clearance.memory
    assert planned is not None and "rollout" in planned.summary()
    # each knob by the script's own route: its variables, else "$@"
    script = trial.command.script
    assert script["env"] == {"ROLLOUT_GPU_MEM_UTIL": "0.8", "ROLLOUT_TP": "4"}
    assert f"{OFFLOAD}=False" in script["args"]
    # a path missing here names the variable the script reads it from
    assert any("model.path" in w and "set MODEL_PATH" in w for w in trial.command.warnings)


def test_the_recorded_command_launches_what_was_planned_and_nothing_else_changed(tmp_path):
    trial = prepared(REMAX, f"verl.{UTIL}=0.8", f"verl.{TP}=4", f"verl.{OFFLOAD}=false")
    recorded = trial.command
    (tmp_path / "command.sh").write_text(recorded.to_bash())
    again = capture(tmp_path / "command.sh")          # command.sh runs the script, which launches verl
    assert list(again.overrides) == recorded.overrides
    before, after = capture(REMAX.resolve()).values, again.values
    changed = {k for k in after if after[k] != before.get(k)}
    assert changed == {UTIL, TP, OFFLOAD} | ALWAYS
    assert json.loads(json.dumps(recorded.to_json()))["script"]["path"] == str(REMAX.resolve())


# each form's own routes for util, TP and offload: env vars it reads, else "$@" (quoted or not)
ROUTES = {
    "remax_ascend": ({"ROLLOUT_GPU_MEM_UTIL": "0.8", "ROLLOUT_TP": "4"}, [f"{OFFLOAD}=False"]),
    "grpo_arrays": ({"UTIL": "0.8", "ROLLOUT_TP": "4"}, [f"{OFFLOAD}=False"]),
    "gsm8k_preprocess_then_train": ({}, [f"{UTIL}=0.8", f"{TP}=4", f"{OFFLOAD}=False"]),
    "gspo_nightly_tee": ({"MEM": "0.8", "TP": "4", "STEPS": "5"}, [f"{OFFLOAD}=False"]),  # its own length var
}


@pytest.mark.parametrize("form", sorted(ROUTES))
def test_swept_knobs_reach_verl_by_the_script_s_own_route_and_nothing_else_changes(form):
    script = (RECIPES / f"{form}.sh").resolve()
    trial = prepared(script, f"verl.{UTIL}=0.8", f"verl.{TP}=4", f"verl.{OFFLOAD}=false")
    env, args = ROUTES[form]
    assert trial.command.script["env"] == env and trial.command.script["args"][:len(args)] == args
    again = capture(script, env=trial.command.script["env"], args=trial.command.script["args"])
    assert list(again.overrides) == trial.command.overrides          # the record is what the script launches
    after, before = again.values, capture(script).values
    assert (after[UTIL], after[TP], after[OFFLOAD]) == ("0.8", "4", "False")
    assert {k for k, v in after.items() if v != before.get(k)} <= {UTIL, TP, OFFLOAD} | ALWAYS
    assert set(before) <= set(after)                               # nothing of the script's is dropped


def test_a_local_model_dir_is_planned_from_its_config_json(tmp_path):
    (tmp_path / "MyLM").mkdir()
    (tmp_path / "MyLM" / "config.json").write_text(json.dumps({"model_type": "qwen3", "hidden_size": 64}))
    node = recipe_config.model_node(str(tmp_path / "MyLM"))
    assert node["name"] == "MyLM" and node["config"]["hidden_size"] == 64 and node["path"] == str(tmp_path / "MyLM")


def test_a_swept_knob_a_script_takes_neither_way_is_refused_naming_it():
    cfg = compose_config(["runner=script", f"runner.script={NO_ARGS}"])
    problems = recipe_config.route_problems(cfg, [f"verl.{UTIL}", f"verl.{TP}"])
    assert [p.key for p in problems] == [f"verl.{UTIL}"]
    assert '"$@"' in problems[0].allowed and NO_ARGS.name in problems[0].allowed
    with pytest.raises(ConfigError, match="gpu_memory_utilization"):
        prepared(NO_ARGS, f"verl.{UTIL}=0.8")
    assert prepared(NO_ARGS, f"verl.{TP}=4").command.script["env"] == {"TP": "4"}


def test_finding_a_script_s_variables_leaves_nothing_where_it_is_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)                  # gspo_nightly_tee.sh does `mkdir -p "$LOG_DIR"`
    recipe_routes._find.cache_clear()
    routes = find_routes((RECIPES / "gspo_nightly_tee.sh").resolve())
    assert routes.env[TP] == "TP" and routes.forwards_args
    assert list(tmp_path.iterdir()) == []


def test_a_hub_id_is_planned_as_the_known_model_and_an_unknown_model_is_said(tmp_path):
    hub = prepared(RECIPES / "grpo_arrays.sh")
    assert hub.config.model.name == "qwen3_8b"
    assert not any("Qwen/Qwen3-8B" in w for w in hub.command.warnings)      # verl fetches a hub id itself
    odd = tmp_path / "odd.sh"
    odd.write_text(REMAX.read_text().replace("$HOME/models/Qwen3-8B", "someone/MysteryLM-3B"))
    trial = prepared(odd)
    assert trial.clearance.memory is None and "unknown model 'someone/MysteryLM-3B'" in trial.clearance.unplannable


@pytest.mark.parametrize(("body", "message"), [
    ("echo hello\n", "never launches verl"),
    ("python3 -m verl.trainer.main_ppo a=1\npython3 -m verl.trainer.main_ppo a=2\n", "launches verl 2 times"),
    ("set -e\nsource ./missing_env.sh\npython3 -m verl.trainer.main_ppo a=1\n", "failed before launching verl"),
    ("python3 -m verl.trainer.main_ppo --config-name=ppo_megatron_trainer a=1\n", "--config-name"),
])
def test_a_script_that_cannot_be_captured_is_named_with_its_line(tmp_path, body, message):
    script = tmp_path / "run.sh"
    script.write_text(body)
    with pytest.raises(ConfigError) as err:
        capture(script)
    assert message in str(err.value) and "run.sh" in str(err.value)


def test_a_preprocessing_call_is_skipped_and_reported():
    launch = capture((RECIPES / "gsm8k_preprocess_then_train.sh").resolve())
    assert launch.skipped and "data_preprocess/gsm8k.py" in launch.skipped[0]
    assert launch.env == {"VLLM_ATTENTION_BACKEND": "XFORMERS"}


def test_a_script_that_disagrees_with_the_hardware_option_is_said_before_launch():
    trial = prepared(REMAX, hardware="h100_80g")
    assert any("trainer.device=npu" in w and "hardware.device=cuda" in w for w in trial.command.warnings)


def test_recipe_is_spelt_as_runner_script_and_groups_beside_it_are_refused():
    argv, problems = cli_args.recipe_args([f"recipe={REMAX}", "hardware=a2_64g"])
    assert argv == ["runner=script", f"runner.script={REMAX.resolve()}", "hardware=a2_64g"] and not problems
    _, problems = cli_args.recipe_args([f"recipe={REMAX}", "model=qwen3_8b", "algorithm=grpo"])
    assert [p.split(":")[0] for p in problems] == ["model=qwen3_8b", "algorithm=grpo"]


def test_best_launch_calls_the_script_with_the_best_knobs_only():
    overrides = [f"verl.{UTIL}=0.8", f"verl.{OFFLOAD}=false", "verl.trainer.total_training_steps=60"]
    body = prepared(REMAX, *overrides).launch_script()
    assert "export ROLLOUT_GPU_MEM_UTIL=${ROLLOUT_GPU_MEM_UTIL:-0.8}" in body
    assert f'bash {REMAX.resolve()} {OFFLOAD}=False "$@"' in body
    assert "total_training_steps" not in body                 # the long run's length is the script's


def test_runner_env_map_names_a_variable_only_a_sourced_file_reads(tmp_path):
    (tmp_path / "vars.sh").write_text(f'ROLLOUT_ARGS="{UTIL}=${{GPU_UTIL:-0.5}}"\n')
    script = tmp_path / "run.sh"
    script.write_text('source "$(dirname "$0")/vars.sh"\n'
                      "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen3-8B $ROLLOUT_ARGS\n")
    with pytest.raises(ConfigError, match="neither from an environment variable"):
        prepared(script, f"verl.{UTIL}=0.8")
    trial = prepared(script, f"verl.{UTIL}=0.8", f"+runner.env_map.GPU_UTIL={UTIL}")
    assert trial.command.script["env"] == {"GPU_UTIL": "0.8"} and trial.config.verl[UTIL] == 0.8


def test_the_search_space_s_tp_choices_are_those_of_the_script_s_model(tmp_path, monkeypatch):
    model = tmp_path / "TinyLM"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_attention_heads": 4, "num_key_value_heads": 2}))
    monkeypatch.setenv("MODEL_PATH", str(model))
    cfg = compose_config(["runner=script", f"runner.script={REMAX}", "hardware=a2_64g"], return_hydra_config=True)
    assert cfg.hydra.sweeper.params[f"verl.{TP}"] == "choice(1,2,4)"      # not the model group's 1,2,4,8
