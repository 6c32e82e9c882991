"""A Command as a script one copies to a node and runs: the layout of verl's recipe scripts.

verl's Ascend recipe scripts (verl-ascend-recipe run_qwen3_8b_remax_fsdp_npu.sh, docs/ascend.md "Seed
recipe") and verl's example scripts put what differs per machine in variables with defaults at the
top (`MODEL_PATH=${MODEL_PATH:-...}`), group the overrides in arrays (DATA, MODEL, ACTOR, ROLLOUT,
REF, ALGORITHM, TRAINER: overrides.py's sections) and end with `python3 -m verl.trainer.main_ppo
"${DATA[@]}" ... "$@"`, so any extra Hydra argument passes through (the last value of a key wins).

Defaults keep the config's environment roots unexpanded: `paths.model_root` is
`${oc.env:VERLSWEEP_MODEL_ROOT,${oc.env:HOME}/models}` in conf/paths/default.yaml, so the model's default is
`${VERLSWEEP_MODEL_ROOT:-${HOME}/models}/Qwen3-8B`, resolved on the node that runs the script, not the
machine that wrote it.
"""
from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig, ListConfig, OmegaConf

from verlsweep.command.overrides import format_value, section_name

if TYPE_CHECKING:
    from verlsweep.command.compose import Command


@dataclass(frozen=True)
class ScriptVar:
    """A variable of the script's head: `name` holds the value of verl's `key` (and of `same_as`
    keys while their composed value equals it, e.g. a critic initialised from the policy)."""

    name: str
    key: str
    same_as: tuple[str, ...] = ()


# The names runner=script hands to a recipe script (conf/runner/script.yaml env_map, after verl's
# example scripts), so one node setup serves both.
SCRIPT_VARS = (
    ScriptVar("MODEL_PATH", "actor_rollout_ref.model.path", same_as=("critic.model.path",)),
    ScriptVar("TRAIN_FILE", "data.train_files"),
    ScriptVar("TEST_FILE", "data.val_files"),
    ScriptVar("NNODES", "trainer.nnodes"),
    ScriptVar("NGPUS_PER_NODE", "trainer.n_gpus_per_node"),
)
# verl's MLflow logger reads its store from this variable, else sqlite:////tmp/mlruns.db on the node
# (verl/utils/tracking.py, Tracking)
TRACKING_VAR = "MLFLOW_TRACKING_URI"

_ENV = re.compile(r"oc\.env:([A-Za-z_]\w*)(?:,(.*))?", re.S)
_KEY = re.compile(r"[A-Za-z_][\w.]*")


def export_lines(env: dict[str, str]) -> list[str]:
    """`export K=V`, V quoted for bash (shared with Command.to_bash)."""
    return [f"export {k}={shlex.quote(v)}" for k, v in env.items()]


