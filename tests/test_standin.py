"""Tests of the verl stand-in (tests/standin/verl_standin.py) that the runner tests drive instead of verl.

Each test runs the stand-in as a subprocess, exactly as the product launches verl, in a temp cwd with
``hydra.run.dir`` pointed into the temp dir. The MLflow ones are slow (importing mlflow and sqlite writes
dominate); the rest take 1-3 s each.
"""

from __future__ import annotations

import ast
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from verlsweep.trial.metrics import strip_ansi

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "tests" / "standin" / "verl_standin.py"
PREFIX_V1 = re.compile(r"^\(TaskRunnerV1 pid=(\d+)\) step:(\d+) - ", re.M)
PREFIX_V0 = re.compile(r"^\(TaskRunner pid=(\d+)\) step:(\d+) - ", re.M)
REQUIRED_METRICS = (
    "perf/throughput",
    "perf/total_num_tokens",
    "perf/time_per_step",
    "timing_s/step",
    "timing_s/gen",
    "timing_s/update_actor",
    "actor/perf/max_memory_allocated_gb",
    "actor/perf/max_memory_reserved_gb",
    "actor/pg_loss",
    "critic/score/mean",
    "response_length/mean",
    "training/global_step",
)
FAST = ["+standin.step_seconds=0.01"]


def _env(**extra: str) -> dict[str, str]:
    # The caller's own verl/mlflow/stand-in variables must not leak into a test's run.
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("VERL_STANDIN_", "MLFLOW_", "VERL_FILE_LOGGER_", "HYDRA_FULL_ERROR"))
    }
    env.update(extra)
    return env


