"""Ray as the driver sees it: Ray-shaped exceptions (class names as ``RayTaskError.as_instanceof_cause`` builds
them), actors as they appear in log prefixes and error headers, and the child processes standing in for Ray's
raylet and the TaskRunner worker."""
from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys

from tests.support.standin.console import CYAN, FORE_RESET


def _exception_class(module: str, qualname: str) -> type[Exception]:
    cls = type(qualname, (Exception,), {"__module__": module, "__qualname__": qualname, "__str__": _text_str})
    return cls


def _text_str(self: BaseException) -> str:
    return str(self.args[0]) if self.args else ""


def ray_task_error(cause: str, text: str) -> Exception:
    """``ray.exceptions.RayTaskError(<cause>)`` whose ``str`` is Ray's formatted nested traceback ``text``."""
    return _exception_class("ray.exceptions", f"RayTaskError({cause})")(text)


def _hex_id(rng: random.Random, nbytes: int = 12, suffix: str = "01000000") -> str:
    return "".join(f"{rng.randrange(256):02x}" for _ in range(nbytes)) + suffix


def _address(rng: random.Random) -> str:
    return f"0x7f{rng.randrange(16**10):010x}"


@dataclasses.dataclass
class RayActor:
    """One Ray actor as it appears in log prefixes and RayTaskError headers."""

    cls: str
    pid: int
    repr_module: str
    actor_id: str
    address: str

    @property
    def prefix(self) -> str:
        return f"({self.cls} pid={self.pid})"

    def header(self, method: str, ip: str) -> str:
        # RayTaskError.__str__ colours the proctitle whatever RAY_COLOR_PREFIX says
        return (
            f"{CYAN}ray::{self.cls}.{method}(){FORE_RESET} (pid={self.pid}, ip={ip}, actor_id={self.actor_id}, "
            f"repr=<{self.repr_module}.{self.cls} object at {self.address}>)"
        )


# ---------------------------------------------------------------------------------------------------------------
# Child processes standing in for Ray's raylet and the TaskRunner worker
# ---------------------------------------------------------------------------------------------------------------

_CHILD_CODE = r"""
import os, sys, time
lifetime = float(sys.argv[1]); follow_parent = sys.argv[2] == "1"

def linger():
    parent = os.getppid()
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline:
        if follow_parent and os.getppid() != parent:
            return
        time.sleep(0.2)

worker = os.fork()
if worker == 0:
    linger()
    os._exit(0)
sys.stdout.write(f"{worker}\n")
sys.stdout.flush()
linger()
if follow_parent:
    try:
        os.kill(worker, 9)
    except OSError:
        pass
os._exit(0)
"""


class RayProcesses:
    """A "raylet" child and its "worker" grandchild, in the caller's process group."""

    def __init__(self, lifetime_s: float, follow_parent: bool) -> None:
        self.raylet = subprocess.Popen(
            [sys.executable, "-S", "-c", _CHILD_CODE, str(lifetime_s), "1" if follow_parent else "0"],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.raylet.stdout is not None
        line = self.raylet.stdout.readline().strip()
        self.raylet.stdout.close()
        self.worker_pid = int(line) if line.isdigit() else self.raylet.pid
        self._alive = True

    def shutdown(self) -> None:
        """What ``ray.shutdown()`` at driver exit amounts to: the Ray processes go away."""
        if not self._alive:
            return
        self._alive = False
        for pid in (self.worker_pid, self.raylet.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.raylet.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
