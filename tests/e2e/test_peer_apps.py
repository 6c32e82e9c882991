"""hydra-optuna-sweeper's apps and test configs, run through the verlsweep sweeper as its users would run them.

tests/support/peer_apps/ holds the peer's example apps and the configs of its test suite, written afresh with
`override hydra/sweeper: verlsweep`; each run here is `python <app>.py -m ...` in a subprocess, in its own
directory (the user's project), with the command lines of the peer's tests (hydra's
plugins/hydra_optuna_sweeper/tests/test_optuna_sweeper_plugin.py), asserting what those tests assert, and that
such an app gets no file, config key or MLflow run beyond what it asked for. One run per fixture, shared.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml

APPS = Path(__file__).resolve().parents[1] / "support" / "peer_apps"
RESULTS = "optimization_results.yaml"

pytestmark = pytest.mark.slow
optuna.logging.set_verbosity(optuna.logging.WARNING)


def sweep(where: Path, app: str, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    where.mkdir(parents=True, exist_ok=True)
    flags = [a for a in args if a.startswith("--")]        # --config-dir/--config-name before the overrides
    overrides = [a for a in args if not a.startswith("--")]
    proc = subprocess.run([sys.executable, str(APPS / app), *flags, "--multirun", f"hydra.sweep.dir={where / 'sweep'}",
                           *overrides], cwd=where, capture_output=True, text=True, timeout=300)
    if ok:
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def swept(factory: pytest.TempPathFactory, name: str, app: str, *args: str) -> Path:
    """A module fixture's run in its own directory."""
    where = factory.mktemp(name)
    sweep(where, app, *args)
    return where


def results(where: Path) -> dict:
    return yaml.safe_load((where / "sweep" / RESULTS).read_text())


def job_configs(where: Path) -> list[dict]:
    return [yaml.safe_load(p.read_text()) for p in sorted((where / "sweep").glob("*/.hydra/config.yaml"))]


def dominates(a: list[float], b: list[float]) -> bool:
    return all(x <= y for x, y in zip(a, b)) and any(x < y for x, y in zip(a, b))


# --- the sphere with TPE, a stored study (the peer's test_optuna_example) --------------------------------


