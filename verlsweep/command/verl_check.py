"""verl 0.9.1's own checks, run before launch on the trial's overrides.

The ones its driver runs at start-up (verl/trainer/main_ppo.py main(): Hydra compose of `ppo_trainer`,
then verl/utils/config.py validate_config) plus those it only meets at first use (the advantage-estimator
and policy-loss registries of verl/trainer/ppo/core_algos.py, the config dataclasses' field types that
verl/utils/config.py omega_conf_to_dataclass enforces), moved to the front.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import io
import json
import logging
import re
import types
import typing
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verlsweep.command.suggest import did_you_mean
from verlsweep.common import disk_cache
from verlsweep.common.errors import Problem

log = logging.getLogger(__name__)

_OVERRIDE_KEY = re.compile(r"(?:Could not override|Could not append to config\. An item is already at|"
                           r"Could not delete from config\. The value of) '([^']+)'")


def _composition_problem(exc: Exception, overrides: list[str]) -> Problem:
    from verlsweep.command import verl_schema

    text = str(exc)
    match = _OVERRIDE_KEY.search(text)
    if not match:
        return Problem("verl", None, f"overrides verl's Hydra accepts (verl: {text.strip()})", rule="verl compose")
    key = match.group(1).lstrip("+~")
    value = next((o.split("=", 1)[1] for o in overrides if o.lstrip("+~").split("=", 1)[0] == key), None)
    return Problem(f"verl.{key}", value,
                   f"not a key of verl 0.9.1's ppo_trainer config{did_you_mean(key, verl_schema.leaf_keys(), 'verl.')}",
                   rule="verl compose")


def _structured_problems(vcfg: DictConfig, section: str) -> list[Problem]:
    """Type-check a `_target_` node against its dataclass, as verl's conversion does at run time.

    verl's omega_conf_to_dataclass merges each node into `OmegaConf.structured(cls)`; doing that for
    the scalar fields of every `_target_` node catches `gpu_memory_utilization=abc` up front.
    """
    return _type_check(OmegaConf.to_container(OmegaConf.select(vcfg, section), resolve=True), section)


def _type_check(node: Any, path: str) -> list[Problem]:
    if not isinstance(node, dict) or not node.get("_target_"):
        return []
    module_name, _, cls_name = node["_target_"].rpartition(".")
    cls = getattr(importlib.import_module(module_name), cls_name, None)
    if not isinstance(cls, type) or not dataclasses.is_dataclass(cls):
        return []
    problems: list[Problem] = []
    scalars = {}
    for key, value in node.items():
        if isinstance(value, dict):
            problems += _type_check(value, f"{path}.{key}")
        elif key != "_target_" and value is not None:  # None: verl fills it in at run time
            scalars[key] = value
    hints = _type_hints(cls)
    for key, value in scalars.items():
        expected = hints.get(key)
        if expected is not None and not _matches(value, expected):
            problems.append(Problem(f"verl.{path}.{key}", value, f"a value of type {_type_name(expected)} "
                                    f"({cls_name}.{key})", rule="verl types"))
    return problems


def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - unresolvable forward references: fall back to the raw annotations
        return {f.name: f.type for f in dataclasses.fields(cls) if isinstance(f.type, type)}


def _matches(value: Any, expected: Any) -> bool:
    """The checks OmegaConf's structured merge would make for scalar fields (str/int/float/bool)."""
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(expected))
    if expected is type(None):
        return value is None
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if expected is str:
        return not isinstance(value, (dict, list))
    return True  # containers, Literal, Any, nested configs: verl checks those itself


def _type_name(expected: Any) -> str:
    return getattr(expected, "__name__", None) or str(expected).replace("typing.", "")


def check_with_verl(overrides: list[str], model_path_exists: bool) -> list[Problem]:
    """Compose verl's config with the trial's overrides and run verl's own validation on it.

    The verdict depends only on the overrides and on verl (its config files and the modules whose checks
    run), so it is kept in the cache directory under a hash of those: the first check in a process
    imports verl, and with it torch and transformers (about 10 s of CPU), which a sweep, a resumed one or
    a trial process started by Slurm then skips for a config already checked. A verdict that read the
    model's own files (the critic's HF config) is not kept: those files can change under the same path.
    """
    path = _verdict_path(overrides, model_path_exists)
    kept = disk_cache.read_json(path)
    if isinstance(kept, list) and all(isinstance(p, list) and len(p) == 4 for p in kept):
        return [Problem(*p) for p in kept]
    problems, read_model = _check(overrides, model_path_exists)
    if not read_model:
        try:
            disk_cache.store(path, json.dumps([[p.key, p.value, p.allowed, p.rule] for p in problems]))
        except (OSError, TypeError, ValueError):
            pass            # a read-only cache or a value JSON cannot hold: check again next time
    return problems


