"""verlsweep/command/cli_keys.py: a key the command line sets that the composed config lacks gets the
closest key or group, before Hydra answers with "Key ... is not in struct" and the advice to add `+`."""
from __future__ import annotations

import pytest
import yaml

from verlsweep import CONF_DIR
from verlsweep.command.argv import group_options
from verlsweep.command.cli_keys import key_problems, yaml_problem
from verlsweep.command.compose import compose_config


@pytest.fixture(scope="module")
def composed():
    return compose_config([], return_hydra_config=True), group_options(CONF_DIR)


@pytest.mark.parametrize("arg, says", [
    ("hardwre=a2_64g", "no config group or key `hardwre`; did you mean hardware=a2_64g?"),
    ("trial.step=3", "no key `step` in trial; did you mean trial.steps=3?"),
    ("hydra.sweeper.n_trial=5", "did you mean hydra.sweeper.n_trials=5?"),
    ("+hardwre=a2_64g", "adds a new key `hardwre` that nothing reads; did you mean hardware=a2_64g?"),
    ("trial.xyzzy=3", "its keys: steps, number"),
])
def test_a_key_the_config_lacks_is_named_with_the_closest_one(composed, arg, says):
    cfg, groups = composed
    (message,) = key_problems([arg], cfg, groups)
    assert message == f"{arg}: {says}" or (message.startswith(f"{arg}: ") and says in message)


def test_what_hydra_accepts_passes(composed):
    cfg, groups = composed
    fine = ["-m", "hardware=a3_64g", "trial.steps=2", "verl.any.key.at_all=1", "+env.NEW_VAR=1", "+my_own_key=1",
            "hydra.launcher.n_jobs=2", "hydra.sweeper.sampler.seed=3", "hydra.sweeper.params.x=choice(1,2)",
            "~space", "hydra.sweeper.n_trials=3"]
    assert key_problems(fine, cfg, groups) == []


def test_a_yaml_syntax_error_is_its_file_and_line_and_another_failure_is_left_to_hydra(tmp_path):
    bad = tmp_path / "hw.yaml"
    bad.write_text("hardware:\n  devices_per_node: [8\n  nnodes: 1\n")
    wrapped = RuntimeError("compose failed")          # Hydra re-raises yaml's error from its own
    with pytest.raises(yaml.YAMLError) as err:
        yaml.safe_load(bad.read_text())
    err.value.problem_mark.name = str(bad)             # as Hydra's loader names the file it reads
    wrapped.__cause__ = err.value
    said = yaml_problem(wrapped)
    assert said is not None and said.startswith(f"{bad}, line 3: not valid YAML: ")
    assert yaml_problem(RuntimeError("a missing group")) is None


def test_a_single_runs_output_root_that_cannot_hold_its_run_dir_is_named(composed, tmp_path):
    from verlsweep.command.cli_keys import run_dir_problems

    cfg, _ = composed
    (tmp_path / "a_file").write_text("")
    (said,) = run_dir_problems([f"paths.output_root={tmp_path / 'a_file'}"], cfg)
    assert said.startswith(f"paths.output_root='{tmp_path / 'a_file'}': ") and "is a file" in said
    assert run_dir_problems(["-m", f"paths.output_root={tmp_path / 'a_file'}"], cfg) == []     # the sweeper's
    assert run_dir_problems([f"paths.output_root={tmp_path / 'out'}"], cfg) == []
