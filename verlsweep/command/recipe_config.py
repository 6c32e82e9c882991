"""A recipe script's own config as the trial's config (runner=script, `recipe=path/to/run.sh`).

    apply(cfg, overrides)     # cfg.verl := what the script launches with this job's knobs; cfg.recipe says how

The composed config's `verl:` node (the algorithm, model, data and hardware groups' values) is
replaced by the overrides the script itself passes verl, captured (verlsweep.command.recipe_capture)
with the job's knobs set the way the script takes them (verlsweep.command.recipe_routes): the `verl.*`
keys of the job's overrides (the command line's and the sweeper's) and the keys a measurement needs
(runner.always: trial length, loggers, run names, checkpoints and validation off). Everything after
(our rules, verl's schema, the planner, the guide, the veto, the proofs, MLflow) reads that config,
so what is planned is what runs. The model node is the script's model: its dir's config.json, else a
known model option whose hub id the path names, else an unknown model the planner says it cannot plan.
"""
from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf, open_dict

from verlsweep.command.knobs import override_keys
from verlsweep.command.recipe_capture import Launch, capture, script_path, sha256
from verlsweep.command.recipe_routes import Routes, find_routes
from verlsweep.common.errors import ConfigError, Problem

log = logging.getLogger("verlsweep")

NODE = "recipe"                 # the composed config's record of the script's launch (set here only)
MODEL_KEY = "actor_rollout_ref.model.path"
# hardware.* key -> verl key the script states for the same thing
HARDWARE_KEYS = {"devices_per_node": "trainer.n_gpus_per_node", "nnodes": "trainer.nnodes", "device": "trainer.device"}
VERL_DEVICE_DEFAULT = "cuda"    # verl/trainer/config/ppo_trainer.yaml trainer.device


def is_recipe(cfg: DictConfig) -> bool:
    return OmegaConf.select(cfg, "runner.name", default=None) == "script"


def apply(cfg: DictConfig, overrides: Sequence[str]) -> None:
    """Make `cfg` the script's own config with this job's knobs (in place; a second call does nothing).
    Raises ConfigError naming the script (it cannot be captured) or a knob it cannot take."""
    if not is_recipe(cfg) or NODE in cfg:
        return
    script = script_path(OmegaConf.select(cfg, "runner.script", default=None))
    routes = find_routes(script, _env_map(cfg))
    base = capture(script)
    adv = str(base.values.get("algorithm.adv_estimator", "gae"))
    with open_dict(cfg):           # first: the run names (trial.name) interpolate the model and algorithm
        cfg.model = model_node(base.values.get(MODEL_KEY))
        cfg.algorithm = {"name": adv, "critic": adv == "gae"}
    asked = [k.removeprefix("verl.") for k in override_keys(list(overrides)) if k.startswith("verl.")]
    always = [str(k) for k in cfg.runner.get("always") or []]
    values = {k: _composed(cfg, k) for k in dict.fromkeys([*asked, *always])}
    # a measurement key the script already says needs no route; a knob is always set, so that the
    # command says it (and best_launch.sh hands it on) even where it equals the script's own value
    values = {k: v for k, v in values.items() if k in asked or not _same(base.values.get(k), v)}
    plus = _plus_rule(values, base)
    env, args, missing = routes.launch(values, plus)
    refused = [k for k in missing if k in asked]
    if refused:
        raise ConfigError([Problem(f"verl.{k}", values[k], routes.advice(k)) for k in refused])
    # the knobs alone (not a measurement's keys): what best_launch.sh hands the script
    knob_env, knob_args, _ = routes.launch({k: v for k, v in values.items() if k not in always}, plus)
    job_env = {k.removeprefix("env."): _text(OmegaConf.select(cfg, k)) for k in override_keys(list(overrides))
               if k.startswith("env.")}
    launch = capture(script, env={**job_env, **env}, args=args)
    notes = [f"the script keeps {k}={base.values.get(k, '(verl default)')}: it takes it neither from an "
             "environment variable nor from \"$@\"" for k in missing]
    notes += hardware_notes(cfg, launch)
    notes += [f"not run when the script was captured: {call} (each trial runs it, as the script does)"
              for call in launch.skipped]
    with open_dict(cfg):
        cfg.verl = OmegaConf.create(nested({**verl_defaults(), **parse_overrides(launch.overrides)}))
        cfg.env = job_env
        cfg[NODE] = {**record(launch, {**job_env, **env}, args, routes, base, notes),
                     "knobs": {"env": knob_env, "args": knob_args}}


