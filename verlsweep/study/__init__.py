"""The study: the sweep the sweeper plugin runs, from its search space to its outputs.

hydra_plugins/verlsweep_sweeper is the thin Hydra side (config, the registered Sweeper, and _impl.py:
the settings read once, the search space from Hydra's overrides, the app's hooks chosen, each batch handed
to Hydra's launcher); everything else is here, with public names, usable without Hydra's sweeper machinery:

    settings    hydra.sweeper as the loop reads it; the task's `study` node, typed
    space       the search space: Hydra sweep overrides -> Optuna distributions, checked
    create      the study: its name, sampler, pruner, create/resume/join, what is enqueued, heartbeat
    loop        ask a batch -> run it (the plugin's run_batch) -> tell -> write outputs, for any app
    hooks       what differs by app: TaskHooks, and AppHooks for any Hydra app (hydra-optuna-sweeper's)
    verl_hooks  verlsweep's own task: fixed-config check, guide, proofs, trial links, MLflow, best_launch.sh
    enqueue     hydra.sweeper.enqueue and the recipe's own config
    guide       the planner-ranked configs run first
    reuse       a proposal measured already: its result again, nothing launched
    session     this sweep process on its study (verlsweep.reconcile on start and after each batch)
    peer_compat hydra-optuna-sweeper's keys and optimization_results.yaml, for apps coming from it
    job_dirs    trial dirs by trial number, under the study's first sweep dir
    outputs     best.yaml, best_launch.sh, report.html, the summary table (trials.csv: verlsweep.reconcile)
    progress    the terminal: one line per trial, the status line
    view        after each batch: status line, report, the MLflow sweep run's numbers
    chain       study.from_study: start from another sweep's best config, and the link kept
    inflight    asynchronous trials; subsets: device groups of one node; failures: when failures stop it

How a result is told, the trial budget and trials.csv are verlsweep.reconcile, below both this package and
verlsweep.report (whose `--status --repair` tells and rewrites as a sweep does): study writes
report.html through verlsweep.report, so report cannot import study.

May import: verlsweep.common, command, plan, proofs, tracking, reconcile, report and study_link.
Nothing imports it but hydra_plugins (tests/test_layout.py); it never imports hydra_plugins nor Hydra's
launcher API (the plugin hands it a callable that runs a batch, and the verl hooks the compose calls:
verl_hooks.Hydra).
"""
