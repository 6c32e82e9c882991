"""Track (docs/architecture.md, stage 8): each trial's MLflow run (created before launch so verl joins it through
MLFLOW_RUN_ID), its params, tags, metrics, artifacts and final status (`mlflow_runs`); the store and
the study's experiment (`store`); the sweep's one MLflow run, the parent of its trial runs (`sweep_run`: elected,
continued or superseded when a study resumes); a study's runs (`study_runs`);
device peaks (`system_metrics`).

May import: verlsweep.common, verlsweep.config (the trial's typed settings), verlsweep.command (to
flatten knobs into params). Never the trial process, the planner or the sweeper.
"""
