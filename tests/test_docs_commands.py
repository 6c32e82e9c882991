"""The guide's commands run: every ```bash block of README.md and docs/*.md is executed, so the user
guide cannot drift from the code.

Convention (also in docs/architecture.md):

* A fenced ```bash block holds commands this test runs, one per line (a line ending in ``\\`` goes
  on); ``#`` comments are allowed. Each command is one test case with the id ``<file>:<line>``.
* A ```bash block whose previous non-blank line is ``<!-- not run: <reason> -->`` is shown, not run
  (it needs an NPU/GPU node, a Slurm cluster, a long-running server such as ``mlflow ui``, or it
  installs a venv: ``./quickstart`` itself is covered by tests/e2e/test_quickstart.py).
* Output goes in ```console or ```text blocks, which are never run.

The commands of one page run in order in one directory of their own, so a later command may read
what an earlier one wrote (a sweep, then the report on its sweep dir); each runs in its own bash,
so only files carry over. That directory holds links to the checkout's files (``sweep.py``, ``conf``,
...), so ``python sweep.py`` works as in the docs while the Optuna and MLflow stores, ``outputs/``
and ``$HOME`` all lie in the test's temporary directory: nothing is written into the checkout.
``python`` is this test's interpreter (its bin dir first on PATH).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(?P<reason>.+?)\s*-->$")
FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<lang>[\w+-]*)")
# checkout entries a doc command never needs, or that would carry a user's own runs into the test
NOT_LINKED = {"outputs", "multirun", "mlruns", "venv"}
COMMAND_TIMEOUT = 600


@dataclass(frozen=True)
class Command:
    doc: Path
    line: int             # 1-based line of the command's first line in the doc
    text: str
    skip_reason: str | None

    @property
    def id(self) -> str:
        return f"{_rel(self.doc)}:{self.line}"


def _rel(path: Path) -> str:
    try:
        return path.relative_to(REPO).as_posix()
    except ValueError:
        return path.name


def collect(doc: Path) -> list[Command]:
    """The commands of every ```bash block in `doc`, in order, with the block's skip reason."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    commands: list[Command] = []
    previous = ""          # the last non-blank line outside a block
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i].strip())
        if not match:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        fence, lang = match["fence"], match["lang"].lower()
        start = i + 1
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        body = lines[start:i]
        i += 1
        if lang in ("bash", "sh", "shell"):
            skipped = NOT_RUN.match(previous)
            reason = skipped["reason"] if skipped else None
            commands.extend(_split(doc, start + 1, body, reason))
        previous = ""
    return commands


def _split(doc: Path, first_line: int, body: list[str], reason: str | None) -> list[Command]:
    commands: list[Command] = []
    pending: list[str] = []
    pending_line = 0
    for offset, raw in enumerate(body):
        line = raw.rstrip()
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            pending_line = first_line + offset
        pending.append(line)
        if not line.endswith("\\"):
            commands.append(Command(doc, pending_line, "\n".join(pending), reason))
            pending = []
    if pending:
        commands.append(Command(doc, pending_line, "\n".join(pending), reason))
    return commands


def docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def workdir_for(root: Path) -> Path:
    """A directory that looks like the checkout (links to its entries) but holds nothing of its state."""
    work = root / "repo"
    work.mkdir(parents=True)
    for entry in REPO.iterdir():
        if entry.name.startswith(".") or entry.name in NOT_LINKED or entry.suffix in (".db", ".log"):
            continue
        (work / entry.name).symlink_to(entry)
    for sub in ("home", "models", "data"):
        (root / sub).mkdir()
    return work


def command_env(root: Path, work: Path) -> dict[str, str]:
    env = dict(os.environ)
    for name in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "HYDRA_FULL_ERROR",
                 "RAY_ADDRESS", "VIRTUAL_ENV"):
        env.pop(name, None)
    env.update({
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "HOME": str(root / "home"),
        "VERLSWEEP_MODEL_ROOT": str(root / "models"),
        "VERLSWEEP_DATA_ROOT": str(root / "data"),
        "VERLSWEEP_OUTPUT_ROOT": str(work / "outputs"),
        "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'mlflow.db'}",
        "COLUMNS": "120",
    })
    return env


def run(command: Command, root: Path, work: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-o", "pipefail", "-c", command.text], cwd=work, env=command_env(root, work),
                          capture_output=True, text=True, timeout=COMMAND_TIMEOUT)


def failure(command: Command, proc: subprocess.CompletedProcess) -> str:
    return (f"{command.id}: `{command.text}` exited {proc.returncode}\n"
            f"--- stdout (tail)\n{proc.stdout[-3000:]}\n--- stderr (tail)\n{proc.stderr[-3000:]}")


# --- the documented commands -------------------------------------------------------------------

ALL = [c for doc in docs() for c in collect(doc)]


class Page:
    """One doc's directory, and which of its commands have run there.

    pytest-xdist may hand a page's commands to different workers, so the directory lies in the run's
    base temp dir that all workers share, and a lock makes its commands run one at a time, each once:
    a command whose earlier commands have not run yet runs them first (in doc order)."""

    def __init__(self, root: Path, template_store: Path):
        self.root = root
        self.work = root / "repo"
        self.done_file = root / "done.txt"
        root.mkdir(parents=True, exist_ok=True)
        with self.lock():
            if not self.work.exists():
                workdir_for(root)
                shutil.copy(template_store, self.work / "mlflow.db")  # creating the schema takes seconds

    @contextlib.contextmanager
    def lock(self):
        with open(self.root.with_suffix(".lock"), "w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def done(self) -> set[str]:
        return set(self.done_file.read_text().split()) if self.done_file.exists() else set()

    def ran(self, command: Command) -> None:
        with open(self.done_file, "a") as handle:
            handle.write(command.id + "\n")


@pytest.fixture(scope="session")
def pages_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "docs-pages"


def _case(command: Command):
    marks = [pytest.mark.slow]
    if command.skip_reason:
        marks.append(pytest.mark.skip(reason=f"not run: {command.skip_reason}"))
    return pytest.param(command, id=command.id, marks=marks)


@pytest.mark.parametrize("command", [_case(c) for c in ALL])
def test_documented_command_runs(command: Command, pages_root: Path, empty_mlflow_db: Path) -> None:
    page = Page(pages_root / _rel(command.doc).replace("/", "_"), empty_mlflow_db)
    with page.lock():
        before = _checkout_entries()
        for step in (c for c in ALL if c.doc == command.doc and c.line <= command.line):
            if step.skip_reason or step.id in page.done():
                continue
            proc = run(step, page.root, page.work)
            assert proc.returncode == 0, failure(step, proc)
            page.ran(step)
        assert command.id in page.done()
        assert _checkout_entries() <= before, f"{command.id} wrote into the checkout: {_checkout_entries() - before}"


def _checkout_entries() -> set[str]:
    """What a sweep run from the checkout would leave there: stores, MLflow artifacts, run and sweep dirs."""
    return ({p.name for p in REPO.iterdir() if p.suffix == ".db" or p.name in NOT_LINKED}
            | {str(p) for p in (REPO / "outputs").glob("*/*")})


# --- the checker itself ------------------------------------------------------------------------

def test_not_run_blocks_are_skipped_with_their_reason_and_output_blocks_ignored(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    doc.write_text(
        "# A page\n"
        "\n"
        "```bash\n"
        "python sweep.py dry_run=true   # runs\n"
        "python -m verlsweep.plan \\\n"
        "    hardware=a2_64g\n"
        "```\n"
        "\n"
        "<!-- not run: needs an NPU node -->\n"
        "```bash\n"
        "# a comment line is no command\n"
        "python sweep.py -m hardware=a2_64g\n"
        "```\n"
        "\n"
        "```console\n"
        "$ python sweep.py nosuchgroup=x\n"
        "```\n"
        "```text\n"
        "python sweep.py nosuchgroup=x\n"
        "```\n",
        encoding="utf-8")
    commands = collect(doc)
    assert [(c.line, c.text, c.skip_reason) for c in commands] == [
        (4, "python sweep.py dry_run=true   # runs", None),
        (5, "python -m verlsweep.plan \\\n    hardware=a2_64g", None),
        (12, "python sweep.py -m hardware=a2_64g", "needs an NPU node"),
    ]
    assert commands[2].id == "page.md:12"


