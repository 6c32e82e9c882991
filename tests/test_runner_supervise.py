"""Process supervision and the runner loop, with tiny scripts as the trial (fast, no verl, no MLflow)."""
from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from verlsweep.command.compose import build_command, compose_config
from verlsweep.common import processes
from verlsweep.common.names import TRIAL_DIR_ENV
from verlsweep.common.result import NullReporter
from verlsweep.prepare import prepare
from verlsweep.trial.runners import get_runner
from verlsweep.trial.runners.process import actor_env_args, resolve_entrypoint
from verlsweep.trial.supervise import MARK_ENV, Supervised, ray_isolation, remove_tree

# Leaves a grandchild in its own session (outside the process group), like a daemonised helper.
ESCAPER = textwrap.dedent("""
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    print("child", child.pid, flush=True)
    if sys.argv[1] == "exit":
        sys.exit(0)
    time.sleep(120)
""")

STUBBORN = textwrap.dedent("""
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print("ready", flush=True)
    time.sleep(120)
""")


def start(tmp_path: Path, script: str, *args: str, lines: list[str] | None = None) -> Supervised:
    path = tmp_path / "script.py"
    path.write_text(script)
    sink = lines if lines is not None else []
    return Supervised([sys.executable, str(path), *args], dict(os.environ), tmp_path, tmp_path / "trial.log",
                      sink.append)


def wait_for_line(lines: list[str], prefix: str, timeout: float = 10) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in lines:
            if line.startswith(prefix):
                return line
        time.sleep(0.02)
    raise AssertionError(f"no line starting with {prefix!r} in {lines}")


def test_stop_kills_the_process_group_and_a_descendant_that_left_it(tmp_path):
    lines: list[str] = []
    sup = start(tmp_path, ESCAPER, "stay", lines=lines)
    child = int(wait_for_line(lines, "child").split()[1])
    assert os.getpgid(child) != sup.pgid
    sup.stop(grace_s=2)
    sup.close(grace_s=2)
    assert not processes.pid_alive(child)
    assert sup.proc.returncode is not None


def test_close_after_a_normal_exit_stops_processes_the_trial_left_behind(tmp_path):
    lines: list[str] = []
    sup = start(tmp_path, ESCAPER, "exit", lines=lines)
    assert sup.wait(10) == 0
    child = int(wait_for_line(lines, "child").split()[1])
    assert processes.pid_alive(child)
    assert sup.close(grace_s=2) == [child]
    assert not processes.pid_alive(child)


def test_a_process_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path):
    lines: list[str] = []
    sup = start(tmp_path, STUBBORN, lines=lines)
    wait_for_line(lines, "ready")
    began = time.monotonic()
    sup.stop(grace_s=1)
    sup.close(grace_s=1)
    assert sup.proc.returncode == -9
    assert 1 <= time.monotonic() - began < 10


def test_output_goes_to_the_log_file_and_the_line_callback(tmp_path):
    lines: list[str] = []
    sup = start(tmp_path, "print('hello'); import sys; print('oops', file=sys.stderr)", lines=lines)
    sup.wait(10)
    sup.close(grace_s=1)
    assert sorted(lines) == ["hello\n", "oops\n"]
    assert sorted((tmp_path / "trial.log").read_text().splitlines()) == ["hello", "oops"]


def test_trial_processes_carry_the_marker_variable(tmp_path):
    lines: list[str] = []
    sup = start(tmp_path, f"import os; print(os.environ['{MARK_ENV}'])", lines=lines)
    sup.wait(10)
    sup.close(grace_s=1)
    assert lines == [sup.mark + "\n"]


def test_ray_gets_a_private_temp_dir_and_never_an_inherited_address():
    env = {"RAY_ADDRESS": "10.0.0.1:6379"}
    tmp = ray_isolation(env, None)
    try:
        assert "RAY_ADDRESS" not in env
        assert env["RAY_TMPDIR"] == tmp and os.path.isdir(tmp)
        assert len(tmp) < 40       # Ray's unix sockets live below it (path limit ~107 bytes)
    finally:
        remove_tree(tmp)
    configured = {}
    assert ray_isolation(configured, "auto") is None
    assert configured == {"RAY_ADDRESS": "auto", "RAY_COLOR_PREFIX": "0"}


def test_the_trial_gets_ray_color_prefix_0_whether_or_not_it_has_its_own_ray():
    for address in (None, "auto"):
        env = {"RAY_COLOR_PREFIX": "1"}
        remove_tree(ray_isolation(env, address))
        assert env["RAY_COLOR_PREFIX"] == "0"


