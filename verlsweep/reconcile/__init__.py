"""After a crash, Optuna, MLflow and the sweep dir tell the same story.

A sweep process records itself in its study (`sessions`); the next one on the study finds trials of
sweeps that died (`trials`: their processes stopped, the trial failed `orphaned` or told the outcome
its own files prove, its MLflow run ended) and fixes every run that disagrees with its trial
(`check`, also behind `python -m verlsweep.report --status [--repair]`). Trials of a live sweep
process (its heartbeat fresh, or its pid alive on this host) are never touched.

May import: verlsweep.common, verlsweep.trial (orphans, classify), verlsweep.tracking, verlsweep.study_link.
"""
