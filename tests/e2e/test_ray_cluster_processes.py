"""The Ray cluster of a multi-node trial with real Ray processes: two nodes faked by `srun`/`scontrol`
(tests/support/fake_slurm/), and a head-only cluster inside a job of the real single-node Slurm
(tests/support/slurm_cluster.py). Not one Ray process may be left (the choices: tests/test_ray_cluster.py)."""
from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from tests.support.trial_helpers import REPO
from verlsweep.trial import ray_cluster
from verlsweep.trial.supervise import ray_isolation, remove_tree

FAKE_BIN = REPO / "tests" / "support" / "fake_slurm"


def _ray_processes(tmp: str) -> list[str]:
    """Processes of the Ray instance that lives under the private temp dir `tmp`."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("RAY_TMPDIR") == tmp or tmp in " ".join(proc.info["cmdline"] or []):
                found.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])[:150]}")
        except (psutil.Error, OSError):
            continue
    return found

@pytest.mark.slow
def test_two_node_cluster_starts_head_and_worker_by_srun_registers_every_device_and_stops_all(tmp_path):
    calls = tmp_path / "srun_calls.txt"
    env = {**os.environ, "PATH": f"{FAKE_BIN}:{os.environ['PATH']}", "FAKE_SRUN_LOG": str(calls),
           "SLURM_JOB_NODELIST": "nodeA,nodeB"}
    tmp = ray_isolation(env, None)
    hosts = ray_cluster.allocation_hosts(env)
    assert hosts == ["nodeA", "nodeB"]
    cluster = ray_cluster.RayCluster(ray_cluster.ClusterSpec(hosts, devices_per_node=1, resource="GPU",
                                                             cpus_per_node=1), env, tmp_path)
    try:
        address = cluster.start(timeout=240)
        assert cluster.resources().get("GPU") == 2
        assert _ray_processes(tmp)
    finally:
        cluster.stop(grace_s=20)
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("nodeA hostname --ip-address")
    assert any(line.startswith("nodeA ") and " start --head " in line for line in lines)
    assert any(line.startswith("nodeB ") and f" start --address={address} " in line for line in lines)
    assert _ray_processes(tmp) == []
    remove_tree(tmp)


HEAD_ONLY = """
import os, sys
from pathlib import Path
from verlsweep.trial import ray_cluster
from verlsweep.trial.supervise import ray_isolation, remove_tree
env = dict(os.environ)
tmp = ray_isolation(env, None)
hosts = ray_cluster.allocation_hosts(env)
cluster = ray_cluster.RayCluster(ray_cluster.ClusterSpec(hosts, 2, "NPU", 1), env, Path(sys.argv[1]))
try:
    cluster.start(timeout=240)
    print("hosts", hosts, "NPU", cluster.resources().get("NPU"), "tmp", tmp, flush=True)
finally:
    cluster.stop(grace_s=20)
    remove_tree(tmp)
"""


@pytest.mark.slow
def test_head_only_cluster_in_a_real_slurm_job_registers_its_devices_and_leaves_no_ray(slurm_cluster, tmp_path):
    done = subprocess.run(["srun", "-N1", "-n1", "-c1", "--mem=1500", "-J", "ray-head-only", sys.executable, "-c",
                           HEAD_ONLY, str(tmp_path)],
                          env={**slurm_cluster.client_env(), "PYTHONPATH": str(REPO)}, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    ray_logs = "".join(p.read_text()[-2000:] for p in tmp_path.glob("ray-*.log"))
    assert done.returncode == 0, done.stderr[-3000:] + ray_logs
    line = next(x for x in done.stdout.splitlines() if x.startswith("hosts"))
    assert "NPU 2.0" in line
    tmp = line.split()[-1]
    assert _ray_processes(tmp) == []