# keys our rules read (verlsweep.command.rules) that a script may leave to verl: their defaults join the
# trial's config (the same values verl uses), not its launch
RULE_KEYS = ("actor_rollout_ref.rollout.gpu_memory_utilization", "actor_rollout_ref.rollout.tensor_model_parallel_size",
             "actor_rollout_ref.rollout.n", "data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size",
             "data.max_prompt_length", "data.max_response_length")


def verl_defaults() -> dict[str, Any]:
    """verl's own defaults of RULE_KEYS (none without verl installed)."""
    from verlsweep.command import verl_schema

    try:
        defaults = verl_schema.defaults()
    except verl_schema.VerlNotInstalled:
        return {}
    return {k: v for k in RULE_KEYS if (v := OmegaConf.select(defaults, k, default=None)) is not None}


def record(launch: Launch, env: Mapping[str, str], args: Sequence[str], routes: Routes, base: Launch,
           notes: Sequence[str]) -> dict[str, Any]:
    """What the composed config keeps of the launch: command.json, the report and best_launch.sh read it."""
    return {"script": str(launch.script), "sha256": launch.sha256, "module": launch.module, "env": dict(env),
            "args": list(args), "argv": list(launch.overrides), "script_env": dict(launch.env), "cwd": launch.cwd,
            "line": launch.line, "skipped": list(launch.skipped), "notes": list(notes),
            "routes": {k: routes.route(k) for k in routes.env}, "forwards_args": routes.forwards_args,
            "digest": digest(base)}


def digest(launch: Launch) -> str:
    """8 hex digits of the script's captured config (its verl overrides and exports): the study's name."""
    text = json.dumps([list(launch.overrides), sorted(launch.env.items())])
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def parse_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    """{verl key: value} of verl's argv, read by Hydra's own override grammar as verl reads it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out: dict[str, Any] = {}
    for item in OverridesParser.create().parse_overrides(list(overrides)):
        if item.is_delete():
            out.pop(item.key_or_group, None)
        else:
            out[item.key_or_group] = item.value()
    return out


def nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """Hydra's parsed values as plain YAML values (its quoted strings are str subclasses)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return str(value) if isinstance(value, str) else value


def model_node(path: Any) -> dict[str, Any]:
    """model.* of the script's model: the dir's config.json, else the model option whose hub id `path`
    names (conf/model/*.yaml), else a model the planner does not know (config empty)."""
    text = str(path or "")
    name = Path(text).name or "unknown"
    config_json = Path(text).expanduser() / "config.json" if text else None
    if config_json is not None and config_json.is_file():
        try:
            return {"name": name, "hf_id": None, "path": text, "config": json.loads(config_json.read_text())}
        except ValueError:
            pass
    for option in known_models():
        hf_id = str(option.get("hf_id") or "")
        if hf_id and (text == hf_id or name == hf_id.rsplit("/", 1)[-1]):
            return {"name": option["name"], "hf_id": hf_id, "path": text, "config": dict(option.get("config") or {})}
    return {"name": name, "hf_id": None, "path": text, "config": {}}


def known_models() -> list[dict[str, Any]]:
    from verlsweep import CONF_DIR

    out = []
    for path in sorted((CONF_DIR / "model").glob("*.yaml")):
        node = (yaml.safe_load(path.read_text()) or {}).get("model")
        if isinstance(node, dict):
            out.append(node)
    return out


