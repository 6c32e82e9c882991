"""Watch a trial's own Ray cluster for demand it can never place.

Ray does not fail a placement group or an actor that no node can host: `placement_group.ready()` and
actor creation just wait (TransferQueue's SimpleStorage bootstrap waits on one with no timeout,
transfer_queue/utils/common.py get_placement_group). The supervisor therefore reads the cluster's
pending demand from Ray's GCS through a probe process (ray_probe.py, every `runner.schedule_poll` s)
and ends the trial as `unschedulable` when

* a pending placement group or resource request exceeds what the cluster has in total (it can never
  be placed), or
* something stays pending for `runner.schedule_timeout` s with no placement group becoming ready in
  between (any placement group that is placed restarts the clock). Pending tasks/actors outside a
  placement group count only before the first training step: later they may just queue behind busy
  CPUs.

On a cluster the trial joins (`runner.ray_address`, or a multi-node trial's cluster over its Slurm
allocation) the probe reads that cluster's GCS; with `runner.ray_address` that includes other jobs' demand.
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verlsweep.config import VerlRunnerConfig

PROBE = Path(__file__).with_name("ray_probe.py")


def _fmt(res: dict[str, float]) -> str:
    return "{" + ", ".join(f"{k}: {v:g}" for k, v in sorted(res.items())) + "}"


def _sum(bundles: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            out[k] = out.get(k, 0.0) + v
    return out


def _exceeds(need: dict[str, float], have: dict[str, float]) -> bool:
    return any(v > have.get(k, 0.0) + 1e-9 for k, v in need.items())


@dataclass
class Pending:
    """One pending demand in a snapshot."""

    key: str                       # stable across polls: placement group id, or the request's shape
    text: str
    bundles: list[dict[str, float]]
    strict_pack: bool = False
    in_pg: bool = True


def pending_of(snap: dict[str, Any]) -> list[Pending]:
    out = []
    for pg in snap.get("pending_pgs", []):
        total = _sum(pg["bundles"])
        out.append(Pending(f"pg:{pg['id']}", f"placement group {pg['id'][:12]} ({pg['strategy']}) of "
                           f"{len(pg['bundles'])} bundles, {_fmt(total)} in all", pg["bundles"],
                           strict_pack=pg["strategy"] == "STRICT_PACK"))
    for req in snap.get("pending", []):
        shape = _fmt(req["bundle"])
        out.append(Pending(f"req:{shape}", f"{req['count']} actor/task request(s) of {shape}",
                           [req["bundle"]], in_pg=False))
    return out


def cluster_text(snap: dict[str, Any]) -> str:
    nodes = snap.get("nodes", [])
    total, free = _sum([n["total"] for n in nodes]), _sum([n["available"] for n in nodes])
    return (f"cluster resources ({len(nodes)} node{'s' if len(nodes) != 1 else ''}): "
            + ", ".join(f"{k} {total[k]:g} total / {free.get(k, 0):g} free" for k in sorted(total)))


def never_fits(p: Pending, snap: dict[str, Any]) -> bool:
    """Whether no cluster of these nodes could place `p`, however long it waits."""
    nodes = [n["total"] for n in snap.get("nodes", [])]
    if not nodes:
        return False                 # no node registered yet: too early to say
    biggest = {k: max(n.get(k, 0.0) for n in nodes) for k in set().union(*nodes)}
    if any(_exceeds(b, biggest) for b in p.bundles):
        return True
    whole = _sum(p.bundles)
    return _exceeds(whole, biggest) if p.strict_pack else _exceeds(whole, _sum(nodes))


@dataclass
class Judge:
    """Decides from successive snapshots; pure, so it is tested without Ray."""

    timeout_s: float | None
    since: float | None = None                       # pending without progress since
    seen: set[str] = field(default_factory=set)

    def feed(self, snap: dict[str, Any], now: float, any_step: bool) -> str | None:
        """The excerpt of an unschedulable trial, or None."""
        pending = [p for p in pending_of(snap) if p.in_pg or not any_step or never_fits(p, snap)]
        for p in pending:
            if never_fits(p, snap):
                return (f"Ray can never place {p.text}: it exceeds what the cluster has.\n"
                        f"{cluster_text(snap)}")
        keys = {p.key for p in pending}
        placed = {k for k in self.seen - keys if k.startswith("pg:")}
        if not keys:
            self.since = None
        elif self.since is None or placed:
            self.since = now
        self.seen = keys
        if keys and self.timeout_s and self.since is not None and now - self.since > self.timeout_s:
            listed = "\n".join(f"  pending: {p.text}" for p in pending)
            return (f"Ray placed nothing for {now - self.since:.0f} s (runner.schedule_timeout="
                    f"{self.timeout_s:g}s) while verl waited on:\n{listed}\n{cluster_text(snap)}")
        return None


class RayWatch:
    """The probe of one trial's Ray and the judge of its snapshots. `check` never blocks."""

    def __init__(self, argv: list[str] | None, judge: Judge, env: dict[str, str] | None = None) -> None:
        self.judge = judge
        self._latest: dict[str, Any] | None = None
        self._used: float | None = None
        self._lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        if argv is not None:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         stdin=subprocess.DEVNULL, env=env, text=True)
            threading.Thread(target=self._read, name="ray-watch", daemon=True).start()

    @classmethod
    def for_trial(cls, runner: VerlRunnerConfig, ray_tmp: str | Path | None, env: dict[str, str]) -> RayWatch:
        """The watch of a trial with its private Ray in `ray_tmp`, or the cluster its env's RAY_ADDRESS
        names (`runner.ray_address`, a multi-node trial's cluster); inert when runner.schedule_timeout
        is 0/null or no Ray is known."""
        timeout = runner.schedule_timeout
        timeout = None if timeout is None or timeout <= 0 else float(timeout)
        address = env.get("RAY_ADDRESS") or runner.ray_address
        if timeout is None or not (ray_tmp or address):
            return cls(None, Judge(None))
        where = ["--address", str(address)] if address else ["--ray-tmp", str(ray_tmp)]
        argv = [sys.executable, str(PROBE), *where, "--interval", str(runner.schedule_poll)]
        probe_env = {k: v for k, v in env.items() if k != "RAY_ADDRESS"}   # the probe resolves its own
        return cls(argv, Judge(timeout), probe_env)

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                snap = json.loads(line)
            except ValueError:
                continue
            if "nodes" in snap:
                with self._lock:
                    self._latest = snap

    def check(self, now: float, any_step: bool) -> tuple[str | None, str | None]:
        """("unschedulable", excerpt) once the trial's Ray cannot place what verl asked for."""
        with self._lock:
            snap = self._latest
        if snap is None or snap["time"] == self._used:
            return None, None
        self._used = snap["time"]
        excerpt = self.judge.feed(snap, now, any_step)
        return ("unschedulable", excerpt) if excerpt else (None, None)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def __enter__(self) -> RayWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
