"""The stand-in's failure modes: verl's/Ascend's/Ray's texts (tests/support/standin/failure_texts.py), exit
codes, how far the run got, modes chosen by knob or env var."""
from __future__ import annotations

import re
import signal
import time
from pathlib import Path

import pytest

from tests.support.standin_runs import FAST, clean_env, run_standin, steps_of

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
    assert steps_of(res.stdout) == steps
    assert "Error executing job with overrides: [" in res.stderr
    assert "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace." in res.stderr
    assert DRIVER_FRAME.search(res.stderr), res.stderr[-3000:]


def test_no_devices_counts_all_nodes(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "+standin.mode=no_devices", "trainer.n_gpus_per_node=4", "trainer.nnodes=2")
    assert res.returncode == 1
    assert "Total available GPUs 0 is less than total desired GPUs 8" in res.stderr


def test_env_var_selects_mode(tmp_path: Path) -> None:
    via_env = run_standin(tmp_path, "trainer.total_training_steps=2", "trainer.logger=[console]", *FAST,
                          env=clean_env(VERL_STANDIN_MODE="oom", VERL_STANDIN_FAIL_AT_STEP="1"))
    assert via_env.returncode == 1 and "NPU out of memory" in via_env.stderr
    assert steps_of(via_env.stdout) == [0]


def test_override_wins_over_env_var(tmp_path: Path) -> None:
    overridden = run_standin(tmp_path, "+standin.mode=ok", "trainer.total_training_steps=2", "trainer.logger=[console]",
                             *FAST, env=clean_env(VERL_STANDIN_MODE="oom"))
    assert overridden.returncode == 0


def test_fail_at_step_0_fails_during_worker_init(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "+standin.mode=oom", "+standin.fail_at_step=0", "trainer.logger=[console,file]",
                      env=clean_env(VERL_FILE_LOGGER_PATH=str(tmp_path / "m.jsonl")))
    assert res.returncode == 1
    assert "ray::WorkerDict.actor_rollout_init_model()" in res.stderr
    assert not (tmp_path / "m.jsonl").exists()  # verl builds its Tracking at fit() start, after init


def test_crash_dies_by_signal_after_logging_steps(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "+standin.mode=crash", "trainer.total_training_steps=4", "trainer.logger=[console]",
                      *FAST)
    assert res.returncode == -signal.SIGSEGV
    assert steps_of(res.stdout) == [0, 1]
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
    assert steps_of(res.stdout) == [0, 1]
