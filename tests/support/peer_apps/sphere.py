"""x^2 + y^2, the example app of hydra-optuna-sweeper (its example/sphere.py and conf/config.yaml)."""
import hydra
from omegaconf import DictConfig


@hydra.main(version_base=None, config_path="conf", config_name="config")
def sphere(cfg: DictConfig) -> float:
    if cfg.get("error", False):        # the peer's switch for a failing task (its test_failure_rate)
        raise RuntimeError("cfg.error is True")
    return float(cfg.x) ** 2 + float(cfg.y) ** 2


if __name__ == "__main__":
    sphere()
