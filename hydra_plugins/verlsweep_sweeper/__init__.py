"""verlsweep's Optuna 5 sweeper for Hydra (`hydra/sweeper: verlsweep`).

config.py: the config and its sampler/pruner groups; verlsweep_sweeper.py: the registered Sweeper;
_impl.py: the sweep loop, built from _space.py (search space), _study.py (storage, study, budget,
stale trials), _results.py (job result -> Optuna), _outputs.py (best.yaml, best_launch.sh,
trials.csv, summary) and _tracking.py (the MLflow parent run).
"""
