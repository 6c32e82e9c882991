"""Shared pytest fixtures for verlsweep's tests."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.support.fixtures.tiny_verl import make_gsm8k_parquet, make_tiny_qwen3
from tests.support.trial_helpers import copy_store, serve

# The planner traces the trainer from the model code by default (plan.trainer, conf/sweep.yaml): seconds per
# new shape. The suite plans with the analytic formula, in this process and in the sweeps it starts, unless
# a test asks for the trace (tests/test_trainer_trace.py).
os.environ.setdefault("VERLSWEEP_PLAN_TRAINER", "analytic")
# Sweeps calibrate the planner on the trials their tracking store holds of this stack (plan.calibrate): a
# test whose store outlives one sweep would plan its next sweep with what the stand-in measured. Off in
# the suite, unless a test asks for it (tests/e2e/test_calibrated_sweeps.py, tests/test_plan_stack_calibration.py).
os.environ.setdefault("VERLSWEEP_PLAN_CALIBRATE", "false")


def pytest_configure(config: pytest.Config) -> None:
    """One verlsweep cache directory for the whole run (verlsweep.common.disk_cache), empty at its start
    and shared by the xdist workers and every process they start, as one machine's is: nothing read from
    or left in the user's ~/.cache, and no run faster for what an earlier run cached."""
    if hasattr(config, "workerinput") or "VERLSWEEP_CACHE" in os.environ:
        return                                     # a worker: the controller set it before starting them
    os.environ["VERLSWEEP_CACHE"] = config._verlsweep_cache = tempfile.mkdtemp(prefix="verlsweep-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    made = getattr(config, "_verlsweep_cache", None)
    if made:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop("VERLSWEEP_CACHE", None)


@pytest.fixture(autouse=True)
def _no_hydra_job_left_set():
    """A test that sets Hydra's process-wide job config (HydraConfig) must unset it: code that asks
    whether it runs inside a Hydra job (verlsweep.command.knobs.job_overrides) would otherwise answer
    for whichever test ran before it on the same xdist worker. The leak fails the test that made it."""
    from hydra.core.hydra_config import HydraConfig

    yield
    if HydraConfig.initialized():
        HydraConfig.instance().cfg = None
        pytest.fail("the test left Hydra's job config (HydraConfig) set; unset it in its teardown")


# Tests that start Ray or Slurm daemons run one at a time on one pytest-xdist worker (`--dist loadgroup`,
# pyproject.toml): two local Ray instances reach for the same default agent ports (Ray's dashboard agent
# listens on 52365 unless told otherwise), and the real Slurm cluster is one per session (a worker's).
ONE_AT_A_TIME = {"test_real_verl.py", "test_runner_real_verl.py", "test_ray_watch_sweep.py",
                 "test_ray_cluster_processes.py", "test_slurm_sweep.py"}


def _module_fixture(item: pytest.Item) -> str | None:
    """The first module-scoped fixture of the test's own module that the test uses (e.g. a whole sweep run
    once for several tests), or None."""
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info is not None else None
        if defs and defs[-1].scope == "module" and defs[-1].baseid == item.nodeid.split("::", 1)[0]:
            return name
    return None


@pytest.hookimpl(tryfirst=True)    # before xdist reads the groups (its own hook, loadgroup)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Spread the suite over the xdist workers: the Ray/Slurm tests in one group; the tests sharing a
    module-scoped fixture in one group each, so the fixture (often a whole sweep) is built once rather than
    once per worker. Order (xdist hands out the groups in it: `--no-loadscope-reorder`, pyproject.toml): the
    Ray/Slurm group first, as its tests mostly wait on daemons and jobs while the other worker's use the CPU;
    then the other slow tests, so the long ones start early and the quick ones fill the end (`-n 0` runs them
    in this order too)."""
    for item in items:
        if item.path.name in ONE_AT_A_TIME:
            item.add_marker(pytest.mark.xdist_group("ray_slurm"))
        elif (shared := _module_fixture(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(f"{item.path.stem}.{shared}"))
    items.sort(key=lambda item: (item.path.name not in ONE_AT_A_TIME, item.get_closest_marker("slow") is None))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen3 checkpoint with a local tokenizer (see tests/support/fixtures/tiny_verl.py)."""
    return make_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))


@pytest.fixture(scope="session")
def gsm8k_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding GSM8K-format ``train.parquet`` and ``test.parquet``."""
    data_dir = tmp_path_factory.mktemp("gsm8k")
    make_gsm8k_parquet(data_dir)
    return data_dir


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An initialised, empty sqlite store (creating the schema takes seconds; copying it does not)."""
    path = tmp_path_factory.mktemp("mlflow_template") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def store(empty_mlflow_db: Path, tmp_path: Path) -> str:
    """A fresh sqlite MLflow store for one test."""
    return copy_store(empty_mlflow_db, tmp_path)


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A real single-node Slurm with accounting (tests/support/slurm_cluster.py), for the whole session."""
    from tests.support.slurm_cluster import SlurmCluster, missing

    reason = missing()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


@pytest.fixture
def mlflow_server(tmp_path):
    """A real `mlflow server` on 127.0.0.1 with its own sqlite store, stopped after the test."""
    with serve(f"sqlite:///{tmp_path / 'server.db'}", tmp_path) as uri:
        yield uri