def split_override(override: str) -> tuple[str, str]:
    """`+a.b=v` -> ("a.b", "v"): the key without Hydra's +/~ prefix, and the value as written."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


def entrypoint_words(entrypoint: list[str]) -> str:
    """The entrypoint for a node: `python` becomes `python3`, as verl's scripts call it (a bare
    `python` is not on every image)."""
    words = ["python3" if i == 0 and a == "python" else a for i, a in enumerate(entrypoint)]
    return " ".join(shlex.quote(w) for w in words)


# --- OmegaConf interpolation -> bash -------------------------------------------------------------


def _closing(text: str, start: int) -> int:
    """Index of the `}` closing the `${` at `start`, nested interpolations included; -1 if none."""
    depth = 0
    i = start
    while i < len(text):
        if text.startswith("${", i):
            depth += 1
            i += 2
            continue
        if text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _literal(text: str) -> str:
    return shlex.quote(text) if text else ""


def to_bash_expr(raw: str, cfg: DictConfig, depth: int = 0) -> str | None:
    """A config string with `${oc.env:NAME,default}` and `${other.key}` interpolations as a bash word
    that expands to the same value where the same variables are set; None if it uses anything else
    (another resolver, a relative key, an escape)."""
    if depth > 10 or "\\" in raw:
        return None
    out, i = [], 0
    while i < len(raw):
        start = raw.find("${", i)
        if start < 0:
            out.append(_literal(raw[i:]))
            break
        out.append(_literal(raw[i:start]))
        end = _closing(raw, start)
        if end < 0:
            return None
        inner = raw[start + 2:end]
        env = _ENV.fullmatch(inner)
        if env:
            name, default = env.group(1), env.group(2)
            if default is None:
                expr = f"${{{name}}}"
            else:
                default = _unquote(default)
                if default == "null":
                    return None
                sub = to_bash_expr(default, cfg, depth + 1)
                if sub is None:
                    return None
                expr = f"${{{name}:-{sub}}}"
        elif _KEY.fullmatch(inner):
            key_expr = _key_expr(inner, cfg, depth + 1)
            if key_expr is None:
                return None
            expr = key_expr
        else:
            return None
        out.append(expr)
        i = end + 1
    return "".join(out)


def _raw(cfg: DictConfig, key: str) -> Any:
    """The value of `key` as written in the config (interpolations unresolved)."""
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent) if parent else cfg
    if not isinstance(node, DictConfig) or leaf not in node:
        raise KeyError(key)
    return cast(dict[str, Any], OmegaConf.to_container(node, resolve=False))[leaf]


def _key_expr(key: str, cfg: DictConfig, depth: int = 0) -> str | None:
    """`key`'s value as a bash word (the Hydra override's value), its env roots left to the node."""
    try:
        raw = _raw(cfg, key)
        resolved = OmegaConf.select(cfg, key)
    except Exception:  # noqa: BLE001 - an unreadable key is one we cannot translate
        return None
    plain = OmegaConf.to_container(resolved, resolve=True) if isinstance(resolved, (DictConfig, ListConfig)) \
        else resolved
    if isinstance(raw, str) and "${" in raw:
        # only a value Hydra reads unquoted can stay a bash expression
        return to_bash_expr(raw, cfg, depth) if format_value(plain) == str(plain) else None
    if isinstance(raw, list) and isinstance(plain, list) and all(isinstance(r, str) for r in raw):
        # a list of files: `[a,b]`, each element's roots left to the node where Hydra reads it unquoted
        parts = [to_bash_expr(r, cfg, depth) if "${" in r and format_value(p) == str(p) else None
                 for r, p in zip(raw, plain)]
        return _literal("[") + ",".join(e if e is not None else _literal(format_value(p))
                                        for e, p in zip(parts, plain)) + _literal("]")
    return _literal(format_value(plain))


# --- the script ----------------------------------------------------------------------------------


def _default(var: ScriptVar, value: str, cfg: DictConfig | None) -> str:
    expr = _key_expr(f"verl.{var.key}", cfg) if cfg is not None else None
    return expr if expr is not None else _literal(value)


def _script_vars(trial: Command) -> tuple[dict[str, str], list[ScriptVar]]:
    """The trial's override values by key, and the script variables it sets."""
    values = dict(split_override(o) for o in trial.overrides)
    return values, [v for v in SCRIPT_VARS if v.key in values]


def script_defaults(trial: Command, cfg: DictConfig | None) -> dict[str, str]:
    """{verl key: bash default} of each script variable `trial` sets: the composed config's raw value with
    its env roots unexpanded where it has them (`cfg`; None: the composed values). The one piece of
    the config the script needs, so a prepared trial (verlsweep.prepare) can keep it and drop the rest."""
    values, used = _script_vars(trial)
    return {v.key: _default(v, values[v.key], cfg) for v in used}


def render_script(trial: Command, defaults: Mapping[str, str], tracking_uri: str | None) -> str:
    """The body of a node script for `trial` (after its header): variables with `defaults`
    (script_defaults; a variable without one defaults to the trial's own value), the trial's environment,
    the overrides in arrays by section, the command with `"$@"` last."""
    values, used = _script_vars(trial)
    by_key: dict[str, str] = {}
    for var in used:
        by_key[var.key] = var.name
        by_key.update({k: var.name for k in var.same_as if values.get(k) == values[var.key]})

    lines = ["# on the node: set these (or VERLSWEEP_MODEL_ROOT / VERLSWEEP_DATA_ROOT) where they differ;",
             "# arguments to this script are appended as Hydra overrides (the last value of a key wins)"]
    shown = {v.key: defaults[v.key] if v.key in defaults else _literal(values[v.key]) for v in used}
    lines += [f"{v.name}=${{{v.name}:-{shown[v.key]}}}" for v in used]
    if tracking_uri:
        lines.append(f"export {TRACKING_VAR}=${{{TRACKING_VAR}:-{_literal(tracking_uri)}}}")
    lines += ["", *export_lines(trial.env), ""]

    groups: dict[str, list[str]] = {}
    for override in trial.overrides:
        key, _ = split_override(override)
        name = by_key.get(key)
        word = (f"\"{override.partition('=')[0]}=${name}\"" if name else shlex.quote(override))
        groups.setdefault(section_name(key), []).append(word)
    for group, words in groups.items():
        lines += [f"{group}=(", *(f"    {w}" for w in words), ")"]
    words = [entrypoint_words(trial.argv[:trial.entrypoint_len]), *(f'"${{{g}[@]}}"' for g in groups), '"$@"']
    lines += ["", " \\\n    ".join(words)]
    return "\n".join(lines) + "\n"