@pytest.fixture(scope="module")
def sphere(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    where = tmp_path_factory.mktemp("sphere")
    proc = sweep(where, "sphere.py", "hydra.job.chdir=True", "hydra.sweeper.n_trials=20", "hydra.sweeper.n_jobs=1",
                 f"hydra.sweeper.storage=sqlite:///{where / 'test.db'}", "hydra.sweeper.study_name=test-optuna-example",
                 "hydra/sweeper/sampler=tpe", "hydra.sweeper.sampler.seed=123", "~z")
    return where, proc


def test_sphere_with_tpe_seed_123_finds_a_best_value_of_at_most_2_27_written_in_the_peers_schema(sphere):
    where, _ = sphere
    doc = results(where)
    best = optuna.load_study(study_name="test-optuna-example", storage=f"sqlite:///{where / 'test.db'}").best_trial
    assert list(doc) == ["name", "best_params", "best_value"]
    assert doc["name"] == "optuna"
    assert doc["best_params"] == best.params and set(best.params) == {"x", "y"}
    assert doc["best_value"] == best.value <= 2.27


def test_the_best_parameters_and_value_are_logged_as_the_peer_logs_them(sphere):
    _, proc = sphere
    doc = results(sphere[0])
    assert f"Best parameters: {doc['best_params']}" in proc.stdout
    assert f"Best value: {doc['best_value']}" in proc.stdout


def test_another_app_gets_no_file_config_key_or_mlflow_run_it_did_not_ask_for(sphere):
    where, proc = sphere
    assert sorted(p.name for p in where.iterdir()) == ["sweep", "test.db"]     # no mlflow.db, no default storage
    made = {p.name for p in (where / "sweep").iterdir() if not p.name.isdigit()}
    assert made == {"multirun.yaml", "trials.csv", "best.yaml", RESULTS}        # no report, plots, best_launch.sh
    configs = job_configs(where)
    assert len(configs) >= 10 and all(set(c) == {"x", "y", "error"} for c in configs)   # ~z deleted, nothing added
    for overrides in (where / "sweep").glob("*/.hydra/overrides.yaml"):
        assert {o.split("=")[0] for o in yaml.safe_load(overrides.read_text())} == {"x", "y", "~z"}
    assert "MLflow" not in proc.stdout + proc.stderr
    assert yaml.safe_load((where / "sweep" / "best.yaml").read_text())["launch_script"] is None


@pytest.fixture(scope="module")
def sphere_command_line(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with the command line's params (the peer's with_commandline=True): y fixed, x a choice."""
    return swept(tmp_path_factory, "sphere_cli", "sphere.py", "hydra.sweeper.n_trials=20",
                 "hydra/sweeper/sampler=tpe", "hydra.sweeper.sampler.seed=123", "~z", "x=choice(0, 1, 2)", "y=0")


def test_a_param_fixed_on_the_command_line_is_no_param_of_the_study(sphere_command_line):
    doc = results(sphere_command_line)
    assert doc["best_params"] == {"x": 0} and doc["best_value"] == 0
    # storage: null (the app's config): in memory, no file; each of x's 3 values launched once, the rest reused
    assert not list(sphere_command_line.glob("*.db"))
    assert sorted(c["x"] for c in job_configs(sphere_command_line)) == [0, 1, 2]


# --- the grid (the peer's tests/conf/test_grid.yaml) -------------------------------------------------------


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return swept(tmp_path_factory, "grid", "sphere.py", f"--config-dir={APPS / 'tests_conf'}",
                 "--config-name=test_grid", "hydra.job.chdir=False", "hydra.sweeper.n_trials=20")


def test_the_grid_runs_each_of_its_2_x_3_x_2_points_once_range_stop_included(grid):
    points = [(c["x"], c["y"], c["z"]) for c in job_configs(grid)]
    assert sorted(points) == sorted((x, y, z) for x in (-1, 1) for y in (-1.0, 0.0, 1.0) for z in ("foo", "bar"))
    doc = results(grid)
    assert doc["best_value"] == 1 and abs(doc["best_params"]["x"]) == 1 and doc["best_params"]["y"] == 0
    assert doc["best_params"]["z"] in ("foo", "bar")


# --- multi-objective: a returned tuple, no `objectives` -----------------------------------------------------


@pytest.fixture(scope="module")
def multi_objective(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return swept(tmp_path_factory, "multi", "multi_objective.py", "hydra.job.chdir=True",
                 "hydra.sweeper.n_trials=20", "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=123",
                 "x=range(0, 5)", "y=range(0, 3)")


def test_a_task_returning_a_tuple_gives_a_pareto_front_of_integer_params(multi_objective):
    doc = results(multi_objective)
    assert doc["name"] == "optuna" and doc["solutions"]
    for a in doc["solutions"]:
        assert set(a) == {"params", "values"} and len(a["values"]) == 2
        assert a["params"]["x"] % 1 == 0 and a["params"]["y"] % 1 == 0
        assert 0 <= a["params"]["x"] <= 5 and 0 <= a["params"]["y"] <= 3
        assert not any(dominates(b["values"], a["values"]) for b in doc["solutions"])


@pytest.fixture(scope="module")
def multi_objective_config_params(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same with the config's params: steps of 0.5 (the peer's with_commandline=False)."""
    return swept(tmp_path_factory, "multi_config", "multi_objective.py", "hydra.job.chdir=True",
                 "hydra.sweeper.n_trials=20", "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=123")


def test_the_configs_half_steps_give_a_pareto_front_of_half_step_params(multi_objective_config_params):
    solutions = results(multi_objective_config_params)["solutions"]
    assert solutions and all(a["params"]["x"] % 1 in (0, 0.5) and a["params"]["y"] % 1 in (0, 0.5)
                             for a in solutions)
    assert not any(dominates(b["values"], a["values"]) for a in solutions for b in solutions)


@pytest.fixture(scope="module")
def motpe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The peer's tests/conf/test_motpe.yaml: the `motpe` group (TPE's multi-objective sampler)."""
    return swept(tmp_path_factory, "motpe", "multi_objective.py", f"--config-dir={APPS / 'tests_conf'}",
                 "--config-name=test_motpe", "hydra.sweeper.n_trials=4")


def test_the_motpe_sampler_group_runs_a_multi_objective_sweep(motpe):
    doc = results(motpe)
    assert doc["solutions"] and all(p["params"]["x"] % 0.5 == 0 for p in doc["solutions"])


# --- custom_search_space ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def custom_space(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return swept(tmp_path_factory, "custom", "custom_search_space_objective.py", "hydra.job.chdir=True",
                 "hydra.sweeper.n_trials=10", "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=123",
                 "max_z_difference_from_x=0.3")


def test_custom_search_space_adds_params_that_depend_on_the_trials_own(custom_space):
    doc = results(custom_space)
    assert abs(doc["best_params"]["x"] - doc["best_params"]["z"]) <= 0.3
    assert 0 <= doc["best_params"]["+w"] <= 1
    assert all(abs(c["x"] - c["z"]) <= 0.3 and 0 <= c["w"] <= 1 for c in job_configs(custom_space))


# --- max_failure_rate (the peer's test_failure_rate) --------------------------------------------------------


@pytest.mark.parametrize("rate, n_trials", [(0.5, 20), (1.0, 4)])
def test_max_failure_rate_stops_the_sweep_only_when_a_batch_fails_beyond_it(tmp_path, rate, n_trials):
    proc = sweep(tmp_path, "sphere.py", "hydra.job.chdir=True", f"hydra.sweeper.n_trials={n_trials}",
                 "hydra.sweeper.n_jobs=2", "hydra/sweeper/sampler=random", "hydra.sweeper.sampler.seed=123",
                 f"hydra.sweeper.max_failure_rate={rate}", "error=true", ok=False)
    error = "RuntimeError: cfg.error is True"
    if rate < 1.0:
        assert proc.returncode != 0 and error in proc.stderr and "max_failure_rate=0.5" in proc.stderr
        assert len(job_configs(tmp_path)) == 2                    # stopped after the first batch
    else:
        assert proc.returncode == 0 and error not in proc.stderr
        assert len(job_configs(tmp_path)) == n_trials
        assert not (tmp_path / "sweep" / RESULTS).exists()       # no completed trial: nothing to report


# --- an app with keys named like ours, and the deprecated search_space --------------------------------------


def test_an_app_with_its_own_trial_and_tracking_keys_keeps_them_untouched(tmp_path):
    sweep(tmp_path, "sphere.py", "hydra.sweeper.n_trials=3", "+trial.number=42", "+tracking.enabled=true")
    configs = job_configs(tmp_path)
    assert len(configs) == 3
    assert all(c["trial"] == {"number": 42} and c["tracking"] == {"enabled": True} for c in configs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sweep"]


def test_the_deprecated_search_space_is_used_with_a_deprecation_line(tmp_path):
    proc = sweep(tmp_path, "sphere.py", f"--config-dir={APPS / 'tests_conf'}",
                 "--config-name=test_deprecated_search_space", "hydra.sweeper.n_trials=3")
    assert "DeprecationWarning: hydra.sweeper.search_space is deprecated" in proc.stdout + proc.stderr
    assert {c["x"] % 0.5 for c in job_configs(tmp_path)} == {0.0}
    assert set(results(tmp_path)["best_params"]) == {"x"}
