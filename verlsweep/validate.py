"""Checks run before anything launches: our own rules, then verl 0.9.1's own machinery.

Our rules cover what verl accepts but the hardware cannot run (verl composes
`gpu_memory_utilization=1.5`, and `tensor_model_parallel_size=3` on 8 devices only fails deep inside
Ray, verl-0.9.md §1.2). verl's checks are the ones its driver runs at start-up
(verl/trainer/main_ppo.py main(): compose, validate_config) plus those it only runs at first use
(advantage-estimator and policy-loss registries, verl/trainer/ppo/core_algos.py), moved to the front.
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import importlib
import io
import logging
import re
import types
import typing
import warnings
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError, OmegaConfBaseException

from verlsweep.errors import Problem
from verlsweep.overrides import flatten

log = logging.getLogger(__name__)

DEVICES = ("npu", "cuda")
ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"
OFFLOAD_FLAGS = (
    f"{ACTOR}.fsdp_config.param_offload",
    f"{ACTOR}.fsdp_config.optimizer_offload",
    f"{ACTOR}.fsdp_config.offload_policy",
    "verl.actor_rollout_ref.ref.fsdp_config.param_offload",
    "verl.critic.fsdp.param_offload",
    "verl.critic.fsdp.optimizer_offload",
)


def _get(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, default=None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def world_size(cfg: DictConfig) -> int:
    return int(cfg.hardware.devices_per_node) * int(cfg.hardware.nnodes)


def tp_choices(cfg: DictConfig) -> list[int]:
    """Rollout TP sizes the hardware x model can run.

    TP must divide the device count (verl makes world // TP replicas with no guard,
    verl/workers/rollout/llm_server.py) and the attention heads; KV heads are split when TP <= KV
    heads and replicated when TP is a multiple of them (vLLM's rule for GQA models).
    """
    heads = int(cfg.model.num_attention_heads)
    kv = int(cfg.model.num_key_value_heads)
    world = world_size(cfg)
    return [
        tp
        for tp in range(1, world + 1)
        if world % tp == 0 and heads % tp == 0 and (kv % tp == 0 if tp <= kv else tp % kv == 0)
    ]


def check_resolves(cfg: DictConfig) -> list[Problem]:
    """Every interpolation resolves (env vars, ${...} references, hardware=auto's explanation).

    The group nodes go first so a broken group is named itself, not a key that refers to it.
    """
    first = [k for k in ("hardware", "model", "algorithm", "data", "paths") if k in cfg]
    for key in [*first, *(k for k in cfg if k not in first)]:
        try:
            value = cfg[key]
            if OmegaConf.is_config(value):
                OmegaConf.to_container(value, resolve=True)
        except InterpolationResolutionError as exc:
            message = re.sub(r"^\w+ raised while resolving interpolation: ", "", str(exc).splitlines()[0])
            return [Problem(str(exc.full_key or key), None, message,
                            rule="interpolation")]
    return []


def check_rules(cfg: DictConfig) -> list[Problem]:
    """Our own rules on a composed sweep config; every problem names the key and what is allowed."""
    problems: list[Problem] = []

    device = _get(cfg, "hardware.device")
    if device not in DEVICES:
        problems.append(Problem("hardware.device", device, f"one of {', '.join(DEVICES)}"))

    util = _get(cfg, f"{ROLLOUT}.gpu_memory_utilization")
    if not _is_number(util) or not 0 < util <= 1:
        problems.append(Problem(f"{ROLLOUT}.gpu_memory_utilization", util, "a number in (0, 1]"))

    tp = _get(cfg, f"{ROLLOUT}.tensor_model_parallel_size")
    allowed_tp = tp_choices(cfg)
    if not _is_int(tp) or tp not in allowed_tp:
        problems.append(
            Problem(
                f"{ROLLOUT}.tensor_model_parallel_size",
                tp,
                f"one of {allowed_tp} (divides the {world_size(cfg)} devices of {cfg.hardware.name} "
                f"and the {cfg.model.num_attention_heads} attention heads of {cfg.model.name})",
            )
        )

    for key in (f"{ROLLOUT}.n", "verl.data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size",
                "verl.data.max_prompt_length", "verl.data.max_response_length",
                "verl.trainer.total_training_steps", "trial.steps"):
        value = _get(cfg, key)
        if not _is_int(value) or value < 1:
            problems.append(Problem(key, value, "a positive integer"))

    for key in OFFLOAD_FLAGS:
        value = _get(cfg, key)
        if value is not None and not isinstance(value, bool):
            problems.append(Problem(key, value, "true or false"))

    if problems:  # the arithmetic below needs the values above to be sane
        return problems

    n = _get(cfg, f"{ROLLOUT}.n")
    batch = _get(cfg, "verl.data.train_batch_size")
    mini = _get(cfg, f"{ACTOR}.ppo_mini_batch_size")
    sp = _get(cfg, f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size") or 1
    world = world_size(cfg)
    if batch % mini:
        problems.append(Problem(f"{ACTOR}.ppo_mini_batch_size", mini,
                                f"a divisor of verl.data.train_batch_size={batch}"))
    dp = world // sp
    if (mini * n) % dp:
        # verl splits ppo_mini_batch_size * n over the data-parallel ranks (dp_actor.py)
        problems.append(Problem(f"{ACTOR}.ppo_mini_batch_size", mini,
                                f"mini-batch x rollout.n ({mini}x{n}) divisible by the {dp} data-parallel ranks"))
    if (batch * n) % world:
        problems.append(Problem("verl.data.train_batch_size", batch,
                                f"train_batch_size x rollout.n ({batch}x{n}) divisible by the {world} devices"))
    if _get(cfg, f"{ACTOR}.use_dynamic_bsz"):
        max_tok = _get(cfg, f"{ACTOR}.ppo_max_token_len_per_gpu")
        seq = _get(cfg, "verl.data.max_prompt_length") + _get(cfg, "verl.data.max_response_length")
        if not _is_int(max_tok) or max_tok * sp < seq:
            problems.append(Problem(f"{ACTOR}.ppo_max_token_len_per_gpu", max_tok,
                                    f"an integer >= (max_prompt_length + max_response_length) / SP = {-(-seq // sp)}"))
    return problems


def check_paths(cfg: DictConfig) -> list[Problem]:
    """Model and data paths the trial will read (an error in a real run, a warning in a dry run)."""
    problems: list[Problem] = []
    for key in ("verl.actor_rollout_ref.model.path", "verl.critic.model.path"):
        path = _get(cfg, key)
        if key.startswith("verl.critic") and not _get(cfg, "verl.critic.enable"):
            continue
        if path and not Path(str(path)).expanduser().is_dir():
            problems.append(Problem(key, path, "an existing HF model directory (set VERLSWEEP_MODEL_ROOT or paths.model_root)"))
    for key in ("verl.data.train_files", "verl.data.val_files"):
        files = _get(cfg, key)
        for f in files if isinstance(files, (list, tuple)) or OmegaConf.is_list(files) else [files]:
            if f and not Path(str(f)).expanduser().is_file():
                problems.append(Problem(key, f, "an existing parquet file (set VERLSWEEP_DATA_ROOT or paths.data_root)"))
    return problems


# --- verl's own checks -------------------------------------------------------------------------

_OVERRIDE_KEY = re.compile(r"(?:Could not override|Could not append to config\. An item is already at|"
                           r"Could not delete from config\. The value of) '([^']+)'")


def _suggest(key: str, verl_keys: list[str]) -> str:
    close = difflib.get_close_matches(key, verl_keys, n=3, cutoff=0.8)
    return f"; did you mean {', '.join('verl.' + c for c in close)}?" if close else ""


def _composition_problem(exc: Exception, overrides: list[str]) -> Problem:
    from verlsweep import verl_schema

    text = str(exc)
    match = _OVERRIDE_KEY.search(text)
    if not match:
        return Problem("verl", None, f"overrides verl's Hydra accepts (verl: {text.strip()})", rule="verl compose")
    key = match.group(1).lstrip("+~")
    value = next((o.split("=", 1)[1] for o in overrides if o.lstrip("+~").split("=", 1)[0] == key), None)
    verl_keys = list(flatten(OmegaConf.to_container(verl_schema.defaults(), resolve=False)))
    return Problem(f"verl.{key}", value, f"not a key of verl 0.9.1's ppo_trainer config{_suggest(key, verl_keys)}",
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

    from verlsweep import verl_schema

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
    except (AssertionError, ValueError, TypeError, OmegaConfBaseException) as exc:
        problems.append(Problem("verl", None, f"verl's validate_config: {exc}", rule="verl validate_config"))
    return problems
