"""The package's layout keeps data flowing one way: no stage imports a later one.

    sweep.py -> hydra_plugins/verlsweep_sweeper (thin: Hydra's side) -> verlsweep.study (the sweep)
    -> Hydra's launcher -> task.py -> config -> command -> plan -> trial -> tracking; reconcile and
    report after (study imports report for report.html, so what report's --status shares with the
    sweep, the study's record, is reconcile, below both).

Inside the planner the same holds between its subpackages: trace <- predictor <- fit <- cli.

Imports are found with ast.walk: at module level and inside functions alike. The Optuna private API
is used in one module only (verlsweep/common/optuna_private.py); tests/ may use it directly (e.g.
test_study_create's `optuna.samplers._tpe.sampler._split_trials`) and are not checked.
"""
from __future__ import annotations

import ast
from pathlib import Path

import optuna

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "verlsweep"
PLUGIN = REPO / "hydra_plugins"
OPTUNA_ADAPTER = PKG / "common" / "optuna_private.py"

# stage -> the verlsweep subpackages it may import (besides itself); the order data flows in
ALLOWED = {
    "common": set(),
    "config": {"common"},
    "command": {"common", "config"},
    "plan": {"common", "config", "command"},
    "trial": {"common", "config", "command", "plan"},
    "tracking": {"common", "config", "command", "plan", "trial"},
    "study_link": {"common"},
    "reconcile": {"common", "trial", "tracking", "study_link"},
    "report": {"common", "proofs", "tracking", "study_link", "reconcile"},
    "proofs": {"common"},
    # orchestrates the sweep; nothing in verlsweep imports it (only hydra_plugins does)
    "study": {"common", "config", "command", "plan", "proofs", "tracking", "reconcile", "report", "study_link"},
}


def _stage(module: str) -> str | None:
    """The stage a verlsweep module belongs to (None for the package root's own names, e.g. CONF_DIR)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in (*ALLOWED, "task") else None


def _imports(path: Path, package: str = "verlsweep") -> list[str]:
    """Every module of `package` a file imports, at top level or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = node.module
            found += [f"{base}.{a.name}" if base == package else base for a in node.names]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names]
    return [m for m in found if m == package or m.startswith(f"{package}.")]


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


def test_only_the_sweeper_plugin_imports_the_study():
    """verlsweep.study runs the sweep: task.py, the package root and every other stage stay below it."""
    bad = [f"{path.relative_to(REPO)}: imports {m}"
           for path in [*sorted(PKG.rglob("*.py")), REPO / "sweep.py"]
           if PKG / "study" not in path.parents
           for m in _imports(path) if _stage(m) == "study"]
    assert not bad, "\n".join(bad)


def test_nothing_in_verlsweep_imports_hydra_plugins():
    """The plugin is Hydra's thin side of the sweep; the library works without it (hydra_plugins may
    import anything in verlsweep, so it is not checked the other way)."""
    bad = [f"{path.relative_to(REPO)}: imports {m}"
           for path in [*sorted(PKG.rglob("*.py")), REPO / "sweep.py"] for m in _imports(path, "hydra_plugins")]
    assert not bad, "\n".join(bad)


MAX_MODULE_LINES = 400       # a module past this does more than one job: split it by job


