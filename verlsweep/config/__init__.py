"""Config (docs/architecture.md, stage 6, first in prepare): the nodes verlsweep owns, as typed frozen
dataclasses, and `read(cfg) -> TaskConfig`, the one conversion of a trial's composed config into them.

`settings` holds the nodes of verlsweep itself (paths, trial, validate, plan, objective, tracking,
monitor, algorithm's own part), `study` what verlsweep's task adds to a sweep, `hardware`, `model` and
`runner` the recipe's groups verlsweep defines, `node` the base they share (a dataclass that reads
as a mapping, as verl's config nodes do) and the conversion of one node; `read` the whole trial. A
value is written once (docs/config-tree.md, "Typed nodes"): the YAML states it, the dataclass says
its type.

May import: verlsweep.common. Every later stage may import it.
"""
from verlsweep.config.hardware import Hardware
from verlsweep.config.model import ModelConfig
from verlsweep.config.node import ConfigNode, convert, from_plain
from verlsweep.config.runner import (
                                     RUNNERS,
                                     EstimateRunnerConfig,
                                     Limits,
                                     RunnerConfig,
                                     ScriptRunnerConfig,
                                     VerlRunnerConfig,
)
from verlsweep.config.settings import (
                                     AlgorithmConfig,
                                     MonitorConfig,
                                     Objective,
                                     PathsConfig,
                                     PlanConfig,
                                     TrackingConfig,
                                     TrialConfig,
                                     ValidateConfig,
)
from verlsweep.config.study import GuideConfig, LongRunConfig, StudyConfig, study_config
from verlsweep.config.task_config import TaskConfig, check_resolves, flatten, plain, read

__all__ = ["RUNNERS", "AlgorithmConfig", "ConfigNode", "EstimateRunnerConfig", "GuideConfig", "Hardware",
           "Limits", "LongRunConfig", "ModelConfig", "MonitorConfig", "Objective", "PathsConfig", "PlanConfig",
           "RunnerConfig", "ScriptRunnerConfig", "StudyConfig", "TaskConfig", "TrackingConfig", "TrialConfig",
           "ValidateConfig", "VerlRunnerConfig", "check_resolves", "convert", "flatten", "from_plain", "plain",
           "read", "study_config"]