# Names verl only logs and files runs under (a str field each; any scalar passes): every trial's differs
# (a time stamp, the trial's number), so the verdict's key holds "a name" in their place.
_LABEL_KEYS = ("trainer.experiment_name", "trainer.project_name")


def _verdict_path(overrides: list[str], model_path_exists: bool) -> Path:
    def keyed(item: str) -> str:
        key, sep, value = item.partition("=")
        if key.lstrip("+") in _LABEL_KEYS and sep and not value.lstrip().startswith(("[", "{")):
            return f"{key}=<name>"
        return item
    digest = hashlib.sha256(json.dumps([[keyed(o) for o in overrides], model_path_exists]).encode())
    digest.update(_verl_code_digest().encode())
    return disk_cache.root() / "verl" / f"verdict-{digest.hexdigest()[:24]}.json"


@lru_cache(maxsize=1)
def _verl_code_digest() -> str:
    """verl's version, its config files and the modules the check runs (found without importing verl),
    Hydra's and OmegaConf's versions, and this check's own code."""
    from verlsweep.command import verl_schema

    digest = hashlib.sha256(f"verl {disk_cache.installed('verl')}".encode())
    digest.update(verl_schema.defaults_cache_path().name.encode())   # verl's yaml, Hydra, OmegaConf
    spec = importlib.util.find_spec("verl")
    if spec is not None and spec.submodule_search_locations:
        base = Path(next(iter(spec.submodule_search_locations)))
        modules = [*sorted((base / "workers" / "config").glob("*.py")),
                   *sorted((base / "trainer" / "config").glob("*.py")),
                   base / "utils" / "config.py", base / "trainer" / "ppo" / "core_algos.py",
                   base / "trainer" / "ppo" / "utils.py"]
        disk_cache.add_files(digest, base, [m for m in modules if m.is_file()])
    here = Path(__file__).resolve()
    disk_cache.add_files(digest, here.parent, [here, here.parent / "verl_schema.py"])
    return digest.hexdigest()


def _check(overrides: list[str], model_path_exists: bool) -> tuple[list[Problem], bool]:
    """The problems verl's checks find, and whether they read the model's files."""
    from hydra.errors import HydraException

    from verlsweep.command import verl_schema

    try:
        vcfg = verl_schema.compose_verl(overrides)
    except HydraException as exc:
        return [_composition_problem(exc, overrides)], False

    problems: list[Problem] = []
    sections = ["actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref", "algorithm"]
    if vcfg.critic.get("enable"):
        sections.append("critic")
    for section in sections:
        problems += _structured_problems(vcfg, section)
    if problems:
        return problems, False

    from verl.trainer.ppo import core_algos
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    estimator = vcfg.algorithm.adv_estimator
    try:
        core_algos.get_adv_estimator_fn(estimator)
    except ValueError:
        problems.append(Problem("verl.algorithm.adv_estimator", estimator,
                                f"one of {', '.join(sorted(core_algos.ADV_ESTIMATOR_REGISTRY))}", rule="verl registry"))
    loss_mode = vcfg.actor_rollout_ref.actor.policy_loss.loss_mode
    if loss_mode not in core_algos.POLICY_LOSS_REGISTRY:
        problems.append(Problem("verl.actor_rollout_ref.actor.policy_loss.loss_mode", loss_mode,
                                f"one of {', '.join(sorted(core_algos.POLICY_LOSS_REGISTRY))}", rule="verl registry"))
    if problems:
        return problems, False

    with warnings.catch_warnings():  # need_critic warns on every critic-less estimator
        warnings.simplefilter("ignore")
        use_critic = bool(need_critic(vcfg))
    if use_critic and not model_path_exists:
        # verl's critic conversion loads the HF model config from critic.model.path; without the
        # model on this machine that part of validate_config cannot run (check_paths reports it).
        use_critic = False
    try:
        # validate_config prints its verdict; keep stdout for the trial's own output (dry-run snippet)
        with contextlib.redirect_stdout(io.StringIO()) as said:
            validate_config(vcfg, use_reference_policy=bool(need_reference_policy(vcfg)), use_critic=use_critic)
        log.debug("verl validate_config: %s", said.getvalue().strip())
    except (AssertionError, ValueError, TypeError, OmegaConfBaseException, HydraException) as exc:
        # a config dataclass's own assertion reaches us wrapped by hydra.utils.instantiate
        # (InstantiationException, a HydraException): its message carries the assertion and the key
        problems.append(Problem("verl", None, f"verl's validate_config: {exc}", rule="verl validate_config"))
    return problems, use_critic
