"""Settings that moved or were renamed: each old spelling is refused, naming the new one, before
anything runs, so a script or config written for an earlier release stops instead of being ignored.

verl-only sweep settings left `hydra.sweeper` (what any Hydra app's sweep reads, as in
hydra-optuna-sweeper) for the task's own `study` node (conf/study/default.yaml); `infer` is `proofs`.
Read by sweep.py on the command line and by the sweeper on the composed `hydra.sweeper` node (a config
file a user composes).
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from verlsweep.common.errors import Problem

# old key -> new key; a key under an old one moves with it (hydra.sweeper.guide.top_k -> study.guide.top_k)
MOVED = {
    "hydra.sweeper.objectives": "study.objectives",
    "hydra.sweeper.infer": "study.proofs",
    "hydra.sweeper.enqueue_recipe": "study.enqueue_recipe",
    "hydra.sweeper.report": "study.report",
    "hydra.sweeper.devices_per_trial": "study.devices_per_trial",
    "hydra.sweeper.from_study": "study.from_study",
    "hydra.sweeper.guide": "study.guide",
    "hydra.sweeper.long_run": "study.long_run",
}


def new_spelling(key: str) -> str | None:
    """Today's spelling of `key` (a dotted config key), or None when it did not move."""
    for old, new in MOVED.items():
        if key == old or key.startswith(f"{old}."):
            return new + key[len(old):]
    return None


def problems(items: Iterable[tuple[str, Any]]) -> list[Problem]:
    """One problem per (key, value) whose key moved, naming the new key."""
    out = []
    for key, value in items:
        new = new_spelling(key)
        if new is not None:
            out.append(Problem(key, value, f"moved: write {new} (the task's `study` node, conf/study/default.yaml)"))
    return out