def test_no_module_is_over_400_lines():
    long = {str(p.relative_to(REPO)): n for p in [*PKG.rglob("*.py"), *PLUGIN.rglob("*.py"), REPO / "sweep.py"]
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"


# what would let the loop tell verlsweep's task from another Hydra app: the hooks' classes, the chooser
APP_NAMES = ("verl_hooks", "VerlHooks", "AppHooks", "is_own_task")


def _app_branches(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
    names += [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    names += [a.name.rsplit(".", 1)[-1] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
              for a in n.names]
    names += [n.module.rsplit(".", 1)[-1] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    return sorted({n for n in names if n in APP_NAMES})


def test_the_sweep_loop_never_asks_which_app_it_runs():
    """The sweeper chooses the hooks once; the loop only calls the TaskHooks protocol."""
    assert _app_branches(PKG / "study" / "loop.py") == []


def test_the_app_branch_checker_sees_a_branch(tmp_path):
    f = tmp_path / "loop.py"
    f.write_text("from verlsweep.study.hooks import AppHooks\n"
                 "def run(h):\n    if isinstance(h, AppHooks) or is_own_task(h):\n        pass\n")
    assert _app_branches(f) == ["AppHooks", "is_own_task"]


def test_the_sweeper_plugin_keeps_only_what_hydra_needs():
    """config (dataclasses + registration), the registered class and _impl (the Hydra glue)."""
    modules = {p.name for p in (PLUGIN / "verlsweep_sweeper").glob("*.py")}
    assert modules == {"__init__.py", "config.py", "verlsweep_sweeper.py", "_impl.py"}


# plugin dir -> its modules: Hydra imports every module under hydra_plugins/ in every Hydra app's process
PLUGIN_MODULES = {
    "verlsweep_sweeper": {"__init__.py", "config.py", "verlsweep_sweeper.py", "_impl.py"},
    "verlsweep_launcher": {"__init__.py", "slurm_launcher.py"},
    # the SearchPathPlugin and the ConfigSource it adds (sweeps/ as group `space`)
    "verlsweep_searchpath": {"__init__.py", "searchpath.py", "space_source.py"},
}


def test_every_plugin_dir_keeps_only_what_hydra_needs():
    found = {d.name: {p.name for p in d.glob("*.py")} for d in PLUGIN.iterdir()
             if d.is_dir() and d.name != "__pycache__"}
    assert found == PLUGIN_MODULES


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


# verlsweep.plan's subpackages -> the ones each may import (besides itself): the tracer knows nothing of the
# planner, the predictor asks it for the trainer's terms, the fits use both, the command line everything.
# The package root (its public API) and __main__ may import any of them.
PLANNER = PKG / "plan"
PLANNER_ALLOWED = {
    "trace": set(),
    "predictor": {"trace"},
    "fit": {"trace", "predictor"},
    "cli": {"trace", "predictor", "fit"},
}


def _planner_violations(path: Path, own: str) -> list[str]:
    """What a module of the planner's subpackage `own` imports against the direction: a later subpackage,
    or the package root (whose __init__ imports the predictor, so a way round the rule and a cycle)."""
    bad = []
    for module in _imports(path, "verlsweep.plan"):    # `from verlsweep.plan import fit` is verlsweep.plan.fit
        parts = module.split(".")
        target = parts[2] if len(parts) > 2 else None
        if target not in PLANNER_ALLOWED:
            bad.append(f"imports {module} (the package root: name the subpackage)")
        elif target != own and target not in PLANNER_ALLOWED[own]:
            allowed = sorted(PLANNER_ALLOWED[own]) or "nothing"
            bad.append(f"imports {module} ({own} may import {allowed} of the planner)")
    return bad


def test_the_planner_s_subpackages_import_one_way():
    """trace <- predictor <- fit <- cli: a later one may import an earlier one, never the reverse."""
    bad = [f"{path.relative_to(PKG)}: {why}"
           for own in PLANNER_ALLOWED for path in sorted((PLANNER / own).rglob("*.py"))
           for why in _planner_violations(path, own)]
    assert not bad, "\n".join(bad)


def test_every_planner_module_is_in_a_subpackage_whose_docstring_says_what_it_may_import():
    flat = sorted(p.name for p in PLANNER.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert not flat, f"modules outside the planner's subpackages: {flat}"
    assert {p.name for p in PLANNER.iterdir() if (p / "__init__.py").exists()} == set(PLANNER_ALLOWED)
    missing = [own for own in PLANNER_ALLOWED
               if "May import" not in (ast.get_docstring(ast.parse((PLANNER / own / "__init__.py").read_text())) or "")]
    assert not missing, f"planner subpackages without a docstring naming what they may import: {missing}"


def test_the_planner_checker_sees_a_violation(tmp_path):
    """An earlier subpackage importing a later one, inside a function, or the package root, is caught."""
    f = tmp_path / "x.py"
    f.write_text("from verlsweep.plan.trace import trace_pass\n"
                 "def f():\n    from verlsweep.plan.cli.table import grid\n"
                 "def g():\n    from verlsweep.plan import fit\n"
                 "def h():\n    import verlsweep.plan\n")
    assert _planner_violations(f, "predictor") == [
        "imports verlsweep.plan.cli.table (predictor may import ['trace'] of the planner)",
        "imports verlsweep.plan.fit (predictor may import ['trace'] of the planner)",
        "imports verlsweep.plan (the package root: name the subpackage)"]
    assert _planner_violations(f, "cli") == ["imports verlsweep.plan (the package root: name the subpackage)"]
    assert len(_planner_violations(f, "trace")) == 3


def test_the_checker_sees_a_violation(tmp_path):
    """The layout check finds a later-stage import inside a function, not just at the top."""
    f = tmp_path / "x.py"
    f.write_text("def f():\n    from verlsweep.tracking.mlflow_runs import TrialRun\n")
    assert [m for m in _imports(f) if _stage(m) == "tracking"]


def test_the_checker_sees_a_function_level_import_of_hydra_plugins(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def f():\n    if True:\n        from hydra_plugins.verlsweep_sweeper import _impl\n"
                 "def g():\n    import hydra_plugins.verlsweep_sweeper.config\n")
    assert sorted(_imports(f, "hydra_plugins")) == ["hydra_plugins.verlsweep_sweeper",
                                                    "hydra_plugins.verlsweep_sweeper.config"]


# --- the Optuna private API ------------------------------------------------------------------------------


def _optuna_private_names() -> set[str]:
    """Private attributes of the Optuna objects verlsweep holds (study, trials, storages): the class's
    own and what their __init__ sets (Study._storage, Study._study_id, Trial._trial_id, ...)."""
    import optuna.storages._heartbeat as heartbeat

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)     # no "A new study created" line
    try:
        study = optuna.create_study()
    finally:
        optuna.logging.set_verbosity(verbosity)
    trial = study.ask()
    objects = [study, trial, study.get_trials(deepcopy=False)[0], optuna.storages.InMemoryStorage(),
               optuna.storages.RDBStorage, heartbeat.BaseHeartbeat, optuna.storages.BaseStorage]
    names = {n for o in objects for n in [*dir(o), *getattr(o, "__dict__", {})]}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _dotted(node: ast.AST) -> list[str] | None:
    """['optuna', 'storages', '_heartbeat', 'f'] for optuna.storages._heartbeat.f; None if not a plain chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def _optuna_private_uses(path: Path, private: set[str]) -> list[str]:
    """`x._storage`-like attributes of Optuna objects (not on self/cls: verlsweep's own privates), and any
    `optuna.<...>._<name>` module or name, imported or reached through attributes."""
    def private_part(parts: list[str]) -> bool:
        return parts[0] == "optuna" and any(p.startswith("_") and not p.startswith("__") for p in parts[1:])

    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        where = f"{path.relative_to(REPO) if REPO in path.parents else path.name}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Attribute):
            chain = _dotted(node)
            if chain and private_part(chain):
                found.append(f"{where}: {'.'.join(chain)}")
            elif node.attr in private and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.append(f"{where}: .{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                if private_part([*node.module.split("."), alias.name]):
                    found.append(f"{where}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if private_part(a.name.split("."))]
    return sorted(set(found))


def test_the_optuna_private_api_is_used_in_the_adapter_only():
    private = _optuna_private_names()
    files = [*PKG.rglob("*.py"), *PLUGIN.rglob("*.py"), REPO / "sweep.py", *(REPO / "benchmarks").rglob("*.py")]
    bad = [use for path in sorted(files) if path != OPTUNA_ADAPTER for use in _optuna_private_uses(path, private)]
    assert not bad, ("Optuna private API outside verlsweep/common/optuna_private.py (add a function there, with "
                     "why no public call does it):\n" + "\n".join(bad))


def test_the_optuna_checker_sees_a_private_use(tmp_path):
    private = _optuna_private_names()
    assert {"_storage", "_study_id", "_trial_id", "_get_stale_trial_ids", "_should_skip_enqueue"} <= private
    f = tmp_path / "x.py"
    f.write_text("import optuna\n"
                 "from optuna.samplers._tpe.sampler import _split_trials\n"
                 "def f(study, t):\n"
                 "    study._storage.get_trial(t._trial_id)\n"
                 "    return optuna.storages._heartbeat.is_heartbeat_enabled(study._storage)\n"
                 "class C:\n"
                 "    def g(self):\n"
                 "        return self._storage\n")            # verlsweep's own private attribute: fine
    uses = _optuna_private_uses(f, private)
    assert uses == ["x.py:2: from optuna.samplers._tpe.sampler import _split_trials", "x.py:4: ._storage",
                    "x.py:4: ._trial_id", "x.py:5: ._storage", "x.py:5: optuna.storages._heartbeat",
                    "x.py:5: optuna.storages._heartbeat.is_heartbeat_enabled"], uses
    assert not _optuna_private_uses(OPTUNA_ADAPTER.with_name("names.py"), private)
