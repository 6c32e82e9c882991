"""The verl stand-in composes verl's real ppo_trainer with Hydra (errors, +/++ and --cfg are Hydra's), takes
its knobs apart from verl's overrides, runs by path or as a module, and is never imported by the product."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.standin_runs import FAST, REPO, clean_env, plain, run_standin, steps_of


def test_unknown_key_fails_with_hydras_error_and_exit_1(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "trainer.typo_key=1")
    assert res.returncode == 1
    assert "Could not override 'trainer.typo_key'." in res.stderr
    assert "To append to your config use +trainer.typo_key=1" in res.stderr
    assert "Key 'typo_key' is not in struct" in res.stderr
    assert "ray init kwargs" not in res.stdout  # failed at compose time, before Ray


def test_plus_on_an_existing_key_fails_like_hydra(tmp_path: Path) -> None:
    existing = run_standin(tmp_path, "+trainer.project_name=x")
    assert existing.returncode == 1
    assert "Could not append to config. An item is already at 'trainer.project_name'." in existing.stderr


def test_plus_adds_and_plusplus_overrides(tmp_path: Path) -> None:
    added = run_standin(
        tmp_path, "+trainer.brand_new=1", "++trainer.project_name=p", "trainer.total_training_steps=1",
        "trainer.logger=[console]", *FAST,
    )
    assert added.returncode == 0, added.stderr[-2000:]
    assert "'brand_new': 1" in added.stdout and "'project_name': 'p'" in added.stdout


def test_cfg_job_prints_config_without_running(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "--cfg", "job", "trainer.total_training_steps=3")
    assert res.returncode == 0
    assert "total_training_steps: 3" in res.stdout
    assert "ray init kwargs" not in res.stdout


def test_bad_knob_is_a_usage_error_not_a_verl_failure(tmp_path: Path) -> None:
    typo = run_standin(tmp_path, "+standin.mdoe=oom")
    assert typo.returncode == 2 and "unknown knob standin.mdoe" in typo.stderr
    mode = run_standin(tmp_path, "+standin.mode=explode")
    assert mode.returncode == 2 and "unknown standin.mode='explode'" in mode.stderr


# -------------------------------------------------------------------------------------------------------------
# Packaging
# -------------------------------------------------------------------------------------------------------------


def test_runs_as_module_from_repo_root(tmp_path: Path) -> None:
    res = plain(subprocess.run(
        [sys.executable, "-m", "tests.support.standin.verl_standin", "trainer.total_training_steps=1",
         "trainer.logger=[console]", *FAST, f"hydra.run.dir={tmp_path / 'hydra_run'}"],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120, check=False,
    ))
    assert res.returncode == 0, res.stderr[-3000:]
    assert steps_of(res.stdout) == [0, 1]


def test_ray_colours_are_printed_as_ray_does_by_default_and_not_with_ray_color_prefix_0(tmp_path: Path) -> None:
    args = ("+standin.mode=oom", "trainer.total_training_steps=3", "trainer.logger=[console]", *FAST)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    coloured = run_standin(tmp_path / "a", *args, raw=True)
    assert "\x1b[36m(TaskRunnerV1 pid=" in coloured.stdout
    assert "\x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid=" in coloured.stderr
    plain = run_standin(tmp_path / "b", *args, env=clean_env(RAY_COLOR_PREFIX="0"), raw=True)
    assert "\x1b[" not in plain.stdout and re.search(r"^\(TaskRunnerV1 pid=\d+\) step:1 - ", plain.stdout, re.M)
    assert "\x1b[36mray::TaskRunnerV1.run()\x1b[39m" in plain.stderr     # RayTaskError colours regardless


def test_product_never_imports_the_standin() -> None:
    offenders = []
    for path in (REPO / "verlsweep").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[Any] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            if any(n.startswith("tests") or "standin" in n for n in names):
                offenders.append(f"{path}:{node.lineno}")
    assert offenders == []