def test_every_code_block_says_what_it_is() -> None:
    """An untagged block would hold a command the check never sees: tag it bash, console or text."""
    untagged = []
    for doc in docs():
        inside = False
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            match = FENCE.match(line.strip())
            if not match:
                continue
            if not inside and not match["lang"]:
                untagged.append(f"{_rel(doc)}:{n}")
            inside = not inside
    assert not untagged, f"code blocks without a language: {untagged}"


def test_relative_links_in_the_docs_resolve() -> None:
    broken = []
    for doc in docs():
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not (doc.parent / target.split("#")[0]).exists():
                broken.append(f"{_rel(doc)} -> {target}")
    assert not broken, broken


def test_the_readme_stays_a_front_page() -> None:
    assert (REPO / "README.md").stat().st_size <= 12 * 1024, "README.md over 12 KB: move detail to docs/"


@pytest.mark.slow
def test_a_broken_documented_command_fails_its_case(tmp_path: Path, empty_mlflow_db: Path) -> None:
    doc = tmp_path / "broken.md"
    doc.write_text("```bash\npython sweep.py nosuchgroup=x dry_run=true\n```\n\n"
                   "<!-- not run: a server -->\n```bash\nmlflow ui\n```\n", encoding="utf-8")
    broken, server = collect(doc)
    assert server.skip_reason == "a server"
    page = Page(tmp_path / "page", empty_mlflow_db)
    proc = run(broken, page.root, page.work)
    assert proc.returncode != 0
    message = failure(broken, proc)
    assert message.startswith("broken.md:2: `python sweep.py nosuchgroup=x dry_run=true` exited")
    assert "nosuchgroup" in message.split("--- stderr", 1)[1]      # the command's own error is shown
    assert not list((page.work / "outputs").glob("runs/*/command.json"))
