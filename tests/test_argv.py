"""verlsweep/command/argv.py: what sweep.py reads from the command line before Hydra does."""
from verlsweep.command.argv import renamed_groups


def test_the_former_search_space_group_name_is_read_as_space_with_a_note():
    argv, notes = renamed_groups(["-m", "sweep=smoke", "~sweep", "hardware=a2_64g", "hydra.sweeper.n_trials=2"])
    assert argv == ["-m", "space=smoke", "~space", "hardware=a2_64g", "hydra.sweeper.n_trials=2"]
    assert len(notes) == 2 and "`space`" in notes[0]


def test_todays_names_pass_unchanged():
    argv = ["space=smoke", "sweep_dir=x", "hydra.sweep.dir=y"]
    assert renamed_groups(argv) == (argv, [])
