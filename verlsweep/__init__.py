"""verlsweep: declarative Hydra + Optuna + MLflow sweeps for verl RL post-training.

Data flows one way:

    sweep.py -> sweeper (hydra_plugins/verlsweep_sweeper: thin, Hydra's side) -> study (verlsweep/study:
    ask, run a batch, tell, outputs) -> Hydra launcher -> trial task (task.py) -> prepare (prepare.py:
    config (read once, typed) -> command (compose) -> plan) -> trial (run) -> tracking (track); reconcile,
    record and report after.
    The numbered list of docs/architecture.md is this order.

Each stage is a subpackage that imports only `common` and the stages before it (its docstring's "May import:"
line; tests/test_layout.py checks). task.py wires a trial's stages over the one PreparedTrial prepare.py
builds; study orchestrates the sweep and nothing in verlsweep imports it, nor hydra_plugins. study_link.py is
the Optuna link both the sweep and a trial process import; record is what the sweep and report's `--status
--repair` share (how a result is told, the trial budget, trials.csv), below both. Optuna's private API is used
in verlsweep/common/optuna_private.py only.
"""
from pathlib import Path

__version__ = "0.1.0"

# The config tree and the search spaces sit beside the package in a source checkout / editable install;
# hydra_plugins/verlsweep_searchpath shows sweeps/*.yaml as config group `space` of an app rooted at
# ROOT_CONFIG.
CONF_DIR: Path = Path(__file__).resolve().parent.parent / "conf"
SWEEPS_DIR: Path = CONF_DIR.parent / "sweeps"
ROOT_CONFIG = "sweep"           # conf/sweep.yaml
