"""A Ray cluster across a multi-node trial's Slurm allocation, torn down with the trial.

Built the way verl's own multi-node example does it (verl examples/slurm/ray_on_slurm.slurm): the node
names from `scontrol show hostnames $SLURM_JOB_NODELIST`, the head's address from
`srun --nodes=1 --ntasks=1 -w <head> hostname --ip-address`, `ray start --head ... --block` on the
first node and `ray start --address <head>:<port> ... --block` on each other one, each under its own
`srun --nodes=1 --ntasks=1 -w <host>`. `--overlap` lets these steps share the CPUs of the step the
trial itself runs in. verl then joins through RAY_ADDRESS: verl 0.9.1's main_ppo.run_ppo calls
`ray.init(**ray_kwargs.ray_init)` with its runtime env merged from `ray_kwargs.ray_init.runtime_env`,
so the trial's env goes there (supervise.runtime_env_overrides) and reaches the TaskRunner and every
worker actor on every node.

Stopping: SIGTERM to each srun, which forwards it to its remote task; `ray start --block` then stops
the node's Ray processes, and slurmstepd kills whatever is left in the step when the task exits. A
second pass SIGKILLs an srun that did not exit. Single-node trials never come here: they keep their
private local Ray (verlsweep/trial/supervise.py).
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from verlsweep.trial.supervise import MARK_ENV, stop_marked

DEFAULT_PORT = 6379                  # Ray's own default GCS port, as in verl's example
_SRUN_ONE = ["srun", "--overlap", "--nodes=1", "--ntasks=1"]


class RayClusterError(RuntimeError):
    """The cluster did not come up (a node missing, too few devices registered)."""


@dataclass(frozen=True)
class ClusterSpec:
    hosts: list[str]                 # the allocation's nodes; the first one is the head
    devices_per_node: int
    resource: str                    # the Ray resource the devices register as: GPU (CUDA) or NPU (Ascend)
    cpus_per_node: int | None = None

    @property
    def expected_devices(self) -> int:
        return self.devices_per_node * len(self.hosts)

    def device_args(self) -> list[str]:
        # Ray has a flag for GPUs only; NPUs are passed as the resource verl's placement reads
        # (verl single_controller/ray/base.py counts a node's "GPU", else its "NPU")
        if self.resource == "GPU":
            return ["--num-gpus", str(self.devices_per_node)]
        return ["--resources", json.dumps({self.resource: self.devices_per_node})]


def allocation_hosts(environ: Mapping[str, str]) -> list[str]:
    """The allocation's node names, in Slurm's order."""
    nodelist = environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST")
    if not nodelist:
        return []
    out = subprocess.run(["scontrol", "show", "hostnames", nodelist], env=dict(environ), capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [h for h in out.split() if h]


def wanted(nnodes: int, environ: Mapping[str, str], ray_address: str | None) -> bool:
    """A multi-node trial inside a Slurm allocation, with no cluster of the user's own configured."""
    return nnodes > 1 and not ray_address and bool(environ.get("SLURM_JOB_NODELIST") or environ.get("SLURM_NODELIST"))


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with closing(socket.socket()) as s:
            try:
                s.bind(("", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RayClusterError("no free port for the Ray head")


class RayCluster:
    """Start with `start()` (returns the address for RAY_ADDRESS), always `stop()` afterwards."""

    def __init__(self, spec: ClusterSpec, env: Mapping[str, str], log_dir: Path, python: str = sys.executable):
        self.spec = spec
        self.env = dict(env)
        self.env.pop("RAY_ADDRESS", None)
        self.mark = uuid.uuid4().hex          # carried by every Ray process of this cluster (all nodes)
        self.env[MARK_ENV] = self.mark
        self.log_dir = log_dir
        self.python = python
        self.ray = str(Path(python).with_name("ray"))
        self.address: str | None = None
        self._steps: list[tuple[str, subprocess.Popen]] = []

    def _srun(self, host: str, argv: list[str], name: str) -> subprocess.Popen:
        log = (self.log_dir / f"ray-{name}.log").open("ab")
        proc = subprocess.Popen([*_SRUN_ONE, "-w", host, *argv], env=self.env, stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._steps.append((host, proc))
        return proc

    def head_ip(self) -> str:
        out = subprocess.run([*_SRUN_ONE, "-w", self.spec.hosts[0], "hostname", "--ip-address"], env=self.env,
                             capture_output=True, text=True, timeout=120, check=True).stdout.split()
        # hosts with IPv6 print several addresses: take the first IPv4 one
        v4 = [a for a in out if a.count(".") == 3]
        if not (v4 or out):
            raise RayClusterError(f"no IP address for the Ray head {self.spec.hosts[0]}")
        return (v4 or out)[0]

    def start(self, timeout: float = 300.0) -> str:
        spec = self.spec
        ip = self.head_ip()
        port = _free_port(DEFAULT_PORT)
        self.address = f"{ip}:{port}"
        common = [*(["--num-cpus", str(spec.cpus_per_node)] if spec.cpus_per_node else []), *spec.device_args(),
                  "--disable-usage-stats", "--block"]
        self._srun(spec.hosts[0], [self.ray, "start", "--head", f"--node-ip-address={ip}", f"--port={port}",
                                   "--include-dashboard=false", *common], "head")
        self._wait_devices(spec.devices_per_node, timeout)
        for i, host in enumerate(spec.hosts[1:], start=1):
            self._srun(host, [self.ray, "start", f"--address={self.address}", *common], f"worker{i}")
        self._wait_devices(spec.expected_devices, timeout)
        return self.address

    def resources(self) -> dict[str, float]:
        """What the cluster has registered, read by a short-lived driver (keeps this process Ray-free)."""
        code = (f"import json, ray; ray.init(address={self.address!r}, log_to_driver=False, logging_level='ERROR'); "
                "print(json.dumps(ray.cluster_resources())); ray.shutdown()")
        done = subprocess.run([self.python, "-c", code], env=self.env, capture_output=True, text=True, timeout=120)
        if done.returncode:
            return {}
        return json.loads(done.stdout.strip().splitlines()[-1])

    def _wait_devices(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        seen: dict[str, float] = {}
        while time.monotonic() < deadline:
            dead = [host for host, proc in self._steps if proc.poll() is not None]
            if dead:
                raise RayClusterError(f"Ray on {', '.join(dead)} exited while starting (see {self.log_dir}/ray-*.log)")
            seen = self.resources()
            if seen.get(self.spec.resource, 0) >= count:
                return
            time.sleep(2.0)
        raise RayClusterError(f"{seen.get(self.spec.resource, 0):g} of {count} {self.spec.resource} registered "
                              f"in the Ray cluster at {self.address} within {timeout:g} s")

    def stop(self, grace_s: float = 30.0) -> None:
        """Workers first, then the head; SIGTERM, `grace_s`, then SIGKILL to each srun. Then what is left
        on this node (idle Ray workers exit only when they notice their raylet is gone) is stopped by the
        cluster's marker; on the other nodes slurmstepd does that when the step ends."""
        steps = list(reversed(self._steps))
        for _, proc in steps:
            _signal(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for _, proc in steps:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(proc, signal.SIGKILL)
                proc.wait()
        self._steps.clear()
        stop_marked(self.mark, min(grace_s, 5.0))


def _signal(proc: subprocess.Popen, sig: int) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