def test_with_ray_address_the_trial_env_reaches_verls_actors_through_the_runtime_env(tmp_path):
    cfg = compose_config(["validate.verl=false", "tracking.enabled=false", "runner.ray_address=10.0.0.1:6379",
                          "env.HCCL_EXEC_TIMEOUT=3600", "+verl.ray_kwargs.ray_init.runtime_env.env_vars.KEEP=mine",
                          "+env.KEEP=ours"])
    trial = build_command(cfg, require_paths=False)
    env = {"MLFLOW_RUN_ID": "abc123", "MLFLOW_TRACKING_URI": "sqlite:////x/mlflow.db",
           "VERL_FILE_LOGGER_PATH": "/x/metrics.jsonl"}
    args = actor_env_args(trial, env, trial.argv, tmp_path)
    prefix = "+ray_kwargs.ray_init.runtime_env.env_vars."
    assert f"{prefix}MLFLOW_RUN_ID='abc123'" in args
    assert f"{prefix}MLFLOW_TRACKING_URI='sqlite:////x/mlflow.db'" in args
    assert f"{prefix}VERL_FILE_LOGGER_PATH='/x/metrics.jsonl'" in args
    assert f"{prefix}HCCL_EXEC_TIMEOUT='3600'" in args          # quoted: Ray takes only string values
    assert not any(a.startswith(f"{prefix}KEEP=") for a in args)   # the command's own value stands
    # what verl's run_ppo does with them: Hydra parses the overrides, runtime_env.env_vars are strings
    from hydra.core.override_parser.overrides_parser import OverridesParser
    parsed = {o.key_or_group: o.value() for o in OverridesParser.create().parse_overrides(args)}
    assert parsed["ray_kwargs.ray_init.runtime_env.env_vars.HCCL_EXEC_TIMEOUT"] == "3600"
    assert parsed["ray_kwargs.ray_init.runtime_env.env_vars.MLFLOW_TRACKING_URI"] == "sqlite:////x/mlflow.db"


def test_with_ray_address_a_credential_in_the_trial_env_is_refused_naming_it(tmp_path):
    from verlsweep.common.errors import ConfigError

    cfg = compose_config(["validate.verl=false", "tracking.enabled=false", "runner.ray_address=auto",
                          "+env.HF_TOKEN=hf_secret"])
    trial = build_command(cfg, require_paths=False)
    with pytest.raises(ConfigError, match="env.HF_TOKEN") as err:
        actor_env_args(trial, {}, trial.argv, tmp_path)
    assert "hf_secret" not in str(err.value)


def test_entrypoint_python_is_this_interpreter_and_relative_files_become_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    argv = resolve_entrypoint(["python", "train.py", "data.x=train.py"], 2)
    assert argv == [sys.executable, str(tmp_path / "train.py"), "data.x=train.py"]


def test_unknown_runner_name_lists_the_known_ones():
    from verlsweep.common.errors import ConfigError

    with pytest.raises(ConfigError, match="verl, script, estimate"):
        get_runner("slurm")


# ---- the runner loop (verl runner, a fake trainer script as entrypoint)

FAKE_TRAINER = textwrap.dedent("""
    import json, os, sys, time
    mode = sys.argv[1]
    if mode == "warn_then_train":          # a warning while loading, then a start longer than the stall limit
        print("(WorkerDict pid=8) WARNING: Failed to allocate pinned buffer, retrying", flush=True)
        time.sleep(3)
    with open(os.environ["VERL_FILE_LOGGER_PATH"], "wb", buffering=0) as fh:
        for step in range(1, 6):
            data = {"perf/throughput": 100.0 * step, "actor/perf/max_memory_allocated_gb": 20.0 + step,
                    "actor/perf/max_memory_reserved_gb": 30.0 + step}
            if mode != "console_only":
                fh.write((json.dumps({"step": step, "data": data}) + "\\n").encode())
            print(f"(TaskRunnerV1 pid=7) step:{step} - perf/throughput:np.float64({100.0 * step})", flush=True)
            if mode == "oom_linger" and step == 2:
                print("Traceback (most recent call last):", flush=True)
                print('  File "engine_workers.py", line 1, in update_actor', flush=True)
                print("torch.OutOfMemoryError: NPU out of memory. Tried to allocate 2.00 GiB", flush=True)
                time.sleep(120)            # a driver waiting on dead actors
            time.sleep(0.05 if mode != "slow" else 1.0)
""")


class PruneAt:
    def __init__(self, step: int):
        self.step, self.seen = step, []

    def report(self, step: int, value: float) -> bool:
        self.seen.append((step, value))
        return step >= self.step


def run_fake(tmp_path: Path, mode: str, reporter=None, *overrides: str):
    script = tmp_path / "fake_trainer.py"
    script.write_text(FAKE_TRAINER)
    cfg = compose_config(["validate.verl=false", "tracking.enabled=false", "runner.grace_period=2",
                          f"runner.entrypoint=[python,{script},{mode}]", *overrides])
    prepared = prepare(cfg, dry=True, overrides=[])
    out = prepared.runner.run(prepared.spec, reporter or NullReporter(), {TRIAL_DIR_ENV: str(tmp_path / "trial")})
    return out.result, out.details


def test_completed_trial_reports_every_step_and_aggregates_after_warmup(tmp_path):
    reporter = PruneAt(step=99)
    result, details = run_fake(tmp_path, "ok", reporter)
    assert result.outcome == "completed" and result.steps == 5
    assert reporter.seen == [(s, 100.0 * s) for s in range(1, 6)]
    assert result.objective == pytest.approx(350.0)            # mean of steps 2..5
    assert result.peak_memory_gb == 25.0      # allocated, not the larger reserved
    assert (tmp_path / "trial" / "trial.log").is_file() and (tmp_path / "trial" / "metrics.jsonl").is_file()
    assert details.reason == "exit 0"


