"""Names more than one stage must agree on: a trial dir's files, the env vars a trial reads, units."""
import re

# Units: the planner, `plan detect` and the device readings all speak GiB, as torch's allocator does.
MIB = 1024**2
GIB = 1024**3

# Config dirs of the user's own (hardware, models, local/), os.pathsep-separated: searched after conf/
# (hydra_plugins/verlsweep_searchpath; docs/config-tree.md).
CONFIG_PATH_ENV = "VERLSWEEP_CONFIG_PATH"

# Environment of a trial process (set only there, never in the sweep's own os.environ).
TRIAL_DIR_ENV = "VERLSWEEP_TRIAL_DIR"          # the trial's own dir: its log, files and working dir
FILE_LOGGER_ENV = "VERL_FILE_LOGGER_PATH"      # verl/utils/tracking.py FileLogger writes its JSONL here
MLFLOW_RUN_ID_ENV = "MLFLOW_RUN_ID"            # verl's MLflow logger joins this run (mlflow.start_run)
MLFLOW_URI_ENV = "MLFLOW_TRACKING_URI"

# What `peak_memory_gb` means for every runner, the planner's prediction and `plan refit`: the most
# device memory torch *allocated* (not reserved by its caching allocator) in the actor's training
# engine on one device, in GiB (bytes / 1024**3), as verl logs it per step (verl/workers/
# engine_workers.py _postprocess_output, renamed under actor/ by the trainer). The maximum over the steps.
PEAK_MEMORY_METRIC = "actor/perf/max_memory_allocated_gb"

# plan.trainer: where the planner's trainer activations come from (checked by verlsweep.command.rules,
# read by verlsweep.plan.predictor.inputs): traced from the model code (verlsweep.plan.trace.trainer_trace) or
# the formula.
PLAN_TRAINERS = ("traced", "analytic")

# Files in a trial dir.
COMMAND_JSON = "command.json"                  # {"argv": [...], "env": {...}} of the trial
COMMAND_SH = "command.sh"                      # the same as a runnable bash snippet
LOG_FILE = "trial.log"                         # everything the trial process printed
METRICS_FILE = "metrics.jsonl"                 # verl's file-logger output (one JSON object per step)
TAIL_FILE = "log_tail.txt"                     # the last lines of the log, for the MLflow run
EXCERPT_FILE = "excerpt.txt"                   # the lines that decided a failed trial's outcome
RESULT_FILE = "result.json"                    # the TrialResult, written the moment the runner returns
PROCESSES_FILE = "processes.json"              # what identifies the trial's processes (orphan stop)

# Optuna user attrs a trial process records about itself while it runs (verlsweep.study_link), read by a
# later sweep when this one dies (verlsweep.reconcile).
JOB_DIR_ATTR = "job_dir"                       # the trial's dir
RUN_ID_ATTR = "run_id"                         # its MLflow run
PROCESSES_ATTR = "processes"                   # the same record as PROCESSES_FILE

# A test-only hook: `VERLSWEEP_CRASH_AT=<point>` SIGKILLs the process at that named point
# (verlsweep/common/crashpoint.py), so a test hits a crash window deterministically.
CRASH_AT_ENV = "VERLSWEEP_CRASH_AT"

# How a credential's value is written wherever a trial's env is shown or tracked, and the variable
# names taken for credentials.
REDACTED = "***"
SECRET_NAME = re.compile(r"TOKEN|PASSWORD|SECRET|KEY", re.IGNORECASE)

# Attributes the sweeper stores in the Optuna study, which the report reads back.
PLACEHOLDER_ATTR = "verlsweep.placeholder"     # trial user attr: its values are a placeholder (oom/infeasible)
OVER_BUDGET_ATTR = "verlsweep.over_budget"     # trial system attr: asked beyond n_trials, never run
N_TRIALS_ATTR = "verlsweep.n_trials"           # study user attr: the study's total trial budget
PREDICTED_ATTR = "predicted"                   # trial user attr: the planner's numbers (plan/...)
# a trial the planner predicts not to fit but launches because it fits inside its error band
# (verlsweep.plan.predictor.band): the word in its terminal line and MLflow run name, its tag and plan/ metric
EDGE_PROBE = "edge probe"
EDGE_PROBE_TAG = "plan.edge_probe"
EDGE_PROBE_METRIC = "plan/edge_probe"
RECIPE_ATTR = "verlsweep.recipe_script"       # study user attr: {path, sha256} of the recipe script it sweeps
FROM_STUDY_ATTR = "verlsweep.from_study"       # study user attr: the sweep it started from (verlsweep.study.chain)
OBJECTIVES_ATTR = "verlsweep.objectives"       # study user attr: the TrialResult values the directions apply to
TRACKING_ATTR = "verlsweep.tracking"           # study user attr: {uri, experiment} of its MLflow runs
OVERRIDES_ATTR = "overrides"                   # trial user attr: the overrides the trial's job ran with
REUSED_FROM_ATTR = "reused_from"               # trial user attr: the trial whose measurement it repeats
REUSED_RUN_ATTR = "reused_run_id"              # trial user attr: that trial's MLflow run
FAILURE_PHASE_ATTR = "failure_phase"          # trial user attr: TrialResult.failure_phase of an `oom`
RULED_OUT_ATTR = "ruled_out_by"                # trial user attr: the trial whose outcome proves it fails (unlaunched)
PROVEN_FIT_ATTR = "proven_fit_by"              # trial user attr: the trial whose fit proves this one fits
RULED_OUT_RULE_ATTR = "ruled_out_rule"         # trial user attr: the verlsweep.proofs.rules rule that proves it

# the planner's statuses predicted to fit (verlsweep.plan.predictor.verdict); `edge` is launched, `infeasible` vetoed.
# Here so that the guide, which imports the plan package lazily, reads the same tuple.
FITS = ("ok", "tight")

# The long-run confirmation (verlsweep.reconcile.confirmations): a trial of the study that runs a finished
# trial's config at the maximum lengths, outside n_trials.
CONFIRMS_ATTR = "verlsweep.confirms"           # confirmation trial user attr: the trial number it confirms
CONFIRM_AT_ATTR = "verlsweep.confirm_at"       # confirmation trial user attr: [max prompt, max response] tokens
CONFIRMS_TAG = "trial.confirms"                # the confirmation's MLflow run: the trial it confirms
CONFIRMATION_TAG = "trial.confirmation"        # a confirmed trial's run: confirmed / fails at max lengths / ...
