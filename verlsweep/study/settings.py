"""What the sweep reads of its settings, each read once into a frozen object.

    Settings     `hydra.sweeper`: what the loop reads, for any app (the sweeper builds it once from its
                 config dataclass, hydra_plugins/verlsweep_sweeper/config.py, which says what each key
                 means and its default)
    StudyConfig  the task's `study` node: what verlsweep's own task adds to a sweep (conf/study/default.yaml
                 has each value and why); only the verl hooks read it (verlsweep.study.verl_hooks)

Nothing here imports optuna: the sweeper plugin's config reads this module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Mapping, Optional, Protocol, Sequence

from omegaconf import MISSING, DictConfig, OmegaConf

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.common.typed_config import to_dataclass

STUDY_KEY = "study"


class Settings(Protocol):
    """hydra.sweeper as the loop reads it (hydra_plugins/verlsweep_sweeper/config.py VerlSweepSweeperConf)."""

    @property
    def sampler(self) -> Mapping[str, Any]: ...
    @property
    def pruner(self) -> Mapping[str, Any]: ...
    @property
    def storage(self) -> Optional[str]: ...
    @property
    def study_name(self) -> Optional[str]: ...
    @property
    def n_trials(self) -> int: ...
    @property
    def n_jobs(self) -> int: ...
    @property
    def timeout(self) -> Optional[float]: ...
    @property
    def max_consecutive_failures(self) -> int: ...
    @property
    def max_failure_rate(self) -> Optional[float]: ...
    @property
    def custom_search_space(self) -> Optional[str]: ...
    @property
    def enqueue(self) -> Sequence[Mapping[str, Any]]: ...
    @property
    def remeasure(self) -> bool: ...
    @property
    def heartbeat_interval(self) -> int: ...
    @property
    def grace_period(self) -> Optional[int]: ...


# The `study` node's types. Every value is conf/study/default.yaml's (written there once, with its source).


@dataclass(frozen=True)
class GuideConfig:
    """The planner-guided start (verlsweep/study/guide.py)."""

    top_k: int = MISSING
    draws: int = MISSING
    error: float = MISSING


@dataclass(frozen=True)
class LongRunConfig:
    """How best_launch.sh turns the best trial into the real training run."""

    steps: int = MISSING
    overrides: List[str] = MISSING


@dataclass(frozen=True)
class StudyConfig:
    objectives: List[str] = MISSING
    proofs: bool = MISSING
    enqueue_recipe: bool = MISSING
    report: bool = MISSING
    devices_per_trial: Optional[int] = MISSING
    from_study: Optional[str] = MISSING
    guide: GuideConfig = field(default_factory=GuideConfig)
    long_run: LongRunConfig = field(default_factory=LongRunConfig)


def study_config(config: DictConfig) -> StudyConfig:
    """The composed config's `study` node, typed; raises ConfigError naming a bad or missing key."""
    node = OmegaConf.select(config, STUDY_KEY, default=None)
    if not isinstance(node, DictConfig):
        raise ConfigError([Problem(STUDY_KEY, node, "the node of conf/study/default.yaml (`- study: default` in "
                                                    "the root config's defaults list)")])
    return to_dataclass(StudyConfig, node, STUDY_KEY)