def test_console_lines_are_the_fallback_when_the_file_logger_is_off(tmp_path):
    result, _ = run_fake(tmp_path, "console_only", None, "objective.aggregate=last")
    assert result.outcome == "completed" and result.steps == 5 and result.objective == 500.0
    assert result.peak_memory_gb is None          # the console line carried no memory metric


def test_prune_stops_the_trial_at_the_step_the_sweeper_says(tmp_path):
    reporter = PruneAt(step=2)
    result, _ = run_fake(tmp_path, "slow", reporter)
    assert result.outcome == "pruned"
    assert [s for s, _ in reporter.seen] == [1, 2]
    # stopped, not run to its end: the trainer's last step would come 3 s after the prune
    assert "step:5" not in (tmp_path / "trial" / "trial.log").read_text()


def test_a_fatal_error_and_then_no_progress_for_the_stall_limit_stops_the_trial_and_classifies_it(tmp_path):
    result, details = run_fake(tmp_path, "oom_linger", None, "runner.stall_timeout=1.5")
    assert result.outcome == "oom" and result.steps == 2
    assert "NPU out of memory" in result.excerpt
    assert result.duration_s < 10
    assert "after a fatal error" in details.reason
    assert (tmp_path / "trial" / "excerpt.txt").read_text().startswith("# oom: npu out of memory")


def test_a_warning_never_stops_a_trial_whose_start_outlasts_the_stall_limit(tmp_path):
    # a warning taken for a fatal text would stop it 1.5 s after it was printed, before the first step
    result, _ = run_fake(tmp_path, "warn_then_train", None, "runner.stall_timeout=1.5", "runner.startup_timeout=60")
    assert result.outcome == "completed" and result.steps == 5


# ---- runner=script: a recipe script run as it is, its knobs through the variables it reads, else "$@"

RECIPE = """#!/usr/bin/env bash
# what a verl-ascend-recipe script does: env-overridable knobs, then "$@" forwarded to verl
ROLLOUT_TP=${ROLLOUT_TP:-2}
ROLLOUT_GPU_MEM_UTIL=${ROLLOUT_GPU_MEM_UTIL:-0.6}
echo "recipe tp=$ROLLOUT_TP util=$ROLLOUT_GPU_MEM_UTIL args=$*"
python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=/models/tiny algorithm.adv_estimator=grpo \\
    actor_rollout_ref.rollout.tensor_model_parallel_size=$ROLLOUT_TP \\
    actor_rollout_ref.rollout.gpu_memory_utilization=$ROLLOUT_GPU_MEM_UTIL "$@"
"""


def test_script_runner_runs_the_script_with_its_knobs_by_its_own_routes(tmp_path):
    trainer = tmp_path / "fake_trainer.py"
    trainer.write_text(FAKE_TRAINER)
    fake_bin = tmp_path / "bin"           # the node's python3: here a trainer that prints steps
    fake_bin.mkdir()
    (fake_bin / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} {trainer} ok\n")
    (fake_bin / "python3").chmod(0o755)
    script = tmp_path / "run_recipe.sh"
    script.write_text(RECIPE)
    knobs = ["verl.actor_rollout_ref.rollout.gpu_memory_utilization=0.45",
             f"+env.PATH={fake_bin}{os.pathsep}{os.environ['PATH']}"]
    cfg = compose_config(["validate.verl=false", "tracking.enabled=false", "runner=script",
                          f"runner.script={script}", *knobs])
    # the knobs runner=script sets: this job's verl overrides, as Hydra's hydra.overrides.task lists them
    prepared = prepare(cfg, dry=True, overrides=knobs)
    assert prepared.spec.verl["actor_rollout_ref.rollout.gpu_memory_utilization"] == 0.45
    result = prepared.runner.run(prepared.spec, NullReporter(), {TRIAL_DIR_ENV: str(tmp_path / "trial")}).result
    assert result.outcome == "completed" and result.backend == "script"
    first = (tmp_path / "trial" / "trial.log").read_text().splitlines()[0]
    assert first.startswith("recipe tp=2 util=0.45 args=")         # the variable it reads; its own TP
    args = first.split("args=", 1)[1].split()
    assert "trainer.total_training_steps=5" in args                # runner.always: the trial's length
    assert not any(a.startswith("actor_rollout_ref.rollout.gpu_memory_utilization=") for a in args)  # via env
    assert not any(a.startswith("algorithm.") for a in args)       # the script's own values stand


def test_script_runner_without_a_script_names_the_key_before_anything_launches():
    from verlsweep.common.errors import ConfigError

    cfg = compose_config(["validate.verl=false", "tracking.enabled=false", "runner=script", "runner.script=null"])
    with pytest.raises(ConfigError, match="runner.script"):
        prepare(cfg, dry=True, overrides=[])
