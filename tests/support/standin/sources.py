"""Installed sources (verl, ray, torch) located without importing them: a source line by the function that
holds it, traceback lines built from those, and verl's own ``verl/utils/tracking.py`` executed from its file."""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from tests.support.standin.knobs import KnobError


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def verl_config_dir() -> Path:
    """The installed verl's ``trainer/config`` directory (what verl's own ``@hydra.main`` uses)."""
    root = _package_dir("verl")
    if root is None:
        raise KnobError("verl is not installed in this interpreter; the stand-in needs its config yaml files")
    return root / "trainer" / "config"


def _source_file(package: str, rel: str) -> Path | None:
    root = _package_dir(package)
    if root is None:
        return None
    path = root / rel
    return path if path.is_file() else None


def _locate(package: str, rel: str, func: str, needle: str) -> tuple[str, int, str] | None:
    """(path, lineno, line) of the first line holding ``needle`` whose nearest preceding ``def`` is ``func``."""
    path = _source_file(package, rel)
    if path is None:
        return None
    current = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for lineno, line in enumerate(lines, 1):
        stripped = line.lstrip()
        for head in ("def ", "async def "):
            if stripped.startswith(head):
                current = stripped[len(head) :].split("(", 1)[0].strip()
        if needle in line and current == func:
            return str(path), lineno, line
    return None


Frame = tuple[str, str, str, str]  # (package, relative path, function, needle)


def _format_frames(frames: list[Frame]) -> list[str]:
    """Traceback lines for frames located in the installed sources; frames that moved are dropped."""
    out: list[str] = []
    for package, rel, func, needle in frames:
        found = _locate(package, rel, func, needle)
        if found is None:
            continue
        path, lineno, line = found
        out.append(f'  File "{path}", line {lineno}, in {func}')
        out.append(f"    {line.strip()}")
    return out


_TRACKING_MODULE: Any = None


def _load_verl_tracking() -> Any:
    """Execute the installed ``verl/utils/tracking.py`` without importing the ``verl`` package (and torch)."""
    global _TRACKING_MODULE
    if _TRACKING_MODULE is None:
        path = _source_file("verl", "utils/tracking.py")
        if path is None:
            raise KnobError("verl/utils/tracking.py not found in the installed verl")
        spec = importlib.util.spec_from_file_location("verl.utils.tracking", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TRACKING_MODULE = module
    return _TRACKING_MODULE
