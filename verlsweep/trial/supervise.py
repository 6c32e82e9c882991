"""Run one trial command as a supervised process tree, and make sure all of it is gone afterwards.

- Own session (`start_new_session`): SIGTERM/SIGKILL go to the whole process group; Ray's workers,
  which make their own groups, are still found by session id (tests/support/fixtures/REAL_VERL_NOTES.md).
- Every process of the trial carries a marker variable in its environment. Ray's raylet, GCS and
  workers inherit the driver's environment (ray/_private/services.py start_ray_process passes the
  parent's env on), so processes that left the group or were re-parented are still found by it.
- Ray isolation: verl's run_ppo (verl/trainer/main_ppo.py) calls `ray.init()` without an address
  when Ray is not initialised. Ray then connects to RAY_ADDRESS if set, else to the cluster named
  in `<temp>/ray/ray_current_cluster` (ray/_private/services.py get_ray_address_from_environment),
  where <temp> is RAY_TMPDIR (ray/_common/utils.py get_default_system_temp_dir). A fresh RAY_TMPDIR
  and no RAY_ADDRESS therefore make verl start its own Ray instance, and stopping the trial never
  touches anybody else's cluster.
- An existing cluster (`runner.ray_address`): its raylets start verl's TaskRunner and workers with
  their own environment, not the driver's, so the trial's environment reaches them only through Ray's
  runtime_env. verl 0.9.1's run_ppo merges `ray_kwargs.ray_init.runtime_env` over its defaults
  (constants_ppo.get_ppo_ray_runtime_env) and passes it to `ray.init`, so each variable becomes an
  override `+ray_kwargs.ray_init.runtime_env.env_vars.NAME='value'` (`runtime_env_overrides`).
- Ray's colours: the driver wraps each actor's log prefix in ANSI codes unless RAY_COLOR_PREFIX=0
  (ray/_private/worker.py print_worker_logs); the trial gets RAY_COLOR_PREFIX=0.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import psutil

from verlsweep.command.overrides import quoted
from verlsweep.common.errors import ConfigError, Problem
from verlsweep.common.names import SECRET_NAME
from verlsweep.common.processes import is_alive, own_processes

MARK_ENV = "VERLSWEEP_TRIAL_MARK"
RUNTIME_ENV_VARS = "ray_kwargs.ray_init.runtime_env.env_vars"   # verl's ray.init(runtime_env=...) env_vars
_ENV_NAME = re.compile(r"[A-Za-z_]\w*")
RAY_TMP_PREFIX = "vsray-"        # short on purpose: Ray's unix socket paths live below it (~107 bytes max)


def ray_isolation(env: dict[str, str], ray_address: str | None) -> str | None:
    """Give the trial its own Ray temp dir (returned, to be removed) unless an address is configured."""
    env["RAY_COLOR_PREFIX"] = "0"
    if ray_address:
        env["RAY_ADDRESS"] = ray_address
        return None
    env.pop("RAY_ADDRESS", None)
    tmp = tempfile.mkdtemp(prefix=RAY_TMP_PREFIX)
    env["RAY_TMPDIR"] = tmp
    # a private instance needs no token auth; with it Ray 2.60 writes ~/.ray/auth_token for each new
    # local cluster (tests/support/fixtures/REAL_VERL_NOTES.md, "Keeping Ray private")
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    return tmp


def runtime_env_overrides(env: Mapping[str, str], argv: Iterable[str]) -> list[str]:
    """verl overrides that hand `env` to the actors of an existing Ray cluster through Ray's runtime_env.

    A variable the command already sets there is left to it. A credential is refused rather than passed:
    verl prints its ray.init kwargs (`ray init kwargs: {...}`), runtime_env included, into the trial's
    log, which becomes a tracked artifact.
    """
    prefix = f"+{RUNTIME_ENV_VARS}."
    given = {a.split("=", 1)[0].lstrip("+").removeprefix(RUNTIME_ENV_VARS + ".") for a in argv
             if a.lstrip("+").startswith(RUNTIME_ENV_VARS + ".")}
    problems = []
    out = []
    for name, value in env.items():
        if name in given:
            continue
        if SECRET_NAME.search(name):
            problems.append(Problem(f"env.{name}", "<set>", "no credential with runner.ray_address: verl prints "
                                    "its Ray runtime_env into the trial log; set it in the cluster's own "
                                    "environment instead"))
        elif not _ENV_NAME.fullmatch(name):
            problems.append(Problem(f"env.{name}", name, "a variable name of letters, digits and _ (it becomes "
                                    f"a key of {RUNTIME_ENV_VARS} with runner.ray_address)"))
        else:
            # always quoted: Ray's runtime_env takes only string values, Hydra would read 3600 as an int
            out.append(f"{prefix}{name}={quoted(str(value))}")
    if problems:
        raise ConfigError(problems)
    return out


class Supervised:
    """A started trial process: its output is copied to a log file and handed to `on_line`."""

    def __init__(self, argv: list[str], env: Mapping[str, str], cwd: Path, log_path: Path,
                 on_line: Callable[[str], None]):
        self.mark = uuid.uuid4().hex
        full_env = dict(env)
        full_env[MARK_ENV] = self.mark
        self.log_path = log_path
        self._log = log_path.open("ab", buffering=0)
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=full_env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True)
        self.pgid = self.proc.pid   # session leader: its pid is the group id
        self._on_line = on_line
        self._reader = threading.Thread(target=self._pump, name=f"trial-{self.proc.pid}-out", daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for raw in iter(self.proc.stdout.readline, b""):
            self._log.write(raw)
            try:
                self._on_line(raw.decode("utf-8", "replace"))
            except Exception:  # noqa: BLE001 - a display/parse bug must not stop the log copy
                pass

    def wait(self, timeout: float) -> int | None:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def members(self) -> list[psutil.Process]:
        """Every live process of this trial: descendants, the process group and marker carriers."""
        return trial_processes(self.proc.pid, self.pgid, self.mark)

    def stop(self, grace_s: float) -> None:
        """SIGTERM to the group and every member, `grace_s` to exit, then SIGKILL what is left."""
        terminate(self.proc, self.pgid, self.mark, grace_s)

    def close(self, grace_s: float, reader_wait_s: float = 5.0) -> list[int]:
        """After the main process ended: stop leftovers (Ray daemons, workers), finish the log.

        Returns the pids that were still alive and had to be stopped.
        """
        leftovers = [p.pid for p in self.members()]
        if leftovers:
            terminate(self.proc, self.pgid, self.mark, grace_s)
        self.proc.wait()
        self._reader.join(reader_wait_s)
        self._log.close()
        return leftovers


def trial_processes(pid: int, pgid: int, mark: str) -> list[psutil.Process]:
    found: dict[int, psutil.Process] = {}
    try:
        root = psutil.Process(pid)
        found[pid] = root
        for child in root.children(recursive=True):
            found[child.pid] = child
    except psutil.NoSuchProcess:
        pass
    for proc in own_processes(skip=found):
        try:
            # Ray workers get their own process group but stay in the driver's session (no setsid)
            if os.getpgid(proc.pid) == pgid or os.getsid(proc.pid) == pgid or proc.environ().get(MARK_ENV) == mark:
                found[proc.pid] = proc
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return [p for p in found.values() if is_alive(p)]


def stop_marked(mark: str, grace_s: float) -> list[int]:
    """SIGTERM every live process carrying `mark`, `grace_s` to exit, then SIGKILL; returns their pids.
    For processes started outside a supervised tree (a trial's Ray cluster under srun)."""
    marked = []
    for proc in own_processes():
        try:
            if proc.environ().get(MARK_ENV) == mark and is_alive(proc):
                marked.append(proc)
        except (psutil.Error, OSError):
            continue
    signal_all(marked, signal.SIGTERM)
    signal_all(wait_gone(marked, grace_s), signal.SIGKILL)
    wait_gone(marked, 5)
    return [p.pid for p in marked]


def terminate(leader: subprocess.Popen, pgid: int, mark: str, grace_s: float) -> None:
    """Stop every process of the trial. The leader is waited for through Popen, never psutil: psutil's
    wait would reap it and its exit status would be lost to the classifier."""
    _killpg(pgid, signal.SIGTERM)
    others = [p for p in trial_processes(leader.pid, pgid, mark) if p.pid != leader.pid]
    signal_all(others, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    alive = wait_gone(others, grace_s)
    _wait_leader(leader, max(0.0, deadline - time.monotonic()))
    # a second pass catches what was spawned while the first one was stopping (Ray restarts workers)
    for _ in range(3):
        _killpg(pgid, signal.SIGKILL)
        if leader.poll() is None:
            leader.kill()
        alive = _unique(alive + [p for p in trial_processes(leader.pid, pgid, mark) if p.pid != leader.pid])
        signal_all(alive, signal.SIGKILL)
        alive = wait_gone(alive, 5)
        _wait_leader(leader, 5)
        if not alive and leader.poll() is not None:
            return
        time.sleep(0.05)


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until none is alive. Not psutil.wait_procs: it counts a zombie as alive (common/processes.py)."""
    deadline = time.monotonic() + timeout
    alive = [p for p in procs if is_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if is_alive(p)]
    return alive


def _wait_leader(leader: subprocess.Popen, timeout: float) -> None:
    try:
        leader.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def signal_all(procs: list[psutil.Process], sig: int) -> None:
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def _unique(procs: list[psutil.Process]) -> list[psutil.Process]:
    return list({p.pid: p for p in procs}.values())


def remove_tree(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)