def hardware_notes(cfg: DictConfig, launch: Launch) -> list[str]:
    """Where the script's trainer disagrees with the hardware option that describes the node."""
    out = []
    for hw_key, key in HARDWARE_KEYS.items():
        ours = OmegaConf.select(cfg, f"hardware.{hw_key}", default=None)
        theirs = launch.values.get(key, VERL_DEVICE_DEFAULT if hw_key == "device" else None)
        if ours is not None and theirs is not None and str(theirs) != str(ours):
            out.append(f"the script launches {key}={theirs} but hardware.{hw_key}={ours} "
                       f"(hardware={OmegaConf.select(cfg, 'hardware.name', default='?')}): the planner plans "
                       "the hardware option's node")
    return out


def own_config(cfg: DictConfig) -> DictConfig:
    """`cfg` with a recipe script's own config (a copy; `cfg` itself when it names no script)."""
    if not is_recipe(cfg) or NODE in cfg:
        return cfg
    own = copy.deepcopy(cfg)
    apply(own, [])
    return own


def script_identity(cfg: DictConfig) -> dict[str, str] | None:
    """{path, sha256} of the recipe script `cfg` names; None: no script."""
    if not is_recipe(cfg):
        return None
    script = script_path(OmegaConf.select(cfg, "runner.script", default=None))
    return {"path": str(script), "sha256": sha256(script)}


def study_part(cfg: DictConfig) -> str | None:
    """`<script name>-<digest of its captured config>` for a study's default name; None: no script."""
    if not is_recipe(cfg):
        return None
    try:
        script = script_path(OmegaConf.select(cfg, "runner.script", default=None))
        return f"{re.sub(r'[^A-Za-z0-9_-]', '_', script.stem)}-{digest(capture(script))}"
    except ConfigError:      # no script to read: the sweeper's check of the fixed config says so, by its key
        return None


def route_problems(cfg: DictConfig, keys: Sequence[str]) -> list[Problem]:
    """The swept verl keys (`verl.` prefixed or not) the script of `cfg` can take neither way."""
    if not is_recipe(cfg):
        return []
    script = script_path(OmegaConf.select(cfg, "runner.script", default=None))
    env_map = _env_map(cfg)
    routes = find_routes(script, env_map)
    verl_keys = [k.lstrip("+~").removeprefix("verl.") for k in keys if k.lstrip("+~").startswith("verl.")]
    return [Problem(f"verl.{k}", "swept", routes.advice(k)) for k in verl_keys if routes.route(k) is None]


def _env_map(cfg: DictConfig) -> dict[str, str]:
    node = OmegaConf.select(cfg, "runner.env_map", default=None)
    plain = OmegaConf.to_container(node, resolve=True) if node else {}
    return {str(k): str(v) for k, v in plain.items()} if isinstance(plain, dict) else {}


def _composed(cfg: DictConfig, key: str) -> Any:
    value = OmegaConf.select(cfg, f"verl.{key}", default=None)
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _same(raw: str | None, value: Any) -> bool:
    """The script's raw override value already says `value`."""
    if raw is None:
        return False
    parsed = parse_overrides([f"k={raw}"]).get("k")
    return _plain(parsed) == value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return "" if value is None else str(value)


def _plus_rule(values: Mapping[str, Any], base: Launch) -> dict[str, bool]:
    """Keys appended with `+`: neither in verl's schema nor passed by the script."""
    from verlsweep.command import verl_schema

    try:
        verl_schema.config_dir()
        needs = verl_schema.needs_plus
    except verl_schema.VerlNotInstalled:
        def needs(path: str) -> bool:
            return path.startswith(verl_schema.DYNAMIC_PREFIXES)
    return {k: k not in base.values and needs(k) for k in values}


def log_notes(cfg: DictConfig) -> None:
    """Say, before launch, what the script does that the config does not."""
    for note in OmegaConf.select(cfg, f"{NODE}.notes", default=None) or []:
        log.warning("recipe: %s", note)
