"""`./quickstart`: from a fresh clone to the Quickstart's results (or the tests) in one command.

The set-up runs against an overlay venv made here: its packages are this interpreter's (a .pth file)
and, where a test says so, its `pip` is a recorder. So the script's real install path runs (look-ups,
installs, the stamp it writes afterwards, as in a fresh CI venv) while nothing is installed anywhere.
"""
from __future__ import annotations

import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import time
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = "quickstart"
PY_VERSION = f"{sys.version_info[0]}.{sys.version_info[1]}"
UNREACHABLE = "http://127.0.0.1:9"     # the discard port: nothing listens, the connection is refused at once

FAKE_PIP = """\
import json, pathlib, sys
args = sys.argv[1:]
# a constraints file is deleted once pip returns: keep what it said
kept = pathlib.Path(args[args.index("-c") + 1]).read_text().split() if "-c" in args else []
with open(pathlib.Path(sys.prefix) / "pip-calls.jsonl", "a") as f:
    f.write(json.dumps({"args": args, "constraints": kept}) + "\\n")
if "index" in args:
    print("torch (2.13.0)\\nAvailable versions: 2.13.0")
"""


def _copy_repo(dst: Path, only: tuple[str, ...] = ()) -> Path:
    """The files of this checkout git knows of (committed or not), as a fresh clone would have them."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        src = REPO / name
        if (only and name not in only) or not os.path.lexists(src):
            continue
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst / name, follow_symlinks=False)
    return dst.resolve()


def _overlay_venv(path: Path, *, fake_pip: bool) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    own = Path(subprocess.run([str(path / "bin" / "python"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              capture_output=True, text=True, check=True).stdout.strip())
    shared = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    # addsitedir, not a bare path: the shared dir's own .pth files (editable installs) apply too
    (own / "shared.pth").write_text("".join(f"import site; site.addsitedir({d!r})\n" for d in shared))
    if fake_pip:   # our site-packages precede the shared ones, so `python -m pip` finds this one
        (own / "pip").mkdir()
        (own / "pip" / "__init__.py").write_text("")
        (own / "pip" / "__main__.py").write_text(FAKE_PIP)
    return path.resolve()


def _pip_calls(venv: Path) -> list[dict]:
    log = venv / "pip-calls.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _env(**extra: str) -> dict[str, str]:
    """The caller's environment minus what would point the script or the sweep elsewhere."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("VERLSWEEP_", "MLFLOW_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(extra)
    return env


