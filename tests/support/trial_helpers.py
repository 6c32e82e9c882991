"""Shared by the runner/tracking tests: an MLflow store per test, `python sweep.py` in a subprocess,
and a check that no process of a test's trials is left."""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import requests
from mlflow.tracking import MlflowClient

from verlsweep.common.processes import is_alive, own_processes

REPO = Path(__file__).resolve().parents[2]
STANDIN = REPO / "tests" / "support" / "standin" / "verl_standin.py"
TEST_MARK = "VERLSWEEP_TEST_MARK"     # inherited by every process a test's sweep starts


def copy_store(template: Path, dst_dir: Path) -> str:
    path = dst_dir / "mlflow.db"
    shutil.copy(template, path)
    return f"sqlite:///{path}"


def tiny_overrides(model_dir: Path, data_dir: Path, out_dir: Path, uri: str) -> list[str]:
    """A trial of the tiny fixture model on a2_64g that our rules and verl's accept."""
    return [
        "hardware=a2_64g", "model=qwen3_0_6b", f"model.path={model_dir}", f"data.dir={data_dir}",
        "verl.data.train_batch_size=8", "verl.actor_rollout_ref.actor.ppo_mini_batch_size=8",
        "verl.data.max_prompt_length=64", "verl.data.max_response_length=64",
        f"paths.output_root={out_dir}", f"tracking.uri={uri}", "plan.enforce=false", NO_CONFIRM,
    ]


def standin_entrypoint() -> str:
    return f"runner.entrypoint=[python,{STANDIN}]"


# report.html and plots/ cost seconds of plotting per draw: drawn only for the tests that read them
NO_REPORT = "study.report=false"
# verl's own compose and validate_config before launch import verl (torch, transformers, tensordict): over
# ten seconds of CPU per sweep process. Tests of that check ask for it (verl_check=True or validate.verl=...);
# the stand-in composes verl's real config itself, as verl does, so a command verl refuses still fails there.
NO_VERL_CHECK = "validate.verl=false"
# the long-run confirmations add trials after the ordinary ones; the tests of other features count trials,
# so their sweeps run without them (tests/e2e/test_long_run_confirmation.py asks for them)
NO_CONFIRM = "study.long_run.confirm=0"


def without_confirmations(args: list[str]) -> list[str]:
    return args if any(a.startswith("study.long_run.confirm=") for a in args) else [*args, NO_CONFIRM]


