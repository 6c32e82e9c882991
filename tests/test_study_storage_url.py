"""verlsweep/study/storage_url.py: a storage URL or sweep dir Optuna could not use, found before a study exists."""
from __future__ import annotations

import pytest

from verlsweep.common.files import writable_dir
from verlsweep.study.storage_url import KEY, problems


@pytest.mark.parametrize("url, says", [
    ("sqlite:/studies.db", "a database URL: sqlite:///relative/path.db"),
    ("sqlit:///studies.db", "'sqlit' is not a dialect"),
    ("postgresql://me@dbhost/optuna", "a database whose driver is installed"),
])
def test_a_url_optuna_cannot_open_is_named_with_what_to_write(url, says):
    (problem,) = problems(url)
    assert problem.key == KEY and problem.value == url and says in problem.allowed


def test_a_sqlite_file_needs_its_directory_and_a_good_one_passes(tmp_path):
    (problem,) = problems(f"sqlite:///{tmp_path}/missing/studies.db")
    assert f"mkdir -p {tmp_path}/missing" in problem.allowed
    assert problems(f"sqlite:///{tmp_path}/studies.db") == [] and problems("sqlite:///:memory:") == []
    assert not (tmp_path / "studies.db").exists()                 # checked, not created


def test_a_dir_below_a_file_cannot_be_made(tmp_path):
    (tmp_path / "a_file").write_text("")
    (problem,) = writable_dir("paths.output_root", "a_file", tmp_path / "a_file" / "sweeps" / "x", "the sweep dir")
    assert "is a file, not a directory" in problem.allowed
    assert writable_dir("paths.output_root", "out", tmp_path / "out" / "sweeps", "the sweep dir") == []
