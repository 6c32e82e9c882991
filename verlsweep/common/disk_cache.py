"""verlsweep's cache directory on this machine: $VERLSWEEP_CACHE, by default $XDG_CACHE_HOME/verlsweep
(~/.cache/verlsweep). Entries are small files named by a hash of everything that changes them, written
atomically: trials and sweeps on one machine read and write them at the same time."""
from __future__ import annotations

import json
import os
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path
from typing import Any

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


def read_json(path: Path) -> Any:
    """An entry's JSON, or None when it is absent or half-written (another process is writing it)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def installed(dist: str) -> str:
    """An installed distribution's version ("absent" when it is not installed), for keys of entries that
    depend on it."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "absent"


def add_files(digest: Any, base: Path, files: Iterable[Path]) -> None:
    """Each file's path under `base` and its contents into a hashlib digest, for keys of entries that
    depend on those files."""
    for file in files:
        digest.update(file.relative_to(base).as_posix().encode() + b"\0" + file.read_bytes() + b"\0")
