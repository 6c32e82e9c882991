"""The files a trial reads: model dirs and parquet files (an error in a real run, a warning in a dry run)."""
from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from verlsweep.common.errors import MissingPath

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")     # <org>/<name>, as huggingface_hub validates repo ids


def _get(cfg: DictConfig, key: str) -> object:
    return OmegaConf.select(cfg, key, default=None)


def check_paths(cfg: DictConfig) -> list[MissingPath]:
    """Model and data paths the trial will read (an error in a real run, a warning in a dry run).

    Each names the key the user sets: `model.path` while verl's model path is still the model
    group's, else the verl key that was overridden."""
    problems: list[MissingPath] = []
    recipe = "recipe" in cfg        # a recipe script's own paths: set where the script takes them

    def script_hint(key: str) -> str:
        routes = OmegaConf.select(cfg, "recipe.routes", default=None)     # {verl key: `env VAR` | `args`}
        route = str(routes.get(key.removeprefix("verl."), "") if routes is not None else "")
        if route.startswith("env "):
            return f"the recipe script's value: set {route.removeprefix('env ')}, the variable it reads"
        return "the recipe script's value: change it there"
    for key in ("verl.actor_rollout_ref.model.path", "verl.critic.model.path"):
        path = _get(cfg, key)
        if key.startswith("verl.critic") and not _get(cfg, "verl.critic.enable"):
            continue
        if path and recipe and HUB_ID.fullmatch(str(path)) and not Path(str(path)).exists():
            continue        # a recipe script's hub id (Qwen/Qwen3-8B): verl's loaders fetch it from the hub
        if path and not Path(str(path)).expanduser().is_dir():
            shown = "model.path" if str(path) == str(_get(cfg, "model.path")) and not recipe else key
            problems.append(MissingPath(shown, path, script_hint(key) if recipe else
                                        "set VERLSWEEP_MODEL_ROOT or paths.model_root",
                                        rule="an HF model directory", groups=("model", "paths")))
    for key in ("verl.data.train_files", "verl.data.val_files"):
        files = _get(cfg, key)
        listed = isinstance(files, (list, tuple)) or OmegaConf.is_list(files)
        for f in cast(Iterable[Any], files) if listed else [files]:
            if f and not Path(str(f)).expanduser().is_file():
                problems.append(MissingPath(key, f, script_hint(key) if recipe else
                                            "set VERLSWEEP_DATA_ROOT or paths.data_root",
                                            rule="a parquet file", groups=("data", "paths")))
    return problems
