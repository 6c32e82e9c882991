"""Files that other processes read while we write them (trials.csv, best.yaml, cache entries)."""
from __future__ import annotations

import os
from pathlib import Path


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Replace atomically, through a sibling temp file: a reader (or a second sweep process) sees the old
    file, the new one or none, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    if mode is not None:
        tmp.chmod(mode)
    tmp.replace(path)
