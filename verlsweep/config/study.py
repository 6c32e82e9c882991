"""study.*: what verlsweep's own task adds to a sweep (conf/study/default.yaml has each value and why); only
the sweeper's verl hooks read it (verlsweep.study.verl_hooks), once, through `study_config`."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.config.node import ConfigNode, convert

STUDY_KEY = "study"


@dataclass(frozen=True)
class GuideConfig(ConfigNode):
    """The planner-guided start (verlsweep/study/guide.py)."""

    top_k: int
    draws: int
    error: float


@dataclass(frozen=True)
class LongRunConfig(ConfigNode):
    """How best_launch.sh turns the best trial into the real training run."""

    steps: int
    overrides: list[str]
    confirm: int              # top configs confirmed at the maximum lengths (0: none)
    confirm_steps: int        # steps of one confirmation


@dataclass(frozen=True)
class StudyConfig(ConfigNode):
    objectives: list[str]
    proofs: bool
    enqueue_recipe: bool
    report: bool
    devices_per_trial: int | None
    from_study: str | None
    guide: GuideConfig
    long_run: LongRunConfig


def study_config(config: Mapping[str, Any]) -> StudyConfig:
    """The composed config's `study` node, typed; raises ConfigError naming a bad or missing key."""
    node = config.get(STUDY_KEY)
    if not isinstance(node, Mapping):
        raise ConfigError([Problem(STUDY_KEY, node, "the node of conf/study/default.yaml (`- study: default` in "
                                                    "the root config's defaults list)")])
    return convert(StudyConfig, node, STUDY_KEY)
