"""The package's layout keeps data flowing one way: no stage imports a later one."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "verlsweep"

# stage -> the verlsweep subpackages it may import (besides itself); the order data flows in
ALLOWED = {
    "common": set(),
    "command": {"common"},
    "plan": {"common", "command"},
    "trial": {"common", "command", "plan"},
    "tracking": {"common", "command", "plan", "trial"},
    "study_link": {"common"},
    "reconcile": {"common", "trial", "tracking", "study_link"},
    "report": {"common", "infer", "tracking", "study_link", "reconcile"},
    "infer": {"common"},
}


def _stage(module: str) -> str | None:
    """The stage a verlsweep module belongs to (None for the package root's own names, e.g. CONF_DIR)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in (*ALLOWED, "task") else None


def _imports(path: Path) -> list[str]:
    """Every verlsweep module a file imports, at top level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            found += [f"{base}.{a.name}" if base == "verlsweep" else base for a in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    return [m for m in found if m.startswith("verlsweep.")]


def test_no_stage_imports_a_later_stage_or_the_task():
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        own = rel.parts[0].removesuffix(".py")
        if own not in ALLOWED:
            continue
        for module in _imports(path):
            target = _stage(module)
            if target and target != own and target not in ALLOWED[own]:
                bad.append(f"{rel}: imports {module} ({own} may import {sorted(ALLOWED[own]) or 'nothing'})")
    assert not bad, "\n".join(bad)


def test_every_stage_is_a_subpackage_whose_docstring_says_what_it_may_import():
    missing = []
    for stage in ALLOWED:
        init = PKG / stage / "__init__.py"
        if stage == "study_link":
            init = PKG / "study_link.py"
        doc = ast.get_docstring(ast.parse(init.read_text())) if init.exists() else None
        if not doc or ("May import" not in doc and stage not in ("study_link",)):
            missing.append(stage)
    assert not missing, f"stages without a docstring naming what they may import: {missing}"


def test_the_checker_sees_a_violation(tmp_path):
    """The layout check finds a later-stage import inside a function, not just at the top."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from verlsweep.tracking.mlflow_runs import TrialRun\n")
    assert [m for m in _imports(f) if _stage(m) == "tracking"]
