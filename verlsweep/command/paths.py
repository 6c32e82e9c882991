"""The files a trial reads: model dirs and parquet files (an error in a real run, a warning in a dry run)."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from verlsweep.common.errors import Problem


def _get(cfg: DictConfig, key: str) -> object:
    return OmegaConf.select(cfg, key, default=None)


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