def run_sweep(cwd: Path, args: list[str], mark: str, *, multirun: bool = False, timeout: float = 600,
              env: dict[str, str] | None = None, report: bool = False, verl_check: bool = False
              ) -> subprocess.CompletedProcess:
    # a sweep's trials read stand-in knobs from their environment (the `env` group); `+standin.<knob>`
    # would only land in the sweep's own config and never reach a trial
    dead = [a for a in args if a.lstrip("+").startswith("standin.")]
    assert not dead, f"{dead}: give a sweep's stand-in knobs as +env.VERL_STANDIN_<KNOB>=<value>"
    if multirun and not report and "hydra/sweeper=basic" not in args:
        args = [*args, NO_REPORT]
    if not verl_check and not any(a.startswith("validate.verl=") for a in args):
        args = [*args, NO_VERL_CHECK]
    if multirun:
        args = without_confirmations(args)
    full_env = dict(os.environ)
    full_env.pop("MLFLOW_TRACKING_URI", None)
    full_env.pop("MLFLOW_RUN_ID", None)
    full_env[TEST_MARK] = mark
    full_env.update(env or {})
    argv = [sys.executable, str(REPO / "sweep.py"), *(["-m"] if multirun else []), *args]
    return subprocess.run(argv, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def new_mark() -> str:
    return uuid.uuid4().hex


def survivors(mark: str) -> list[str]:
    """Processes still carrying the test's mark (the sweep itself has exited by then)."""
    found = []
    for proc in own_processes():      # fresh psutil objects: a cached one can hide a recycled pid's process
        try:
            if proc.environ().get(TEST_MARK) == mark and is_alive(proc):
                found.append(f"{proc.pid} {' '.join(proc.cmdline())[:200]}")
        except (psutil.Error, OSError):
            continue
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve(backend_uri: str, tmp_path: Path) -> Iterator[str]:
    """`mlflow server` on 127.0.0.1 (a free port) for `backend_uri`; its URL, stopped on exit."""
    port = free_port()
    cmd = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", backend_uri, "--artifacts-destination", str(tmp_path / "server-artifacts")]
    # MLflow 3's server also starts seven huey job consumers for its GenAI jobs (mlflow/server/__init__.py,
    # MLFLOW_SERVER_ENABLE_JOB_EXECUTION); tracking needs none, and each costs a Python start on 2 cores
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    with _server(cmd, f"http://127.0.0.1:{port}", "/health", tmp_path / "server.log", env) as uri:
        yield uri


@contextlib.contextmanager
def serve_dashboard(storage: str, tmp_path: Path) -> Iterator[str]:
    """optuna-dashboard (the `ui` extra) on 127.0.0.1 for an Optuna storage URL; its URL, stopped on exit.
    Started through its CLI's entry function: the console script is not on PATH inside a venv run by path."""
    port = free_port()
    code = "import sys; from optuna_dashboard._cli import main; sys.exit(main())"
    cmd = [sys.executable, "-c", code, storage, "--host", "127.0.0.1", "--port", str(port)]
    with _server(cmd, f"http://127.0.0.1:{port}", "/api/studies", tmp_path / "dashboard.log") as uri:
        yield uri


@contextlib.contextmanager
def _server(cmd: list[str], uri: str, ready_path: str, log_path: Path, env: dict[str, str] | None = None
            ) -> Iterator[str]:
    log = log_path.open("w")
    proc = subprocess.Popen(cmd, cwd=log_path.parent, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env=env)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(uri + ready_path, timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None, log_path.read_text()[-3000:]
            assert time.monotonic() < deadline, f"{uri} did not come up: {log_path.read_text()[-3000:]}"
            time.sleep(0.5)
        yield uri
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


# Hydra's basic sweeper lists values; the default search space (group `sweep`) is the Optuna sweeper's.
BASIC = ["~space", "hydra/sweeper=basic"]
UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization=0.55"


def child_runs(uri: str, parent: str) -> dict[str, object]:
    """Child runs of `parent` by the stand-in mode they ran (else by their rollout util)."""
    client = MlflowClient(uri)
    exp = client.get_run(parent).info.experiment_id
    runs = client.search_runs([exp], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    util = "actor_rollout_ref.rollout.gpu_memory_utilization"
    return {r.data.params.get("env.VERL_STANDIN_MODE", r.data.params.get(util)): r for r in runs}


def mode_sweep(work: Path, base: list[str], study: str, modes: list[str], args: list[str]) -> dict:
    """`python sweep.py -m` with Hydra's basic sweeper: one stand-in trial per VERL_STANDIN_MODE, nested
    under a parent run created as the sweeper creates it. Its process, parent, child runs by mode, mark."""
    from verlsweep.command.compose import compose_config
    from verlsweep.tracking import sweep_run

    uri = next(a.split("=", 1)[1] for a in base if a.startswith("tracking.uri="))
    parent = sweep_run.start_sweep_run(compose_config(base), study, {"env.VERL_STANDIN_MODE": modes}, sampler="basic")
    mark = new_mark()
    proc = run_sweep(work, [*base, *BASIC, UTIL, f"tracking.parent_run_id={parent}", *args,
                            "+env.VERL_STANDIN_MODE=" + ",".join(modes)], mark, multirun=True)
    return {"proc": proc, "uri": uri, "parent": parent, "runs": child_runs(uri, parent), "mark": mark, "work": work}
