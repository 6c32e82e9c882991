"""docs/errors.md is what the commands print: each of its examples is run here, in a scratch directory
laid out as the page says, and must exit 2 with the page's message lines (paths shown relative to that
directory), no traceback, and nothing left behind (no study, MLflow store, sweep or run dir).

The page is the table of cases: a `### kind` heading, a ```bash block with one command, a ```text block
with the message. Commands run in this process (sys.argv set, stdout/stderr captured, SystemExit caught):
each costs a Hydra compose or two, not a Python start-up. To rewrite the page's messages from today's
output: VERLSWEEP_WRITE_ERRORS_PAGE=1 python -m pytest -n 0 tests/test_errors_page.py (then read the diff).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import runpy
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "errors.md"
MIN_KINDS = 40
FENCE = re.compile(r"^```(\w*)\s*$")
# the scratch directory of docs/errors.md's "The examples" section
HARDWARE = (REPO / "conf" / "hardware" / "a2_64g.yaml").read_text()
SCRATCH_FILES = {
    "my_conf/hardware/broken.yaml": HARDWARE.replace("devices_per_node: 8", "devices_per_node: [8"),
    "my_conf/hardware/no_usable.yaml": "".join(line for line in HARDWARE.replace("name: a2_64g", "name: no_usable")
                                               .splitlines(keepends=True) if "hbm_usable_gb" not in line),
    "models/Qwen3-8B/config.json": "{}\n",
    "data/gsm8k/train.parquet": "",
    "data/gsm8k/test.parquet": "",
    "a_file": "not a directory\n",
}
SCRATCH_ENV = {"VERLSWEEP_MODEL_ROOT": "models", "VERLSWEEP_DATA_ROOT": "data"}
UNSET_ENV = ("MLFLOW_TRACKING_URI", "VERLSWEEP_OUTPUT_ROOT", "VERLSWEEP_RECIPE_SCRIPT", "HYDRA_FULL_ERROR")


@dataclass(frozen=True)
class Case:
    kind: str
    line: int             # of its command in the page
    command: str
    message: tuple[str, ...]


def page_cases(text: str) -> list[Case]:
    """Each `### kind` section's first bash command and the text block after it."""
    cases: list[Case] = []
    kind: str | None = None
    command: str | None = None
    block: list[str] | None = None
    line_no, lang = 0, ""
    for number, line in enumerate(text.splitlines(), 1):
        fence = FENCE.match(line)
        if block is not None:
            if fence:
                if lang == "bash" and kind and command is None:
                    command, line_no = " ".join(block), number - len(block)
                elif lang == "text" and kind and command is not None:
                    cases.append(Case(kind, line_no, command, tuple(block)))
                    kind, command = None, None
                block = None
            else:
                block.append(line)
        elif fence:
            block, lang = [], fence.group(1)
        elif line.startswith("### "):
            kind, command = line[4:].strip(), None
    return cases


CASES = page_cases(PAGE.read_text())


@dataclass
class Ran:
    code: int
    out: str
    err: str


def _run(command: str, scratch: Path) -> Ran:
    """`python sweep.py ...` / `python -m verlsweep.X ...` run here as the command would run it."""
    words = shlex.split(command.replace("$PWD", str(scratch)))
    assert words[0] == "python", command
    out, err, code = io.StringIO(), io.StringIO(), 0
    saved_argv = sys.argv
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            if words[1] == "-m":
                sys.argv = [words[2], *words[3:]]
                runpy.run_module(words[2], run_name="__main__", alter_sys=True)
            else:
                sys.argv = [str(REPO / words[1]), *words[2:]]
                runpy.run_path(str(REPO / words[1]), run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved_argv
        from hydra.core.global_hydra import GlobalHydra
        GlobalHydra.instance().clear()
    return Ran(code, out.getvalue(), err.getvalue())


def _shown(text: str, scratch: Path) -> list[str]:
    """The output's lines with the scratch dir's paths shown relative to it, as the page shows them."""
    return text.replace(f"{scratch}/", "").replace(str(scratch), ".").splitlines()


def _listing(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    for name, body in SCRATCH_FILES.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(body)
    monkeypatch.chdir(tmp_path)
    for name in UNSET_ENV:
        monkeypatch.delenv(name, raising=False)
    for name, value in SCRATCH_ENV.items():
        monkeypatch.setenv(name, str(tmp_path / value))
    return tmp_path


def test_the_page_lists_at_least_40_kinds_each_once():
    kinds = [c.kind for c in CASES]
    assert len(kinds) >= MIN_KINDS, f"{PAGE}: {len(kinds)} cases"
    assert len(set(kinds)) == len(kinds), "each kind once"
    assert all(c.message for c in CASES)


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[f"errors.md:{c.line}" for c in CASES])
def test_each_error_on_the_page_is_what_its_command_prints_with_exit_2_and_nothing_left(case, scratch):
    before = _listing(scratch)
    ran = _run(case.command, scratch)
    shown = _shown(ran.err, scratch)
    if os.environ.get("VERLSWEEP_WRITE_ERRORS_PAGE") == "1":
        _rewrite(case, [line for line in shown if line.strip()])
    assert ran.code == 2, f"{case.command}: exit {ran.code}\n{ran.err[-3000:]}"
    assert "Traceback" not in ran.err
    missing = [line for line in case.message if line not in shown]
    assert not missing or os.environ.get("VERLSWEEP_WRITE_ERRORS_PAGE") == "1", f"{case.command} printed:\n{ran.err}"
    assert _listing(scratch) == before, f"{case.command} left {sorted(_listing(scratch) - before)}"


def _rewrite(case: Case, lines: list[str]) -> None:
    text = PAGE.read_text()
    old = "```text\n" + "\n".join(case.message) + "\n```"
    start = text.index(case.command)
    at = text.index(old, start)
    PAGE.write_text(text[:at] + "```text\n" + "\n".join(lines) + "\n```" + text[at + len(old):])
