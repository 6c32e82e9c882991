"""The settings of verlsweep itself: one node per `conf/<node>/default.yaml` (docs/config-tree.md).

Each YAML states every key of its node with the comment that says why; the dataclass says each key's
type and gives none a default, so a value is written once (tests/test_config.py checks both ways).
"""
from __future__ import annotations

from dataclasses import dataclass

from verlsweep.common.labels import trial_label
from verlsweep.config.node import ConfigNode


@dataclass(frozen=True)
class PathsConfig(ConfigNode):
    """paths.*: the model, data and output roots (conf/paths/default.yaml)."""

    model_root: str
    data_root: str
    output_root: str


@dataclass(frozen=True)
class TrialConfig(ConfigNode):
    """trial.*: what one trial is (conf/trial/default.yaml); the sweeper fills number, study_name,
    storage and label."""

    steps: int
    number: int | None
    study_name: str | None
    storage: str | None
    name: str                          # verl's trainer.experiment_name
    label: str | None                  # the knobs that vary, for the MLflow run's name

    @property
    def run_name(self) -> str:
        """The MLflow run's name: `t07 util=0.90 tp=2` in a sweep, else trial.name."""
        return trial_label(self.number, None, self.label) if self.label else self.name


@dataclass(frozen=True)
class ValidateConfig(ConfigNode):
    """validate.*: the checks before launch (conf/validate/default.yaml; verlsweep.command reads them)."""

    verl: bool
    token_budget_factor: float


@dataclass(frozen=True)
class PlanConfig(ConfigNode):
    """plan.*: the memory planner's settings (conf/plan/default.yaml, docs/planning.md)."""

    enforce: bool
    margin_gb: float
    calibration: str | None
    calibrate: bool                    # refit the stack's terms to its measured trials before planning
    prompt_tokens: float | None
    response_tokens: float | None
    trainer: str                       # traced | analytic (verlsweep.common.names.PLAN_TRAINERS)
    trace_limit_s: float


@dataclass(frozen=True)
class Objective(ConfigNode):
    """objective.*: the metric the sweeper optimises and how a trial's steps become one value
    (conf/objective/default.yaml, verlsweep.trial.metrics.objective)."""

    metric: str
    aggregate: str
    warmup_steps: int
    extra: tuple[str, ...]             # further metrics aggregated the same way, recorded beside it


@dataclass(frozen=True)
class TrackingConfig(ConfigNode):
    """tracking.*: MLflow (conf/tracking/default.yaml, verlsweep.tracking)."""

    enabled: bool
    uri: str
    experiment: str | None
    parent_run_id: str | None
    new_parent_run: bool
    artifact_location: str | None
    log_tail_lines: int


@dataclass(frozen=True)
class MonitorConfig(ConfigNode):
    """monitor.*: the device monitor (conf/monitor/default.yaml)."""

    enabled: bool
    interval: float
    busy_margin_gb: float


@dataclass(frozen=True)
class AlgorithmConfig(ConfigNode):
    """algorithm.*, verlsweep's own part of an algorithm option (conf/algorithm/*.yaml): its name, which
    tags the trial's MLflow run, and whether it trains a critic; what verl receives is under `verl:`."""

    name: str
    critic: bool
