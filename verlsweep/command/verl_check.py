"""verl 0.9.1's own checks, run before launch on the trial's overrides.

The ones its driver runs at start-up (verl/trainer/main_ppo.py main(): Hydra compose of `ppo_trainer`,
then verl/utils/config.py validate_config) plus those it only meets at first use (the advantage-estimator
and policy-loss registries of verl/trainer/ppo/core_algos.py, the config dataclasses' field types that
verl/utils/config.py omega_conf_to_dataclass enforces), moved to the front.
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import logging
import re
import types
import typing
import warnings
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verlsweep.command.suggest import did_you_mean
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
    if cls is None or not dataclasses.is_dataclass(cls):
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
    except Exception:  # unresolvable forward references: fall back to the raw annotations
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
    """Compose verl's config with the trial's overrides and run verl's own validation on it."""
    from hydra.errors import HydraException

    from verlsweep.command import verl_schema

    try:
        vcfg = verl_schema.compose_verl(overrides)
    except HydraException as exc:
        return [_composition_problem(exc, overrides)]

    problems: list[Problem] = []
    sections = ["actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref", "algorithm"]
    if vcfg.critic.get("enable"):
        sections.append("critic")
    for section in sections:
        problems += _structured_problems(vcfg, section)
    if problems:
        return problems

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
        return problems

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
    return problems
