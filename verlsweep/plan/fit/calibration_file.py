"""Writing a calibration file with new constants, as its author wrote it.

calibration.yaml is documentation: a comment or a `source` beside each number says where it comes from.
PyYAML drops comments when it reads, so the file is edited as text instead, one constant's `value:` at a
time, in the layout verlsweep/plan/calibration.yaml has (`constants:` -> `  <name>:` -> `    value: <v>`,
`points:` a list). Both refits write through here: `plan refit` (constants fitted to measurements, a
`refit:` note) and `plan refit --traces` (a `# fitted to traces: ...` comment under each value it sets).
What is written is read back before the file is replaced, so a file this writer cannot edit is an error
that names the key, never a file that silently says something else.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from verlsweep.plan.predictor.calibration import DEFAULT_PATH, Calibration, Constants, parse


def write(cal: Calibration, constants: Constants, path: Path, extra_points: Sequence[Mapping[str, Any]] = (), *,
          note: str = "", names: Iterable[str] | None = None, comment: str = "", digits: int = 6) -> Path:
    """Write `cal`'s file to `path` with `constants`' values, every comment kept.

    names: the constants to write (default: each whose value differs from `cal`'s), rounded to `digits`;
    comment: a `# <comment>` line under each value written, in place of one an earlier write left with
      the same label (its text up to the first colon);
    note: the file's top-level `refit:` line; extra_points: appended to `points`.
    """
    source = cal.path or DEFAULT_PATH
    lines = source.read_text().splitlines(keepends=True)
    if names is None:
        names = [n for n, v in vars(constants).items() if v != getattr(cal.constants, n)]
    written = {n: round(float(getattr(constants, n)), digits) for n in names}
    for name, value in written.items():
        _set_value(lines, name, value, comment, source)
    if extra_points:
        _append_points(lines, extra_points)
    if note:
        _set_note(lines, note)
    text = "".join(lines)
    _check(text, written, extra_points, note, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _scalar(value: Any) -> str:
    """A value as YAML writes it on one line (1e-05 as 1.0e-05, which YAML 1.1 reads as a float)."""
    return yaml.safe_dump(value, width=float("inf"), allow_unicode=True).splitlines()[0]


def _top_level(line: str) -> bool:
    return bool(line.strip()) and not line[0].isspace() and not line.startswith("#")


def _block(lines: list[str], key: str) -> tuple[int, int] | None:
    """[start, end) of the top-level mapping key `key`: its line and every line under it."""
    start = next((i for i, line in enumerate(lines) if re.match(rf"{key}:(\s|$)", line)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if _top_level(lines[i])), len(lines))
    return start, end


def _set_value(lines: list[str], name: str, value: float, comment: str, source: Path) -> None:
    block = _block(lines, "constants")
    start = block and next((i for i in range(*block) if re.match(rf"  {name}:\s*(#.*)?$", lines[i])), None)
    if not block or start is None:
        raise ValueError(f"{source}: no constant {name!r} under `constants:`")
    at = next((i for i in range(start + 1, block[1]) if re.match(r"    value:", lines[i])
               or not (lines[i].startswith("   ") or not lines[i].strip())), None)
    if at is None or not lines[at].startswith("    value:"):
        raise ValueError(f"{source}: constant {name!r} has no `value:` line")
    lines[at] = re.sub(r"^(    value:[ \t]*)[^#\n]*?([ \t]*(#.*)?)$", lambda m: f"{m[1]}{_scalar(value)}{m[2]}",
                       lines[at].rstrip("\n")) + "\n"
    if comment:
        label = comment.split(":", 1)[0]
        line = f"    # {comment}\n"
        if at + 1 < len(lines) and lines[at + 1].startswith(f"    # {label}:"):
            lines[at + 1] = line
        else:
            lines.insert(at + 1, line)


def _append_points(lines: list[str], points: Sequence[Mapping[str, Any]]) -> None:
    items = yaml.safe_dump([dict(p) for p in points], sort_keys=False, allow_unicode=True, width=110)
    indented = [f"  {line}" if line.strip() else line for line in items.splitlines(keepends=True)]
    block = _block(lines, "points")
    if block is None:
        _end_with_newline(lines)
        lines += ["points:\n", *indented]
        return
    end = block[1]
    while end > block[0] + 1 and not lines[end - 1].strip():
        end -= 1                                          # after the last point, before blank lines
    _end_with_newline(lines, end)
    lines[end:end] = indented


def _set_note(lines: list[str], note: str) -> None:
    entry = yaml.safe_dump({"refit": note}, width=float("inf"), allow_unicode=True).splitlines(keepends=True)
    block = _block(lines, "refit")
    if block is None:
        _end_with_newline(lines)
        lines += entry
    else:
        lines[block[0]:block[1]] = entry


def _end_with_newline(lines: list[str], end: int | None = None) -> None:
    at = (len(lines) if end is None else end) - 1
    if at >= 0 and not lines[at].endswith("\n"):
        lines[at] += "\n"


def _check(text: str, written: Mapping[str, float], extra_points: Sequence[Mapping[str, Any]], note: str,
           path: Path) -> None:
    raw = yaml.safe_load(text)
    got = parse(raw, path)
    wrong = [n for n, v in written.items() if getattr(got.constants, n) != v]
    ids = [str(p.get("id")) for p in extra_points]
    if wrong or [p.id for p in got.points][len(got.points) - len(ids):] != ids or (note and raw.get("refit") != note):
        raise ValueError(f"{path}: the calibration written does not read back as intended "
                         f"(constants {wrong}, points {ids}, note {note!r}); its layout is not calibration.yaml's")
