"""Recipe scripts written for the tests in the forms of verl's example scripts (*.sh), and the node's
`python3` the e2e sweeps put first on PATH: verl's launch runs the stand-in, any other call this interpreter."""
from __future__ import annotations

import sys
from pathlib import Path

from tests.support.standin_runs import STANDIN

RECIPES = Path(__file__).resolve().parent
_PYTHON3 = """#!{python}
import os, sys
args = sys.argv[1:]
if args[:2] == ["-m", "verl.trainer.main_ppo"]:
    os.execv(sys.executable, [sys.executable, {standin!r}, *args[2:]])
os.execv(sys.executable, [sys.executable, *args])
"""


def standin_bin(directory: Path) -> Path:
    """A dir holding `python3`/`python` that run the verl stand-in for `-m verl.trainer.main_ppo`."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("python3", "python"):
        path = directory / name
        path.write_text(_PYTHON3.format(python=sys.executable, standin=str(STANDIN)))
        path.chmod(0o755)
    return directory