def _run(repo: Path, *args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(repo / SCRIPT), *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _fake_python(path: Path, body: str) -> Path:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _one_clear_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.slow
def test_quickstart_runs_the_estimate_sweep_prints_the_mlflow_line_and_installs_only_once(tmp_path):
    repo = _copy_repo(tmp_path / "clone")
    venv = _overlay_venv(tmp_path / "venv", fake_pip=True)
    env = _env(VERLSWEEP_VENV=str(venv))

    first = _run(repo, "hydra.sweeper.n_trials=3", env=env, timeout=900)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    installs = [c["args"] for c in _pip_calls(venv) if "install" in c["args"]]
    assert [a[-1] for a in installs] == ["pip", "torch==2.13.0", ".[verl,test]"]
    # PyPI's Linux torch is the CUDA build; where PyTorch's index is unreachable, one line said so
    if platform.system() == "Linux" and "download.pytorch.org/whl/cpu is unreachable" not in first.stdout:
        assert "https://download.pytorch.org/whl/cpu" in installs[1]
    assert "quickstart: installing the project with extras verl,test" in first.stdout
    [trials] = (repo / "outputs" / "sweeps").glob("*/trials.csv")
    with trials.open() as f:
        rows = list(csv.DictReader(f))
    assert len([r for r in rows if not r["confirms"]]) == 3          # the long-run confirmations come on top
    assert [r["confirms"] for r in rows if r["confirms"]]
    assert f"quickstart: results: {trials.parent} (trials.csv" in first.stdout
    assert f"mlflow ui --backend-store-uri sqlite:///{repo}/mlflow.db" in first.stdout
    assert (repo / "mlflow.db").is_file()

    calls_before = _pip_calls(venv)
    second = _run(repo, "hydra.sweeper.n_trials=3", env=env, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert f"quickstart: environment up to date ({venv}/bin/python)" in second.stdout
    assert "complete: 3/3 trials" in second.stdout                  # a re-run of the finished study
    assert f"results: {trials.parent} (trials.csv" in second.stdout   # names the sweep dir itself
    assert "printed above" not in second.stdout
    assert "installing" not in second.stdout
    assert _pip_calls(venv) == calls_before
    assert f"mlflow ui --backend-store-uri sqlite:///{repo}/mlflow.db" in second.stdout


def test_the_setup_installs_again_only_when_pyproject_changes(tmp_path):
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    venv = _overlay_venv(tmp_path / "venv", fake_pip=True)
    env = _env(VERLSWEEP_VENV=str(venv), VERLSWEEP_TORCH_INDEX="pypi")

    def installs() -> list[list[str]]:
        proc = _run(repo, "test", "--version", env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "pytest" in proc.stdout + proc.stderr        # the arguments reach pytest
        return [c["args"] for c in _pip_calls(venv) if "install" in c["args"]]

    first = installs()
    assert [a[-1] for a in first] == ["pip", "torch==2.13.0", ".[verl,test]"]
    assert "--index-url" not in first[1]                     # pypi: pip's own index
    assert installs() == first
    with (repo / "pyproject.toml").open("a") as f:
        f.write("# changed\n")
    assert len(installs()) == 2 * len(first)


@pytest.mark.parametrize("dont_write", ["", "1"], ids=["bytecode-cached-on-import", "PYTHONDONTWRITEBYTECODE"])
def test_pip_compiles_at_install_only_where_python_may_not_cache_bytecode_itself(tmp_path, dont_write):
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    venv = _overlay_venv(tmp_path / "venv", fake_pip=True)
    env = {k: v for k, v in _env(VERLSWEEP_VENV=str(venv), VERLSWEEP_TORCH_INDEX="pypi").items()
           if k != "PYTHONDONTWRITEBYTECODE"}
    if dont_write:
        env["PYTHONDONTWRITEBYTECODE"] = dont_write
    proc = _run(repo, "test", "--version", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _, torch, project = [c["args"] for c in _pip_calls(venv) if "install" in c["args"]]
    expected = "--compile" if dont_write else "--no-compile"
    assert expected in torch and expected in project


def test_npu_installs_the_npu_extra_into_the_current_python_and_pins_its_torch(tmp_path):
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    python = _overlay_venv(tmp_path / "image", fake_pip=True)
    proc = _run(repo, "--npu", "test", "--version", env=_env(VERLSWEEP_PYTHON=str(python / "bin" / "python")))
    assert proc.returncode == 0, proc.stdout + proc.stderr

    [install] = [c for c in _pip_calls(python) if "install" in c["args"]]
    assert install["args"][-2:] == ["-e", ".[verl,npu,test]"]
    assert f"torch=={version('torch')}" in install["constraints"]
    assert not (repo / ".venv").exists()
    assert (python / "verlsweep-quickstart.stamp").is_file()


def test_without_a_suitable_python_it_says_which_versions_it_needs(tmp_path):
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    old = _fake_python(tmp_path / "python3", "echo 3.9; exit 1")
    proc = _run(repo, env=_env(VERLSWEEP_PYTHON=str(old)))
    line = _one_clear_line(proc)
    assert ">=3.10,<3.13" in line and "(3.9)" in line and "VERLSWEEP_PYTHON" in line
    assert not (repo / ".venv").exists()


def test_without_the_venv_module_it_names_the_package_to_install(tmp_path):
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    debian_like = _fake_python(tmp_path / "python3",    # Debian's python3 without python3-venv
                               'case "$*" in *ensurepip*) exit 1 ;; esac\n'
                               f'exec {sys.executable} "$@"')
    proc = _run(repo, env=_env(VERLSWEEP_PYTHON=str(debian_like)))
    line = _one_clear_line(proc)
    assert f"apt-get install python{PY_VERSION}-venv" in line
    assert not (repo / ".venv").exists()


@pytest.mark.parametrize("unreachable", ["torch", "setuptools"])
def test_without_network_to_an_index_it_says_which_and_how_to_point_elsewhere(tmp_path, unreachable):
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    venv = _overlay_venv(tmp_path / "venv", fake_pip=False)   # the real pip, which must stop at its look-up
    env = {k: v for k, v in _env().items() if not k.startswith("PIP_")}
    env.update(VERLSWEEP_VENV=str(venv), PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL=f"{UNREACHABLE}/simple",
               TMPDIR=str(tmp_path))   # pip's output is kept there for the user to read
    if unreachable == "torch":
        env["VERLSWEEP_TORCH_INDEX"] = f"{UNREACHABLE}/whl/cpu"
    else:
        wheels = tmp_path / "wheels"
        wheels.mkdir()
        (wheels / "torch-2.13.0-py3-none-any.whl").touch()
        env.update(VERLSWEEP_TORCH_INDEX="none", VERLSWEEP_TORCH_FIND_LINKS=str(wheels))

    line = _one_clear_line(_run(repo, env=env))
    if unreachable == "torch":   # the index itself is asked, before pip
        assert f"cannot reach VERLSWEEP_TORCH_INDEX={UNREACHABLE}/whl/cpu" in line and "FIND_LINKS" in line
    else:
        assert f"pip's output: {tmp_path}" in line
        assert "cannot get setuptools from pip's package index" in line and "PIP_INDEX_URL" in line
    assert not (venv / "verlsweep-quickstart.stamp").exists()


@pytest.mark.parametrize("index", [f"{UNREACHABLE}/whl/cpu", "https://download.pytorch.invalid/whl/cpu"])
def test_an_unreachable_chosen_torch_index_stops_it_in_seconds_even_where_pip_finds_torch_elsewhere(tmp_path, index):
    # pip keeps its configuration (find-links, extra indexes): through those it would find torch and
    # retry the dead index for minutes first, one `Retrying` line at a time
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    venv = _overlay_venv(tmp_path / "venv", fake_pip=False)
    started = time.monotonic()
    proc = _run(repo, "test", "--version", env=_env(VERLSWEEP_VENV=str(venv), VERLSWEEP_TORCH_INDEX=index),
                timeout=60)
    line = _one_clear_line(proc)
    assert time.monotonic() - started < 20
    assert f"cannot reach VERLSWEEP_TORCH_INDEX={index}" in line
    assert "VERLSWEEP_TORCH_FIND_LINKS" in line
    assert "Retrying" not in proc.stdout + proc.stderr
    assert not (venv / "verlsweep-quickstart.stamp").exists()


def test_an_unreachable_default_torch_index_is_one_line_and_torch_comes_from_pips_own_index(tmp_path):
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml"))
    venv = _overlay_venv(tmp_path / "venv", fake_pip=True)
    dead_proxy = {k: f"{UNREACHABLE}" for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")}
    env = {k: v for k, v in _env(VERLSWEEP_VENV=str(venv), **dead_proxy).items() if k.lower() != "no_proxy"}
    started = time.monotonic()
    proc = _run(repo, "test", "--version", env=env, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert time.monotonic() - started < 30
    said = [ln for ln in proc.stdout.splitlines() if "download.pytorch.org" in ln]
    assert len(said) == 1, proc.stdout
    assert "unreachable" in said[0] and "pip's own index" in said[0]
    assert "VERLSWEEP_TORCH_INDEX" in said[0] and "VERLSWEEP_TORCH_FIND_LINKS" in said[0]
    [torch] = [c["args"] for c in _pip_calls(venv) if "install" in c["args"] and "torch==2.13.0" in c["args"]]
    assert "--index-url" not in torch
    # the stamp keeps what was asked for: a later run with the index back installs nothing again
    assert "https://download.pytorch.org/whl/cpu" in (venv / "verlsweep-quickstart.stamp").read_text()


@pytest.mark.slow
def test_installing_the_project_shows_no_setuptools_box(tmp_path):
    # the real pip builds the project's editable wheel (setuptools' "Editable installation" notice is
    # relayed by pip >= 25 as a BuildBackendWarning box); no dependencies: this interpreter has them
    repo = _copy_repo(tmp_path / "clone", only=(SCRIPT, "pyproject.toml", "README.md"))
    venv = _overlay_venv(tmp_path / "venv", fake_pip=False)
    env = _env(VERLSWEEP_VENV=str(venv), VERLSWEEP_TORCH_INDEX="pypi", PIP_NO_DEPS="1")
    proc = _run(repo, "test", "--version", env=env, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "quickstart: installing the project with extras verl,test" in proc.stdout
    assert "BuildBackendWarning" not in out and "Editable installation" not in out
    assert "WARNING" not in out
