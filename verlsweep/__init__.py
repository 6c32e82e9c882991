"""verlsweep: declarative Hydra + Optuna + MLflow sweeps for verl RL post-training.

Data flows one way: sweep.py -> sweeper -> launcher -> trial task (task.py) -> compose (compose.py)
-> plan -> run -> track.
"""
from pathlib import Path

__version__ = "0.1.0"

# The config tree sits beside the package in a source checkout / editable install.
CONF_DIR: Path = Path(__file__).resolve().parent.parent / "conf"
