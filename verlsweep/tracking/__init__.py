"""Stage 4, tracking: each trial's MLflow run (created before launch so verl joins it through
MLFLOW_RUN_ID), its params, tags, metrics, artifacts and final status; the sweep's parent run.

May import: verlsweep.common, verlsweep.command (to flatten knobs into params). Never the trial
process, the planner or the sweeper.
"""
