"""verlsweep/command/argv.py: what sweep.py reads from the command line before Hydra does."""
from verlsweep.command.argv import renamed_groups


def test_the_former_search_space_group_name_is_read_as_space_with_a_note():
    argv, notes = renamed_groups(["-m", "sweep=smoke", "~sweep", "hardware=a2_64g", "hydra.sweeper.n_trials=2"])
    assert argv == ["-m", "space=smoke", "~space", "hardware=a2_64g", "hydra.sweeper.n_trials=2"]
    assert len(notes) == 2 and "`space`" in notes[0]


def test_todays_names_pass_unchanged():
    argv = ["space=smoke", "sweep_dir=x", "hydra.sweep.dir=y"]
    assert renamed_groups(argv) == (argv, [])


def test_another_sweeper_drops_the_space_and_ours_under_either_name_keeps_it():
    from verlsweep.command.argv import for_other_sweeper, sweeper_conflict

    assert for_other_sweeper(["-m", "hydra/sweeper=basic", "model=qwen3_8b"])[-1] == "~space"
    for ours in ("verlsweep", "verl_trials"):
        argv = ["-m", f"hydra/sweeper={ours}", "model=qwen3_8b"]
        assert for_other_sweeper(argv) == argv and sweeper_conflict([*argv, "space=smoke"]) is None
    assert "hydra/sweeper=basic cannot run" in sweeper_conflict(["-m", "hydra/sweeper=basic", "space=smoke"])


def test_the_basic_sweeper_composes_without_our_sweepers_keys():
    from verlsweep import CONF_DIR
    from verlsweep.command import config_store
    from verlsweep.command.hydra_compose import compose_dir

    config_store.register()
    ours = compose_dir(CONF_DIR, "sweep", [], return_hydra_config=True).hydra.sweeper
    assert (ours.direction, ours.storage) == ("maximize", "sqlite:///verlsweep-optuna.db")
    basic = compose_dir(CONF_DIR, "sweep", ["hydra/sweeper=basic", "~space"], return_hydra_config=True).hydra.sweeper
    assert "direction" not in basic and basic._target_.endswith("BasicSweeper")


def test_m_joined_to_an_override_or_after_one_says_how_to_write_it():
    from verlsweep.command.argv import joined_multirun

    assert joined_multirun(["-mhardware=a3_64g"]) == [
        "-mhardware=a3_64g: -m and the overrides are separate arguments: -m hardware=a3_64g"]
    (late,) = joined_multirun(["runner=estimate", "-m", "trial.steps=2"])
    assert late.endswith("python sweep.py -m runner=estimate trial.steps=2")
    assert joined_multirun(["-m", "runner=estimate"]) == [] and joined_multirun(["--cfg", "job"]) == []
    assert joined_multirun(["runner=estimate", "-m"]) == []          # argparse reads -m last as it is
    (both,) = joined_multirun(["--cfg", "job", "hardware=a2_64g", "-m"])
    assert both.startswith("-m with --cfg: Hydra does one of them")


def test_sweeper_settings_without_m_are_refused_with_the_command_to_type():
    from verlsweep.command.argv import sweep_without_multirun

    (said,) = sweep_without_multirun(["runner=estimate", "hydra.sweeper.n_trials=5"])
    assert said.startswith("hydra.sweeper.n_trials=5: ") and "python sweep.py -m runner=estimate" in said
    assert sweep_without_multirun(["-m", "hydra.sweeper.n_trials=5"]) == []
    assert sweep_without_multirun(["hydra.sweep.dir=x", "trial.steps=2"]) == []


def test_an_override_hydra_cannot_parse_is_named_with_hydras_reason_and_options_values_are_not_overrides():
    from verlsweep.command.argv import grammar_errors

    (said,) = grammar_errors(["--cfg", "job", "frobnicate"])
    assert said.startswith("frobnicate: not an override Hydra can read (missing EQUAL at '<EOF>'); write key=value")
    assert grammar_errors(["--info", "defaults", "-cn", "other", "trial.steps=3", "-m", "x=choice(1,2)"]) == []


def test_the_group_options_follow_the_config_path_variable_from_one_call_to_the_next(tmp_path, monkeypatch):
    from verlsweep import CONF_DIR
    from verlsweep.command.argv import group_options
    from verlsweep.common.names import CONFIG_PATH_ENV

    monkeypatch.delenv(CONFIG_PATH_ENV, raising=False)
    before = group_options(CONF_DIR)["hardware"]
    (tmp_path / "site" / "hardware").mkdir(parents=True)
    (tmp_path / "site" / "hardware" / "lab_c.yaml").write_text("# @package _global_\nhardware: {name: lab_c}\n")
    monkeypatch.setenv(CONFIG_PATH_ENV, str(tmp_path / "site"))
    assert "lab_c" not in before and "lab_c" in group_options(CONF_DIR)["hardware"]
