"""How a knob reaches verl through a recipe script: the way the script takes it, found by capture.

    routes = find_routes(script)          # {verl key: env var} the script reads, and whether it forwards "$@"
    routes.launch({key: value}, always)   # -> (env, args) that set those keys, or the keys it cannot take

Candidate variables are the names the script's text refers to (`${NAME:-...}`, `$NAME`); each is
confirmed by setting it to a marker value and capturing again: a verl key whose value becomes the
marker reads that variable. A script forwards `"$@"` when an extra argument reaches verl's argv last.
runner.env_map (an optional override) names variables the capture cannot find.
"""
from __future__ import annotations

import functools
import os
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from verlsweep.command.overrides import format_value
from verlsweep.command.recipe_capture import capture, sha256
from verlsweep.common.errors import ConfigError

_REFERENCE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
# the shell's and the machine's own variables: never a recipe knob
_NOT_KNOBS = frozenset({"HOME", "PATH", "PWD", "USER", "SHELL", "HOSTNAME", "RANDOM", "LINENO", "BASH_SOURCE",
                        "OLDPWD", "TMPDIR", "IFS"})
MARKER = "7919"               # numeric, so a variable used in $(( )) still moves the keys it feeds
PROBE = "+verlsweep_forward_probe=1"


@dataclass(frozen=True)
class Routes:
    """The ways into one script's verl launch."""

    script: Path
    env: dict[str, str]                   # verl key -> the variable whose value it is
    forwards_args: bool                   # "$@" reaches verl's argv
    moved_by: dict[str, tuple[str, ...]] = field(default_factory=dict)   # variable -> every key it moves

    def route(self, key: str) -> str | None:
        """`env VAR`, `args`, or None: how `key` reaches verl."""
        if key in self.env:
            return f"env {self.env[key]}"
        return "args" if self.forwards_args else None

    def launch(self, values: Mapping[str, object], plus: Mapping[str, bool] | None = None
               ) -> tuple[dict[str, str], list[str], list[str]]:
        """(env, args, keys with no route) that set each verl key of `values`; `plus`: keys verl needs
        added with `+` (not in its schema) when appended as an override."""
        env: dict[str, str] = {}
        args: list[str] = []
        missing: list[str] = []
        for key, value in values.items():
            if key in self.env:
                env[self.env[key]] = env_value(value)
            elif self.forwards_args:
                args.append(f"{'+' if (plus or {}).get(key) else ''}{key}={format_value(value)}")
            else:
                missing.append(key)
        return env, args, missing

    def advice(self, key: str) -> str:
        """What to add to the script so that it takes `key`."""
        var = key.rsplit(".", 1)[-1].upper()
        return (f"the script {self.script.name} takes {key} neither from an environment variable nor from \"$@\": "
                f"write {key}=${{{var}:-<default>}} in it, or end its verl launch with \"$@\" "
                "(or map a variable it reads in runner.env_map)")


def env_value(value: object) -> str:
    """A value as a script splices `key=$VAR` into verl's argv: strings raw, the rest in override syntax."""
    return value if isinstance(value, str) else format_value(value)


def candidates(text: str) -> list[str]:
    """The variables the script's text refers to, in order of first mention."""
    names = dict.fromkeys(m.group(1) for m in _REFERENCE.finditer(text))
    return [n for n in names if n not in _NOT_KNOBS]


def find_routes(script: Path, env_map: Mapping[str, str] | None = None, cwd: str | None = None) -> Routes:
    """The routes of `script` (captured; cached by its content), `env_map` (variable -> key) added."""
    found = _find(script, sha256(script), cwd, tuple(sorted(os.environ.items())))
    env = {**found.env, **{key: var for var, key in (env_map or {}).items()}}
    return Routes(script=script, env=env, forwards_args=found.forwards_args, moved_by=found.moved_by)


@functools.lru_cache(maxsize=32)
def _find(script: Path, digest: str, cwd: str | None, environ: tuple[tuple[str, str], ...]) -> Routes:
    """(digest, environ: the cache's key: the script's text and the defaults it reads)"""
    # The probes run in a scratch dir: a marker value lands in whatever the script does with the variable
    # (`mkdir -p "$LOG_DIR"`); a script that needs its own cwd (`source ./env.sh`) is probed there instead.
    with tempfile.TemporaryDirectory(prefix="verlsweep-probe-") as scratch:
        try:
            base, where = capture(script, cwd=scratch).values, str(scratch)
        except ConfigError:
            base, where = capture(script, cwd=cwd).values, cwd or os.getcwd()
        env: dict[str, str] = {}
        moved: dict[str, tuple[str, ...]] = {}
        for var in candidates(script.read_text()):
            try:
                values = capture(script, env={var: MARKER}, cwd=where).values
            except ConfigError:     # a marker the script cannot take: not a knob of verl's
                continue
            keys = tuple(k for k in values if values[k] != base.get(k))
            if keys:
                moved[var] = keys
            for key in keys:
                if values[key] == MARKER and key not in env:
                    env[key] = var
        probed = capture(script, args=[PROBE], cwd=where).overrides
    return Routes(script=script, env=env, forwards_args=bool(probed) and probed[-1] == PROBE, moved_by=moved)


def unroutable(routes: Routes, keys: Sequence[str]) -> list[str]:
    """The keys of `keys` the script can take neither way."""
    return [k for k in keys if routes.route(k) is None]
