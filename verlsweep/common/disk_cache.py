"""verlsweep's cache directory on this machine: $VERLSWEEP_CACHE, by default $XDG_CACHE_HOME/verlsweep
(~/.cache/verlsweep). Entries are small files named by a hash of everything that changes them, written
atomically: trials and sweeps on one machine read and write them at the same time."""
from __future__ import annotations

import os
from pathlib import Path

from verlsweep.common.files import write_atomic


def root() -> Path:
    configured = os.environ.get("VERLSWEEP_CACHE")
    if not configured:
        configured = str(Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "verlsweep")
    return Path(configured).expanduser()


def store(path: Path, text: str) -> None:
    """Write a cache entry (its directory made when missing), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)
