"""A healthy stand-in run: verl's console step lines and JSONL records, metric names and types, the
throughput model and `auto` mode's memory model (tests/support/standin/metrics.py)."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.standin_runs import (
    FAST,
    PREFIX_V0,
    REQUIRED_METRICS,
    STANDIN,
    clean_env,
    console_metrics,
    run_standin,
    steps_of,
)


def test_a_healthy_run_prints_verls_step_lines_and_writes_the_same_steps_to_its_jsonl(tmp_path: Path) -> None:
    jsonl = tmp_path / "metrics.jsonl"
    start = time.monotonic()
    res = run_standin(
        tmp_path,
        "trainer.total_training_steps=5",
        "trainer.logger=[console,file]",
        "trainer.val_before_train=False",
        env=clean_env(VERL_FILE_LOGGER_PATH=str(jsonl)),
    )
    elapsed = time.monotonic() - start
    assert res.returncode == 0, res.stderr[-3000:]
    assert steps_of(res.stdout) == [1, 2, 3, 4, 5]
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    for record in records:
        missing = [k for k in REQUIRED_METRICS if k not in record["data"]]
        assert not missing, missing
        assert record["data"]["training/global_step"] == record["step"]
    console = console_metrics(res.stdout, 3)
    assert all(k in console for k in REQUIRED_METRICS)
    assert console["training/num_turns/mean"] == "np.float64(1.0)"  # numpy-2 repr, as verl prints it
    assert console["training/num_turns/max"] == "np.int64(1)"
    assert f"Creating file logger at {jsonl}" in res.stdout
    assert "Started a local Ray instance." in res.stderr
    assert res.stdout.startswith("ray init kwargs: {")
    # throughput is verl's formula over the logged values (n_gpus = 8 by default)
    d = records[2]["data"]
    assert d["perf/throughput"] == pytest.approx(d["perf/total_num_tokens"] / (d["perf/time_per_step"] * 8))
    assert elapsed < 30, f"ok run took {elapsed:.1f}s"  # ~2 s on an idle 2-core box; generous against load


def test_imports_neither_torch_nor_ray_nor_verl(tmp_path: Path) -> None:
    # Speed comes from composing verl's yaml without importing verl (torch) or ray.
    args = [sys.executable, "-X", "importtime", str(STANDIN), "trainer.total_training_steps=1",
            "trainer.logger=[console,file]", *FAST, f"hydra.run.dir={tmp_path / 'hydra_run'}"]
    res = subprocess.run(args, cwd=tmp_path, env=clean_env(VERL_FILE_LOGGER_PATH=str(tmp_path / "m.jsonl")),
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    top_level = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \| (\S+)$", res.stderr, re.M))
    assert "hydra" in top_level
    assert not top_level & {"torch", "ray", "verl", "mlflow", "pandas", "transformers"}


def test_val_before_train_logs_step_0_like_verl(tmp_path: Path) -> None:
    res = run_standin(
        tmp_path,
        "trainer.total_training_steps=2",
        "trainer.logger=[console,file]",
        *FAST,
        env=clean_env(VERL_FILE_LOGGER_ROOT=str(tmp_path / "root")),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert steps_of(res.stdout) == [0, 1, 2]
    assert "val-core/openai/gsm8k/acc/mean@1:np.float64(" in res.stdout
    default_path = tmp_path / "root" / "verl_examples" / "gsm8k.jsonl"  # <root>/<project>/<experiment>.jsonl
    assert [json.loads(line)["step"] for line in default_path.read_text().splitlines()] == [0, 1, 2]


def test_runtime_env_env_vars_reach_the_actor(tmp_path: Path) -> None:
    # Ray gives actors runtime_env.env_vars; verl's FileLogger (in the actor) reads VERL_FILE_LOGGER_PATH.
    jsonl = tmp_path / "via_runtime_env.jsonl"
    res = run_standin(tmp_path, "trainer.total_training_steps=1", "trainer.logger=[file]", *FAST,
                      f"+ray_kwargs.ray_init.runtime_env.env_vars.VERL_FILE_LOGGER_PATH={jsonl}")
    assert res.returncode == 0, res.stderr[-2000:]
    assert [json.loads(line)["step"] for line in jsonl.read_text().splitlines()] == [0, 1]


def test_legacy_trainer_prefix_and_numpy_actor_metrics(tmp_path: Path) -> None:
    res = run_standin(
        tmp_path, "trainer.use_v1=False", "trainer.total_training_steps=2", "trainer.logger=[console]", *FAST
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert steps_of(res.stdout, PREFIX_V0) == [0, 1, 2]
    assert "Legacy trainer `main_ppo_v0.py` is deprecated" in res.stdout
    assert console_metrics(res.stdout, 1)["actor/pg_loss"].startswith("np.float64(")


@pytest.mark.slow
def test_throughput_is_deterministic_and_depends_on_config(tmp_path: Path) -> None:
    def tput(*extra: str) -> list[float]:
        res = run_standin(tmp_path, "trainer.total_training_steps=3", "trainer.logger=[console]", *FAST, *extra)
        assert res.returncode == 0, res.stderr[-2000:]
        return [float(console_metrics(res.stdout, s)["perf/throughput"]) for s in (1, 2, 3)]

    base = tput()
    assert tput() == base
    assert tput("actor_rollout_ref.rollout.tensor_model_parallel_size=8") != base
    assert tput("+standin.seed=7") != base


@pytest.mark.parametrize(
    ("util", "tp", "expect"),
    [(0.5, 2, None), (0.8, 2, "on startup is less than desired GPU memory utilization"),
     (0.2, 1, "No available memory for the cache blocks")],
)
def test_auto_mode_fails_with_vllms_error_only_when_util_and_tp_leave_too_little_memory(
    tmp_path: Path, util: float, tp: int, expect: str | None
) -> None:
    res = run_standin(
        tmp_path, "+standin.mode=auto", "trainer.total_training_steps=1", "trainer.logger=[console]", *FAST,
        f"actor_rollout_ref.rollout.gpu_memory_utilization={util}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}",
    )
    if expect is None:
        assert res.returncode == 0, res.stderr[-2000:]
    else:
        assert res.returncode == 1 and expect in res.stderr
