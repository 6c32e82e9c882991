"""A 4-d sphere whose z and w come from a function of the sweeper config and the trial
(hydra-optuna-sweeper's example/custom-search-space-objective.py: `custom_search_space`)."""
import hydra
from omegaconf import DictConfig
from optuna.trial import Trial


@hydra.main(version_base=None, config_path="custom-search-space", config_name="config")
def sphere4(cfg: DictConfig) -> float:
    return sum(float(cfg[k]) ** 2 for k in ("w", "x", "y", "z"))


def configure(cfg: DictConfig, trial: Trial) -> None:
    """z within max_z_difference_from_x of x; w is a new key, hence its `+`."""
    x = trial.params["x"]
    trial.suggest_float("z", x - cfg.max_z_difference_from_x, x + cfg.max_z_difference_from_x)
    trial.suggest_float("+w", 0.0, 1.0)


if __name__ == "__main__":
    sphere4()
