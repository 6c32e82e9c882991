"""Files that other processes read while we write them (trials.csv, best.yaml, cache entries)."""
from __future__ import annotations

import os
from pathlib import Path

from verlsweep.common.errors import Problem


def write_atomic(path: Path, text: str, mode: int | None = None) -> None:
    """Replace atomically, through a sibling temp file: a reader (or a second sweep process) sees the old
    file, the new one or none, never half of one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    if mode is not None:
        tmp.chmod(mode)
    tmp.replace(path)


def writable_dir(key: str, value: str, path: Path, what: str, must_exist: bool = False) -> list[Problem]:
    """`path` exists and can be written, or can be made: its nearest existing parent is a writable dir
    (`must_exist`: it is there already). The problem is `key`=`value`'s, the setting that names it."""
    nearest = path
    while not nearest.exists() and nearest != nearest.parent:
        nearest = nearest.parent
    if must_exist and nearest != path:
        return [Problem(key, value, f"{what} to exist: {path} does not (mkdir -p {path})")]
    if not nearest.is_dir():
        return [Problem(key, value, f"{what}: {nearest} is a file, not a directory")]
    if not os.access(nearest, os.W_OK | os.X_OK):
        return [Problem(key, value, f"{what} writable: {nearest} is not (pick another dir, or chmod)")]
    return []
