"""verlsweep.common.errors: how a rejected setting reads (key, value, what is allowed) and the error that
carries them before anything launches."""
from __future__ import annotations

from verlsweep.common.errors import ConfigError, MissingPath, Problem, full_traceback_wanted


def test_a_problem_reads_key_value_allowed_and_its_rule():
    assert str(Problem("a.b", 1.5, "a number in (0, 1]")) == "a.b=1.5: a number in (0, 1]"
    assert str(Problem("a.b", "x", "true or false", rule="type")) == "a.b='x': true or false [type]"


def test_a_missing_path_says_not_found():
    p = MissingPath("data.train", "/nope/train.parquet", "set data.dir", groups=("data",))
    assert str(p) == "not found: data.train=/nope/train.parquet (set data.dir)"
    assert p.groups == ("data",)


def test_a_config_error_lists_every_problem_and_says_nothing_launched():
    err = ConfigError([Problem("a", 1, "x"), Problem("b", 2, "y")])
    assert isinstance(err, ValueError) and len(err.problems) == 2
    assert str(err).splitlines() == ["invalid trial config (2 problem(s)), nothing launched:", "  - a=1: x",
                                     "  - b=2: y"]


def test_hydra_full_error_asks_for_the_traceback(monkeypatch):
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)
    assert not full_traceback_wanted()
    monkeypatch.setenv("HYDRA_FULL_ERROR", "1")
    assert full_traceback_wanted()
