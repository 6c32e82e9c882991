"""model.*: one model, as a model option describes it (conf/model/*.yaml, docs/config-tree.md "Adding a
model"). The planner derives its shapes from `config` (verlsweep.plan.predictor.trial_spec.ModelShapes)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from verlsweep.config.node import ConfigNode


@dataclass(frozen=True)
class ModelConfig(ConfigNode):
    name: str
    hf_id: str | None
    path: str | None                      # the checkpoint verl loads
    config: dict[str, Any]                # the checkpoint's config.json fields, under their own names
