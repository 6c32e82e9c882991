"""HTTP tracking: a real `mlflow server` on 127.0.0.1, started and stopped by the test."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest
import requests
from mlflow.tracking import MlflowClient

from tests.trial_helpers import new_mark, run_sweep, standin_entrypoint, survivors, tiny_overrides
from verlsweep.tracking import mlflow_runs as tracking
from verlsweep.command.compose import compose_config

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serve(backend_uri: str, tmp_path: Path) -> Iterator[str]:
    """`mlflow server` on 127.0.0.1 (a free port) for `backend_uri`; its URL, stopped on exit."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", backend_uri, "--artifacts-destination", str(tmp_path / "server-artifacts")],
        cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{uri}/health", timeout=2).ok:
                    break
            except requests.RequestException:
                pass
            assert proc.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "mlflow server did not come up"
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


@pytest.fixture
def mlflow_server(tmp_path):
    with serve(f"sqlite:///{tmp_path / 'server.db'}", tmp_path) as uri:
        yield uri


def test_trial_tracked_over_http_nests_under_its_sweep_with_verls_metrics(mlflow_server, tiny_model_dir, gsm8k_dir,
                                                                         tmp_path):
    base = tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", mlflow_server)
    parent = tracking.start_sweep_run(compose_config(base), "http-study", {"verl.trainer.total_training_steps": [2]})
    mark = new_mark()
    proc = run_sweep(tmp_path, [*base, standin_entrypoint(), "validate.verl=false", "trial.steps=3",
                                f"tracking.parent_run_id={parent}"], mark)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    client = MlflowClient(mlflow_server)
    exp = client.get_experiment_by_name("http-study")
    (child,) = client.search_runs([exp.experiment_id], filter_string=f"tags.`mlflow.parentRunId` = '{parent}'")
    assert child.info.status == "FINISHED"
    assert child.data.tags["trial.outcome"] == "completed"
    assert [m.step for m in client.get_metric_history(child.info.run_id, "perf/throughput")] == [1, 2, 3]
    assert {"command.sh", "command.json", "log_tail.txt"} <= {a.path for a in client.list_artifacts(child.info.run_id)}
    text = Path(client.download_artifacts(child.info.run_id, "command.json", str(tmp_path / "dl"))).read_text()
    assert "verl_standin.py" in text
    assert survivors(mark) == []
