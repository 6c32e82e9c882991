"""Every OmegaConf resolver of the config tree, registered in one place.

`register()` is called by both entry points' set-up (`config_store.register()`: sweep.py, the planner
CLI, compose_config) and by the sweeper plugin, so no `${verlsweep.*:}` resolves only because some
other module happened to be imported first. replace=True: Hydra's plugin scan may import a caller more
than once in a process.

  verlsweep.tp_choices     sweeps/*.yaml: choice(...) over the rollout TP sizes hardware x model can run
  verlsweep.sp_choices     sweeps/throughput.yaml: choice(...) over the Ulysses SP sizes it can run
  verlsweep.capture_sizes  sweeps/throughput.yaml: the graph capture sizes up to a largest batch
  verlsweep.help_groups    `python sweep.py --help`: the config groups and their options
  verlsweep.hardware_auto  conf/hardware/auto.yaml: explains how to make a profile
  verlsweep.coalesce       conf/verl/default.yaml: the first value that is set
  verlsweep.slurm_minutes  conf/hydra/launcher/slurm.yaml: the job's time limit
  verlsweep.slurm_gres     conf/hydra/launcher/slurm.yaml: the job's generic resources
"""
from __future__ import annotations

import math
from typing import Any

from omegaconf import OmegaConf

TP_CHOICES = "verlsweep.tp_choices"
SP_CHOICES = "verlsweep.sp_choices"
CAPTURE_SIZES = "verlsweep.capture_sizes"
HELP_GROUPS = "verlsweep.help_groups"
AUTO_RESOLVER = "verlsweep.hardware_auto"
COALESCE_RESOLVER = "verlsweep.coalesce"
SLURM_MINUTES = "verlsweep.slurm_minutes"
SLURM_GRES = "verlsweep.slurm_gres"


def _model_config(root: Any) -> Any:
    """The config whose model the choices are for: a recipe script's own (its model, not the model group's);
    the composed one where its script cannot be read yet (the sweeper's check of the fixed config says why,
    naming runner.script, rather than a traceback from inside this interpolation)."""
    from verlsweep.command.recipe_config import own_config
    from verlsweep.common.errors import ConfigError

    try:
        return own_config(root)
    except ConfigError:
        return root


def tp_choices(*, _root_: Any) -> str:
    """`choice(...)` over the TP sizes the composed hardware x model can run (divisors of the device
    count that split the attention heads), so a search space never proposes a TP the validator rejects."""
    from verlsweep.command.topology import tp_choices as allowed

    return "choice(" + ",".join(str(tp) for tp in allowed(_model_config(_root_))) + ")"


def sp_choices(*, _root_: Any) -> str:
    """`choice(...)` over the Ulysses SP sizes the composed hardware x model can run (topology.sp_choices)."""
    from verlsweep.command.topology import sp_choices as allowed

    return "choice(" + ",".join(str(sp) for sp in allowed(_model_config(_root_))) + ")"


def capture_sizes(largest: Any, max_num_seqs: Any, enforce_eager: Any) -> list[int] | None:
    """vLLM's own capture list (verlsweep.common.vllm_graphs.default_capture_sizes) cut at `largest` and at
    max_num_seqs, so a swept largest batch never captures a size the engine cannot schedule; null in
    eager mode, where verl's rollout.yaml says capture sizes do not apply."""
    from verlsweep.common.vllm_graphs import default_capture_sizes

    if bool(enforce_eager):
        return None
    top = min(int(largest), int(max_num_seqs))
    return [s for s in default_capture_sizes(top) if s <= top] or [1]


def coalesce(*values: object) -> object:
    """The first value that is set (oc.select returns a key's null instead of its default)."""
    return next((v for v in values if v is not None and v != ""), None)


class HardwareAutoError(ValueError):
    """Raised while resolving `hardware=auto`: there is no profile to use yet."""


def hardware_auto(*_: object) -> object:
    raise HardwareAutoError(
        "hardware=auto has no profile to use yet: on the accelerator node run "
        "`python -m verlsweep.plan detect --name <name>` (or `--from-npu-smi FILE` with recorded "
        "`npu-smi info` output), which writes conf/hardware/<name>.yaml, then pass hardware=<name>")


def slurm_minutes(timeout_s: Any, margin_min: Any) -> int:
    """The job's time limit: the trial's own limit (runner.timeout, s) plus a margin for start and teardown;
    the margin alone for a runner without a limit (runner=estimate takes seconds)."""
    if timeout_s is None:
        return int(margin_min)
    if float(timeout_s) <= 0:
        raise ValueError(f"runner.timeout={timeout_s!r}: a positive number of seconds is needed for the Slurm "
                         "job's time limit (or set hydra.launcher.timeout_min)")
    return int(math.ceil(float(timeout_s) / 60.0) + int(margin_min))


def slurm_gres(*, _root_: Any) -> str | None:
    """`slurm.gres`: auto -> `gpu:<devices_per_node>` on CUDA, `<slurm.npu_gres>:<n>` on Ascend; null -> none."""
    gres = OmegaConf.select(_root_, "slurm.gres")
    if gres != "auto":
        return None if gres is None else str(gres)
    hw = _root_.hardware
    name = "gpu" if str(hw.device) == "cuda" else str(_root_.slurm.npu_gres)
    return f"{name}:{int(hw.devices_per_node)}"


def register() -> None:
    from verlsweep.command.argv import help_groups

    for name, fn in ((TP_CHOICES, tp_choices), (SP_CHOICES, sp_choices), (CAPTURE_SIZES, capture_sizes),
                     (HELP_GROUPS, help_groups), (AUTO_RESOLVER, hardware_auto),
                     (COALESCE_RESOLVER, coalesce), (SLURM_MINUTES, slurm_minutes), (SLURM_GRES, slurm_gres)):
        OmegaConf.register_new_resolver(name, fn, replace=True)
