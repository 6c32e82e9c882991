"""Short names for a trial's knobs, shared by the MLflow run names, the terminal and the report.

    t07 oom util=0.90 tp=2 off=p,o

A float knob is printed at its search step's precision (0.9 with step 0.05 -> 0.90, never
0.9000000000000001); the offload flags collapse into one `off=` token listing the ones that are on.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# verl keys (suffixes) -> short names; the rest keep their shortest unambiguous suffix
ABBREVIATIONS = {
    "gpu_memory_utilization": "util",
    "tensor_model_parallel_size": "tp",
    "max_num_seqs": "seqs",
    "max_num_batched_tokens": "batched_tokens",
    "ppo_micro_batch_size_per_gpu": "micro_bs",
    "ppo_max_token_len_per_gpu": "max_tok",
    # the throughput space's (sweeps/throughput.yaml): short enough for a column header in MLflow's table
    "log_prob_max_token_len_per_gpu": "lp_max_tok",
    "ulysses_sequence_parallel_size": "sp",
    "enforce_eager": "eager",
    "free_cache_engine": "free_cache",
    "max_capture_size": "capture",
}
# offload flags -> the letter they add to `off=` (actor params, actor optimizer, ref params, critic ...)
OFFLOAD_LETTERS = {
    "actor_rollout_ref.actor.fsdp_config.param_offload": "p",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "o",
    "actor_rollout_ref.ref.fsdp_config.param_offload": "r",
    "critic.model.fsdp_config.param_offload": "cp",
    "critic.model.fsdp_config.optimizer_offload": "co",
}
OFFLOAD_TOKEN = "off"


def _verl_key(name: str) -> str:
    return name.lstrip("+~").removeprefix("verl.")


def short(name: str, names: list[str]) -> str:
    """Shortest dotted suffix of `name` that no other name shares."""
    parts = name.split(".")
    for n in range(1, len(parts) + 1):
        suffix = ".".join(parts[-n:])
        if sum(1 for other in names if other.endswith(suffix)) == 1:
            return suffix
    return name


def short_name(name: str, names: list[str]) -> str:
    """The name a knob goes by in labels, tables and plots (`util`, `tp`, else a short suffix)."""
    letter = OFFLOAD_LETTERS.get(_verl_key(name))
    if letter is not None:
        return f"{OFFLOAD_TOKEN}_{letter}"
    last = name.rsplit(".", 1)[-1]
    # two knobs that end alike (rollout's and ref's log-prob budget) keep their distinct suffixes
    alike = sum(1 for other in names if other.rsplit(".", 1)[-1] == last)
    return (ABBREVIATIONS.get(last) if alike <= 1 else None) or short(name, names)


def decimals_of(step: Any) -> int | None:
    """Digits after the point a float step has (0.05 -> 2); None for no step."""
    if not isinstance(step, (int, float)) or isinstance(step, bool) or not step or not math.isfinite(step):
        return None
    text = f"{float(step):.12f}".rstrip("0")
    return len(text.split(".")[1]) if "." in text else 0


def figure(value: float) -> str:
    """A measured or predicted number as every view shows it: 4 significant digits, trailing zeros kept so
    that figures side by side read alike (`343.0` beside `340.7`, `0.5400`, `1013`)."""
    if not math.isfinite(value):
        return str(value)
    text = f"{value:#.4g}"
    return text if "e" in text else text.rstrip(".")


def clip(text: str, width: int) -> str:
    """`text` within `width` characters, cut after a whole word with an ellipsis (a word longer than
    the width is cut inside it)."""
    if len(text) <= width:
        return text
    head = text[:max(width - 1, 0)]
    cut = head.rfind(" ")
    return (head[:cut].rstrip() + " …") if cut > 0 else head + "…"


def step_of(distribution: Any) -> Any:
    return getattr(distribution, "step", None)


def show(value: Any, step: Any = None) -> str:
    """A knob's value as people read it: floats at the step's precision, else at most 4 significant digits."""
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, float):
        digits = decimals_of(step)
        if digits is not None:
            return f"{value:.{digits}f}"
        return f"{value:.4g}"
    return str(value)


def knob_tokens(params: Mapping[str, Any], steps: Mapping[str, Any] | None = None) -> list[str]:
    """`util=0.90`, `tp=2`, `off=p,o` ... in the params' order; `steps` maps a param to its float step."""
    steps = steps or {}
    names = list(params)
    tokens: list[str] = []
    letters: list[str] | None = None
    for name, value in params.items():
        letter = OFFLOAD_LETTERS.get(_verl_key(name))
        if letter is not None:
            if letters is None:
                letters = []
                tokens.append(OFFLOAD_TOKEN)      # placeholder: the flags' position in the label
            if value is True or str(value).lower() == "true":
                letters.append(letter)
            continue
        tokens.append(f"{short_name(name, names)}={show(value, steps.get(name))}")
    if letters is not None:
        tokens[tokens.index(OFFLOAD_TOKEN)] = f"{OFFLOAD_TOKEN}={','.join(letters) or '-'}"
    return tokens


def trial_label(number: int | None, outcome: str | None, knobs: str | None) -> str:
    """`t07 oom util=0.90 tp=2 off=p,o`: the trial, its outcome once known, the knobs that vary."""
    head = f"t{number:02d}" if number is not None else None
    return " ".join(x for x in (head, outcome, knobs) if x)


def not_launched(reused_from: Any, ruled_out_by: Any) -> str:
    """Why a trial launched nothing, the same words on the terminal, in the summary, the report and its
    MLflow run name: `reused t01` (a measurement of this study told again) or `ruled out by trial 3` (an
    earlier trial's outcome proves it fails); '' for a launched trial."""
    if reused_from is not None and reused_from != "":
        return f"reused t{int(reused_from):02d}"
    if ruled_out_by is not None and ruled_out_by != "":
        return f"ruled out by trial {int(ruled_out_by)}"
    return ""


def path_safe(label: str) -> str:
    """The label as verl's trainer.experiment_name (`t07_util-0.90_tp-2_off-p+o`): it becomes a checkpoint
    directory and a Hydra override value, so no spaces, commas or `=` (which would need quoting)."""
    return label.replace(" ", "_").replace("=", "-").replace(",", "+")
