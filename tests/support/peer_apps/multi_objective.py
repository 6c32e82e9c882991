"""Binh and Korn's two objectives, returned as a tuple (hydra-optuna-sweeper's example/multi-objective.py)."""

import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path="multi-objective-conf", config_name="config")
def binh_and_korn(cfg: DictConfig) -> tuple[float, float]:
    x, y = float(cfg.x), float(cfg.y)
    return 4 * x * x + 4 * y * y, (x - 5) ** 2 + (y - 5) ** 2


if __name__ == "__main__":
    binh_and_korn()
