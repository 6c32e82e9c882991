"""The house's lint and type checks, configured in pyproject.toml ([tool.ruff], [tool.mypy]), run with the
suite so CI runs them: a finding fails the test and is printed."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("verlsweep", "hydra_plugins")


def _tool(module: str) -> None:
    if shutil.which(module) is None and subprocess.run([sys.executable, "-m", module, "--version"],
                                                       capture_output=True).returncode != 0:
        pytest.fail(f"{module} is not installed: it is in the project's test extra (pyproject.toml)")


@pytest.mark.slow
def test_ruff_finds_nothing_in_the_tree():
    _tool("ruff")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]


@pytest.mark.slow
def test_mypy_finds_nothing_in_the_package_and_the_plugins(tmp_path):
    _tool("mypy")
    done = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-2000:]


def test_every_type_ignore_names_the_error_it_silences():
    bare = [f"{path.relative_to(ROOT)}:{n}" for top in CHECKED for path in sorted((ROOT / top).rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if re.search(r"#\s*type:\s*ignore(?!\[)", line)]
    assert not bare, f"a bare `# type: ignore` (name the error code, say why): {bare}"
