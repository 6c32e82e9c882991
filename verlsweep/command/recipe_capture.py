"""What a recipe script launches, found by running it, not by parsing it.

    launch = capture(script)                      # bash runs the script with a shim `python`/`python3`
    launch.overrides                              # the verl argv after `-m verl.trainer.main_ppo`
    launch.env, launch.cwd, launch.skipped        # env and cwd of the launch; other python calls

bash itself evaluates the script's `X=${X:-default}` variables, override arrays, `export`s and `"$@"`; a
shim directory first on PATH answers `python` and `python3`: the verl launch (`-m verl.trainer.main_ppo*`,
verl's trainer entry points) is recorded and exits 0, any other python call (data preprocessing) is
skipped and reported. A script that never launches verl, launches it twice, fails before it or
launches another trainer config (`--config-name`) is a ConfigError naming the script and its line.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verlsweep.common.errors import ConfigError, Problem

KEY = "runner.script"
VERL_MODULE = re.compile(r"^verl\.trainer\.main_ppo\w*$")    # main_ppo and its variants (main_ppo_sync, ...)
CAPTURE_TIMEOUT_S = 60
_FILE_VAR = "VERLSWEEP_CAPTURE_FILE"
# The shim: every python call appends one JSON line; a verl launch is recorded with its env and cwd.
_SHIM = """#!{python}
import json, os, re, sys
args = sys.argv[1:]
module = args[args.index("-m") + 1] if "-m" in args[:-1] else None
launch = bool(module and re.match({pattern!r}, module))
record = {{"prog": os.path.basename(sys.argv[0]), "argv": args, "launch": launch,
          "line": os.environ.get("VERLSWEEP_CAPTURE_LINE", "")}}
if launch:
    record.update(env=dict(os.environ), cwd=os.getcwd())
with open(os.environ[{var!r}], "a") as fh:
    fh.write(json.dumps(record) + "\\n")
"""
_OWN_VARS = (_FILE_VAR, "VERLSWEEP_CAPTURE_LINE", "PS4")


@dataclass(frozen=True)
class Launch:
    """The verl launch of one run of a script: `python3 <pre> -m <module> <overrides>`."""

    script: Path
    sha256: str
    module: str
    overrides: tuple[str, ...]            # verl's Hydra overrides, as the script passed them
    env: dict[str, str]                   # the variables the script set or changed for the launch
    cwd: str
    line: str                             # `script:N` of the launch
    skipped: tuple[str, ...] = field(default=())   # other python calls, not run

    @property
    def values(self) -> dict[str, str]:
        """{verl key: raw override value}, the last one of a key winning as in Hydra."""
        out: dict[str, str] = {}
        for item in self.overrides:
            key, _, value = item.partition("=")
            out[key.lstrip("+~")] = value
        return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def script_path(value: str | None) -> Path:
    """The script a recipe names, or a ConfigError naming runner.script."""
    if not value or not Path(value).is_file():
        raise ConfigError([Problem(KEY, value, "path of an existing recipe script (recipe=path/to/run.sh, or "
                                               "set VERLSWEEP_RECIPE_SCRIPT)")])
    return Path(value).resolve()


def capture(script: Path, env: Mapping[str, str] | None = None, args: Sequence[str] = (),
            cwd: str | None = None) -> Launch:
    """The verl launch of `bash script args` with `env` added to this process's environment."""
    digest = sha256(script)
    # keyed by the whole environment the script sees: it reads its defaults from there
    given = tuple(sorted({**os.environ, **(env or {})}.items()))
    return _capture(script, digest, given, tuple(args), cwd or os.getcwd())


@functools.lru_cache(maxsize=256)
def _capture(script: Path, digest: str, env_items: tuple[tuple[str, str], ...], args: tuple[str, ...],
             cwd: str) -> Launch:
    given = dict(env_items)
    with tempfile.TemporaryDirectory(prefix="verlsweep-capture-") as tmp:
        shim_dir = Path(tmp) / "bin"
        shim_dir.mkdir()
        for name in ("python", "python3"):
            shim = shim_dir / name
            shim.write_text(_SHIM.format(python=sys.executable, pattern=VERL_MODULE.pattern, var=_FILE_VAR))
            shim.chmod(0o755)
        record = Path(tmp) / "calls.jsonl"
        run_env = {**given, "PATH": f"{shim_dir}{os.pathsep}{given.get('PATH', '')}", _FILE_VAR: str(record)}
        # BASH_ENV runs before the script: each command's line number reaches the shim through the DEBUG trap
        bash_env = Path(tmp) / "trap.sh"
        bash_env.write_text('trap \'export VERLSWEEP_CAPTURE_LINE="$LINENO"\' DEBUG\n')
        run_env["BASH_ENV"] = str(bash_env)
        try:
            proc = subprocess.run(["bash", str(script), *args], env=run_env, cwd=cwd, capture_output=True, text=True,
                                  timeout=CAPTURE_TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise _error(script, f"did not reach the verl launch within {CAPTURE_TIMEOUT_S} s") from None
        calls = [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []
    launches = [c for c in calls if c["launch"]]
    skipped = tuple(" ".join([c["prog"], *c["argv"]]) for c in calls if not c["launch"])
    if not launches:
        if proc.returncode != 0:
            why = _failure(proc.stderr, script)
            raise _error(script, f"failed before launching verl (exit {proc.returncode}): {why}")
        raise _error(script, "never launches verl (no `python3 -m verl.trainer.main_ppo` ran)"
                     + (f"; other python calls: {'; '.join(skipped)}" if skipped else ""))
    if len(launches) > 1:
        lines = ", ".join(f"{script.name}:{c['line']}" for c in launches)
        raise _error(script, f"launches verl {len(launches)} times ({lines}): a trial is one launch")
    call = launches[0]
    argv = call["argv"]
    at = argv.index("-m")
    module, overrides = argv[at + 1], tuple(argv[at + 2:])
    named = [a for a in overrides if a.startswith(("--config-name", "-cn", "--config-path", "-cp"))]
    if named:
        raise _error(script, f"launches verl with {' '.join(named)} at line {call['line']}: verlsweep sweeps verl's "
                     "ppo_trainer config only; launch it without --config-name/--config-path")
    env = {k: v for k, v in call["env"].items()
           if k not in _OWN_VARS and k not in ("PATH", "BASH_ENV", "SHLVL", "_", "OLDPWD", "PWD")
           and given.get(k) != v}
    return Launch(script=script, sha256=digest, module=module, overrides=overrides, env=env, cwd=call["cwd"],
                  line=f"{script.name}:{call['line']}", skipped=skipped)


def _failure(stderr: str, script: Path) -> str:
    """bash's own message of the failing line (`run.sh: line 7: foo: command not found`), else the last line."""
    lines = [ln for ln in stderr.splitlines() if ln.strip() and not ln.startswith("+")]
    named = [ln for ln in lines if ln.startswith(str(script)) or f"{script.name}: line" in ln]
    return (named or lines or ["no message"])[-1].strip()


def _error(script: Path, why: str) -> ConfigError:
    return ConfigError([Problem(KEY, str(script), f"recipe script {script.name} {why}")])
