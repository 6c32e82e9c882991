"""On-disk cache of trainer traces (verlsweep.plan.trace.trainer_trace), so a sweep traces each distinct
shape once per machine.

A result is one small JSON file named by the hash of everything that changes it: the model's Hugging
Face config, what the pass runs, the tracer's version and the installed torch / transformers (whose
kernels and model code are what is traced). The directory is `trace` in verlsweep's cache directory
(verlsweep.common.disk_cache: $VERLSWEEP_CACHE, by default ~/.cache/verlsweep).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from verlsweep.common import disk_cache


def cache_dir() -> Path:
    return disk_cache.root() / "trace"


def key(kind: str, payload: dict[str, Any], tracer_version: int) -> str:
    """A stable name for one trace: sha256 over the sorted JSON of what determines it."""
    blob = json.dumps({"kind": kind, "payload": payload, "tracer": tracer_version,
                       "torch": disk_cache.installed("torch"),
                       "transformers": disk_cache.installed("transformers")},
                      sort_keys=True, default=str)
    return f"{kind}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


def load(name: str) -> dict[str, Any] | None:
    return disk_cache.read_json(cache_dir() / f"{name}.json")      # None: trace again


def store(name: str, result: dict[str, Any]) -> None:
    """Written atomically: trials of one sweep trace at once."""
    disk_cache.store(cache_dir() / f"{name}.json", json.dumps(result, sort_keys=True))
