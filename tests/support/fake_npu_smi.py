"""A fake `npu-smi` for the device-monitor tests: writes an executable `npu-smi` into a directory that
replays recorded `npu-smi info` texts in turn (the last one repeats), with an optional exit status."""
from __future__ import annotations

import stat
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parent / "plan_data"

_SCRIPT = """#!{python}
import pathlib, sys
texts = {texts!r}
counter = pathlib.Path({counter!r})
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
if sys.argv[1:2] != ["info"]:
    sys.exit("usage: npu-smi info")
sys.stdout.write(pathlib.Path(texts[min(n, len(texts) - 1)]).read_text())
sys.exit({exit_code})
"""


def install(bin_dir: Path, *files: str, exit_code: int = 0) -> Path:
    """`bin_dir/npu-smi` replaying plan_data/<files> in order; returns bin_dir (prepend it to PATH)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / "npu-smi"
    exe.write_text(_SCRIPT.format(python=sys.executable, texts=[str(DATA / f) for f in files],
                                  counter=str(bin_dir / "calls"), exit_code=exit_code))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def calls(bin_dir: Path) -> int:
    f = bin_dir / "calls"
    return int(f.read_text()) if f.exists() else 0
