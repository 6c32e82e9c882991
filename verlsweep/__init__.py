"""verlsweep: declarative Hydra + Optuna + MLflow sweeps for verl RL post-training.

Data flows one way: sweep.py -> sweeper (hydra_plugins/verlsweep_sweeper) -> Hydra launcher -> the
trial task (task.py) -> command (compose) -> plan -> trial (run) -> tracking (track). Each stage is a
subpackage that imports only `common` and the stages before it; task.py is the one module that wires
them all. study_link.py is the Optuna link both the sweeper and a trial process import.
"""
from pathlib import Path

__version__ = "0.1.0"

# The config tree sits beside the package in a source checkout / editable install.
CONF_DIR: Path = Path(__file__).resolve().parent.parent / "conf"