def run_standin(
    tmp_path: Path, *overrides: str, env: dict[str, str] | None = None, timeout: float = 120, raw: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the stand-in to completion with verl-style argv, in ``tmp_path``; its output is read without Ray's
    colour codes (as verlsweep reads it) unless ``raw``."""
    args = [sys.executable, str(STANDIN), *overrides, f"hydra.run.dir={tmp_path / 'hydra_run'}"]
    res = subprocess.run(
        args, cwd=tmp_path, env=env or _env(), capture_output=True, text=True, timeout=timeout, check=False
    )
    return res if raw else _plain(res)


def _plain(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    res.stdout, res.stderr = strip_ansi(res.stdout or ""), strip_ansi(res.stderr or "")
    return res


def _steps(stdout: str, pattern: re.Pattern[str] = PREFIX_V1) -> list[int]:
    return [int(m.group(2)) for m in pattern.finditer(stdout)]


def _console_metrics(stdout: str, step: int) -> dict[str, str]:
    line = next(l for l in stdout.splitlines() if re.search(rf"\) step:{step} - ", l))
    fields = line.split(") ", 1)[1].split(" - ")[1:]
    return dict(f.split(":", 1) for f in fields)


def _group_members(pgid: int) -> list[int]:
    alive = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return alive


def _wait_for(path: Path, needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = strip_ansi(path.read_text(errors="replace")) if path.exists() else ""
        if needle in text:
            return text
        time.sleep(0.05)
    raise AssertionError(f"{needle!r} not seen in {path} within {timeout}s:\n{text[-2000:]}")


class Background:
    """The stand-in in its own session/process group with stdout/stderr in files (children inherit them)."""

    def __init__(self, tmp_path: Path, *overrides: str, env: dict[str, str] | None = None) -> None:
        self.out = tmp_path / "stdout.txt"
        self.err = tmp_path / "stderr.txt"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, str(STANDIN), *overrides, f"hydra.run.dir={tmp_path / 'hydra_run'}"],
                cwd=tmp_path,
                env=env or _env(),
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        deadline = time.monotonic() + 5
        while _group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)


# -------------------------------------------------------------------------------------------------------------
# Config: verl's real ppo_trainer composed by Hydra
# -------------------------------------------------------------------------------------------------------------


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
# A healthy run: console lines, JSONL, metric names
# -------------------------------------------------------------------------------------------------------------


def test_a_healthy_run_prints_verls_step_lines_and_writes_the_same_steps_to_its_jsonl(tmp_path: Path) -> None:
    jsonl = tmp_path / "metrics.jsonl"
    start = time.monotonic()
    res = run_standin(
        tmp_path,
        "trainer.total_training_steps=5",
        "trainer.logger=[console,file]",
        "trainer.val_before_train=False",
        env=_env(VERL_FILE_LOGGER_PATH=str(jsonl)),
    )
    elapsed = time.monotonic() - start
    assert res.returncode == 0, res.stderr[-3000:]
    assert _steps(res.stdout) == [1, 2, 3, 4, 5]
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["step"] for r in records] == [1, 2, 3, 4, 5]
    for record in records:
        missing = [k for k in REQUIRED_METRICS if k not in record["data"]]
        assert not missing, missing
        assert record["data"]["training/global_step"] == record["step"]
    console = _console_metrics(res.stdout, 3)
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
    res = subprocess.run(args, cwd=tmp_path, env=_env(VERL_FILE_LOGGER_PATH=str(tmp_path / "m.jsonl")),
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
        env=_env(VERL_FILE_LOGGER_ROOT=str(tmp_path / "root")),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert _steps(res.stdout) == [0, 1, 2]
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
    assert _steps(res.stdout, PREFIX_V0) == [0, 1, 2]
    assert "Legacy trainer `main_ppo_v0.py` is deprecated" in res.stdout
    assert _console_metrics(res.stdout, 1)["actor/pg_loss"].startswith("np.float64(")


@pytest.mark.slow
def test_throughput_is_deterministic_and_depends_on_config(tmp_path: Path) -> None:
    def tput(*extra: str) -> list[float]:
        res = run_standin(tmp_path, "trainer.total_training_steps=3", "trainer.logger=[console]", *FAST, *extra)
        assert res.returncode == 0, res.stderr[-2000:]
        return [float(_console_metrics(res.stdout, s)["perf/throughput"]) for s in (1, 2, 3)]

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


# -------------------------------------------------------------------------------------------------------------
# Failures: verl's/Ascend's texts, exit codes, how far the run got
# -------------------------------------------------------------------------------------------------------------

DRIVER_FRAME = re.compile(
    r'File ".*/verl/trainer/main_ppo\.py", line \d+, in main\n    run_ppo\(config, task_runner_class='
)


@pytest.mark.parametrize(
    ("mode", "signatures", "steps"),
    [
        ("oom", ["ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunnerV1.run()",
                 "torch.OutOfMemoryError: NPU out of memory. Tried to allocate"], [0, 1]),
        ("vllm_cache_oom", ["ValueError: No available memory for the cache blocks. Try increasing "
                            "`gpu_memory_utilization`",
                            "RuntimeError: Engine core initialization failed. See root cause above."], []),
        ("vllm_startup_oom", ["ValueError: Free memory on device (",
                              ") on startup is less than desired GPU memory utilization (0.5, 30.48 GiB)."], []),
        ("hccl_timeout", ["EI0002", "The wait execution of the Notify register times out.",
                          "Watchdog caught collective operation timeout: WorkHCCL("], [0, 1]),
        ("hccl_connect_timeout", ["EI0006", "Getting socket times out. Reason: Remote Rank did not send the data in "
                                  "time.", "ray::WorkerDict.actor_rollout_init_model()"], []),
        ("ray_actor_died", ["ray.exceptions.RayTaskError(ActorDiedError)",
                            "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
                            "(raylet) A worker died or was killed while executing a task"], [0, 1]),
        ("no_devices", ["ValueError: Total available GPUs 0 is less than total desired GPUs 8"], []),
    ],
)
def test_failure_modes_print_signature_and_exit_1(
    tmp_path: Path, mode: str, signatures: list[str], steps: list[int]
) -> None:
    res = run_standin(
        tmp_path, f"+standin.mode={mode}", "trainer.total_training_steps=4", "trainer.logger=[console]", *FAST
    )
    assert res.returncode == 1, (res.returncode, res.stderr[-3000:])
    for text in signatures:
        assert text in res.stderr, f"{text!r} missing from stderr:\n{res.stderr[-3000:]}"
    assert _steps(res.stdout) == steps
    assert "Error executing job with overrides: [" in res.stderr
    assert "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace." in res.stderr
    assert DRIVER_FRAME.search(res.stderr), res.stderr[-3000:]


def test_no_devices_counts_all_nodes(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "+standin.mode=no_devices", "trainer.n_gpus_per_node=4", "trainer.nnodes=2")
    assert res.returncode == 1
    assert "Total available GPUs 0 is less than total desired GPUs 8" in res.stderr


def test_env_var_selects_mode(tmp_path: Path) -> None:
    via_env = run_standin(tmp_path, "trainer.total_training_steps=2", "trainer.logger=[console]", *FAST,
                          env=_env(VERL_STANDIN_MODE="oom", VERL_STANDIN_FAIL_AT_STEP="1"))
    assert via_env.returncode == 1 and "NPU out of memory" in via_env.stderr
    assert _steps(via_env.stdout) == [0]


def test_override_wins_over_env_var(tmp_path: Path) -> None:
    overridden = run_standin(tmp_path, "+standin.mode=ok", "trainer.total_training_steps=2", "trainer.logger=[console]",
                             *FAST, env=_env(VERL_STANDIN_MODE="oom"))
    assert overridden.returncode == 0


def test_fail_at_step_0_fails_during_worker_init(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "+standin.mode=oom", "+standin.fail_at_step=0", "trainer.logger=[console,file]",
                      env=_env(VERL_FILE_LOGGER_PATH=str(tmp_path / "m.jsonl")))
    assert res.returncode == 1
    assert "ray::WorkerDict.actor_rollout_init_model()" in res.stderr
    assert not (tmp_path / "m.jsonl").exists()  # verl builds its Tracking at fit() start, after init


def test_crash_dies_by_signal_after_logging_steps(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "+standin.mode=crash", "trainer.total_training_steps=4", "trainer.logger=[console]",
                      *FAST)
    assert res.returncode == -signal.SIGSEGV
    assert _steps(res.stdout) == [0, 1]
    assert "Fatal Python error: Segmentation fault" in res.stderr


def test_crash_signal_is_configurable(tmp_path: Path) -> None:
    abort = run_standin(tmp_path, "+standin.mode=crash", "+standin.signal=SIGABRT", "+standin.fail_at_step=1",
                        "trainer.logger=[console]", *FAST)
    assert abort.returncode == -signal.SIGABRT


def test_slow_start_delays_first_step(tmp_path: Path) -> None:
    start = time.monotonic()
    res = run_standin(tmp_path, "+standin.mode=slow_start", "+standin.startup_seconds=1.0",
                      "trainer.total_training_steps=1", "trainer.logger=[console]", *FAST)
    assert res.returncode == 0
    assert time.monotonic() - start >= 1.0
    assert _steps(res.stdout) == [0, 1]


# -------------------------------------------------------------------------------------------------------------
# Hangs and the process tree
# -------------------------------------------------------------------------------------------------------------


def test_hang_leaves_children_in_its_process_group(tmp_path: Path) -> None:
    run = Background(tmp_path, "+standin.mode=hang", "trainer.logger=[console]",
                     env=_env(VERL_REPLAY_BUFFER_DEBUG_INTERVAL_SECONDS="1"))
    try:
        err = _wait_for(run.err, "pending: 0, running: ")
        assert "INFO:" in err and "(TaskRunnerV1 pid=" in err
        members = _group_members(run.proc.pid)
        assert run.proc.pid in members and len(members) >= 3, members  # driver + "raylet" + "worker"
        # Killing only the leader orphans the Ray stand-ins: a product must kill the whole group.
        os.kill(run.proc.pid, signal.SIGKILL)
        assert run.proc.wait(timeout=10) == -signal.SIGKILL
        time.sleep(0.5)
        assert len(_group_members(run.proc.pid)) >= 2
        assert _steps(strip_ansi(run.out.read_text())) == []
    finally:
        run.kill_group()
    assert _group_members(run.proc.pid) == []


def test_stall_logs_steps_then_blocks_and_sigterm_exits_15(tmp_path: Path) -> None:
    run = Background(tmp_path, "+standin.mode=stall", "+standin.fail_at_step=3", "trainer.total_training_steps=5",
                     "trainer.logger=[console]", *FAST)
    try:
        _wait_for(run.out, ") step:2 - ")
        time.sleep(0.5)
        assert _steps(strip_ansi(run.out.read_text())) == [0, 1, 2]
        assert run.proc.poll() is None
        os.killpg(run.proc.pid, signal.SIGTERM)
        assert run.proc.wait(timeout=10) == 15  # Ray's driver SIGTERM handler: sys.exit(signum)
    finally:
        run.kill_group()
    assert _group_members(run.proc.pid) == []


def test_children_follow_a_crashed_leader(tmp_path: Path) -> None:
    run = Background(tmp_path, "+standin.mode=crash", "+standin.fail_at_step=1", "trainer.logger=[console]", *FAST)
    assert run.proc.wait(timeout=30) == -signal.SIGSEGV
    deadline = time.monotonic() + 5
    while _group_members(run.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group_members(run.proc.pid) == []  # Ray's fate sharing, except in hang/stall


# -------------------------------------------------------------------------------------------------------------
# MLflow, joined exactly like verl/utils/tracking.py
# -------------------------------------------------------------------------------------------------------------


def _mlflow_env(tmp_path: Path, run_id: str | None) -> tuple[dict[str, str], str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    extra = {"MLFLOW_TRACKING_URI": uri}
    if run_id:
        extra["MLFLOW_RUN_ID"] = run_id
    return _env(**extra), uri


def _new_run(uri: str) -> str:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    return client.create_run(client.create_experiment("sweep"), run_name="trial-0").info.run_id


@pytest.mark.slow
def test_mlflow_run_id_joins_existing_run(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    _, uri = _mlflow_env(tmp_path, None)
    run_id = _new_run(uri)
    env, _ = _mlflow_env(tmp_path, run_id)
    res = run_standin(tmp_path, "trainer.total_training_steps=4", "trainer.logger=[console,mlflow,file]", *FAST,
                      env=dict(env, VERL_FILE_LOGGER_PATH=str(tmp_path / "m.jsonl")))
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"  # verl 0.9.1: TaskRunnerV1's finally -> Tracking.finish -> end_run()
    history = client.get_metric_history(run_id, "perf/throughput")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]
    for key in REQUIRED_METRICS:
        assert key in run.data.metrics
    assert "val-core/openai/gsm8k/acc/mean_at_1" in run.data.metrics  # verl's key sanitising
    params = run.data.params
    assert params["actor_rollout_ref/rollout/gpu_memory_utilization"] == "0.5"
    assert params["trainer/logger/list_len"] == "3" and params["trainer/logger/1"] == "mlflow"
    assert params["trainer/total_training_steps"] == "4"
    assert not [k for k in params if "standin" in k]
    assert len(client.search_runs([run.info.experiment_id])) == 1  # joined, did not create another run


@pytest.mark.slow
def test_mlflow_without_run_id_uses_project_and_experiment_names(tmp_path: Path) -> None:
    from mlflow.tracking import MlflowClient

    env, uri = _mlflow_env(tmp_path, None)
    res = run_standin(tmp_path, "trainer.total_training_steps=1", "trainer.logger=[mlflow]", *FAST,
                      "trainer.project_name=proj", "trainer.experiment_name=exp1", env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("proj")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "exp1"
    assert "step:" not in res.stdout  # no console backend requested


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "status", "has_metrics"),
    [("oom", "FINISHED", True), ("crash", "RUNNING", True), ("no_devices", "RUNNING", False)],
)
def test_a_failed_run_leaves_the_mlflow_run_it_joined_in_the_status_verl_leaves_it(
    tmp_path: Path, mode: str, status: str, has_metrics: bool
) -> None:
    from mlflow.tracking import MlflowClient

    _, uri = _mlflow_env(tmp_path, None)
    run_id = _new_run(uri)
    env, _ = _mlflow_env(tmp_path, run_id)
    res = run_standin(tmp_path, f"+standin.mode={mode}", "trainer.total_training_steps=3",
                      "trainer.logger=[console,mlflow]", *FAST, env=env)
    assert res.returncode != 0
    run = MlflowClient(uri).get_run(run_id)
    assert run.info.status == status
    assert bool(run.data.metrics) is has_metrics


# -------------------------------------------------------------------------------------------------------------
# Packaging
# -------------------------------------------------------------------------------------------------------------


def test_runs_as_module_from_repo_root(tmp_path: Path) -> None:
    res = _plain(subprocess.run(
        [sys.executable, "-m", "tests.standin.verl_standin", "trainer.total_training_steps=1",
         "trainer.logger=[console]", *FAST, f"hydra.run.dir={tmp_path / 'hydra_run'}"],
        cwd=REPO, env=_env(), capture_output=True, text=True, timeout=120, check=False,
    ))
    assert res.returncode == 0, res.stderr[-3000:]
    assert _steps(res.stdout) == [0, 1]


def test_ray_colours_are_printed_as_ray_does_by_default_and_not_with_ray_color_prefix_0(tmp_path: Path) -> None:
    args = ("+standin.mode=oom", "trainer.total_training_steps=3", "trainer.logger=[console]", *FAST)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    coloured = run_standin(tmp_path / "a", *args, raw=True)
    assert "\x1b[36m(TaskRunnerV1 pid=" in coloured.stdout
    assert "\x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid=" in coloured.stderr
    plain = run_standin(tmp_path / "b", *args, env=_env(RAY_COLOR_PREFIX="0"), raw=True)
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
