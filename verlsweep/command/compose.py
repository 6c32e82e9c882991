"""A composed sweep config -> one trial: the exact verl argv and its environment."""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from verlsweep.command.hydra_compose import compose_dir
from verlsweep.command.launch_script import export_lines
from verlsweep.command.overrides import format_value, ordered
from verlsweep.command.paths import check_paths
from verlsweep.command.recipe_config import NODE
from verlsweep.command.recipe_launch import script_bash, script_json
from verlsweep.command.rules import check_rules
from verlsweep.command.verl_check import check_with_verl
from verlsweep.common.errors import ConfigError
from verlsweep.common.names import COMMAND_JSON
from verlsweep.config import check_resolves, flatten, plain


@dataclass(frozen=True)
class Command:
    """What gets launched: `argv` (entrypoint + verl overrides) under `env` (added to the caller's)."""

    argv: list[str]
    env: dict[str, str]
    entrypoint_len: int = 3
    warnings: list[str] = field(default_factory=list)
    # a recipe script's launch (recipe_config.record): `bash <script> <args>` under `env` is what runs,
    # `argv` the verl argv it launches (captured)
    script: dict[str, Any] | None = None

    @property
    def overrides(self) -> list[str]:
        return self.argv[self.entrypoint_len:]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"argv": list(self.argv), "env": dict(self.env)}
        if self.script is not None:
            out["script"] = script_json(self.script)
        return out

    def to_bash(self) -> str:
        """A runnable snippet: `export` lines, then the command with one override per line (a recipe
        script: the script with its knobs, the verl argv it launches as comments)."""
        if self.script is not None:
            return script_bash(self.script, self.env, self.argv)
        lines = export_lines(self.env)
        head = " ".join(shlex.quote(a) for a in self.argv[: self.entrypoint_len])
        body = [f"    {shlex.quote(o)}" for o in self.overrides]
        lines.append(" \\\n".join([head, *body]))
        return "\n".join(lines) + "\n"

    def write(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / COMMAND_JSON
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
        return path


def verl_overrides(cfg: DictConfig, *, use_schema: bool = True) -> list[str]:
    """The `verl:` subtree as `key=value` overrides in verl's script order.

    Keys verl's schema has are emitted plainly so a misspelling still fails inside verl; `+` only for
    keys verl adds dynamically (verl_schema.needs_plus). `++` is never used: it would hide typos.
    """
    leaves = flatten(cfg.verl)
    needs_plus = _plus_rule(use_schema)
    return [f"{'+' if needs_plus(path) else ''}{path}={format_value(leaves[path])}" for path in ordered(leaves)]


def _plus_rule(use_schema: bool):
    from verlsweep.command import verl_schema

    if use_schema:
        try:
            verl_schema.config_dir()
            return verl_schema.needs_plus
        except verl_schema.VerlNotInstalled:
            pass
    # without verl installed only verl's documented open mappings can be recognised
    return lambda path: path.startswith(verl_schema.DYNAMIC_PREFIXES)


def trial_env(cfg: DictConfig) -> dict[str, str]:
    """The environment the trial adds: the hardware's variables plus `env.*` overrides, as strings."""
    env: dict[str, Any] = plain(cfg.get("env") or {})
    out = {}
    for key, value in env.items():
        if isinstance(value, bool):
            value = "1" if value else "0"
        out[str(key)] = "" if value is None else str(value)
    return out


def entrypoint(cfg: DictConfig) -> list[str]:
    return [str(a) for a in plain(cfg.runner.entrypoint)]


def build_command(cfg: DictConfig, *, require_paths: bool = True) -> Command:
    """Validate the composed config (ours, then verl's) and turn it into a Command.

    Raises ConfigError naming every offending key before anything can launch.
    """
    problems = check_resolves(cfg)
    if problems:
        raise ConfigError(problems)
    recipe: Any = plain(cfg[NODE]) if NODE in cfg else None
    problems = check_rules(cfg)
    path_problems = check_paths(cfg)
    overrides = verl_overrides(cfg, use_schema=bool(cfg.validate.verl))
    if cfg.validate.verl and not problems:
        model_ok = not any(p.key.endswith("model.path") for p in path_problems)
        problems += check_with_verl(overrides, model_path_exists=model_ok)
    if require_paths:
        problems += path_problems
    if problems:
        raise ConfigError(problems)

    warnings = [str(p) for p in path_problems]
    if isinstance(recipe, dict):
        # what verl gets is what the script passes it, as captured: not our rendering of it
        return Command(argv=["python3", "-m", recipe["module"], *recipe["argv"]], env=dict(recipe["env"]),
                       entrypoint_len=3, warnings=[*recipe["notes"], *warnings], script=recipe)
    ep = entrypoint(cfg)
    return Command(argv=[*ep, *overrides], env=trial_env(cfg), entrypoint_len=len(ep), warnings=warnings)


def compose_config(overrides: list[str] | None = None, return_hydra_config: bool = False) -> DictConfig:
    """Our root config (conf/sweep.yaml) with `overrides`, as `python sweep.py <overrides>` would see it."""
    from verlsweep import CONF_DIR, ROOT_CONFIG
    from verlsweep.command import config_store

    config_store.register()
    return compose_dir(CONF_DIR, ROOT_CONFIG, overrides or [], return_hydra_config=return_hydra_config)

