"""The configs a study runs before the sampler proposes any: the recipe's own values of the swept
params (verlsweep's task: `study.enqueue_recipe`), then `hydra.sweeper.enqueue` (the planner's picks
follow, verlsweep.study.guide)."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verlsweep.common.errors import Problem
from verlsweep.study.space import SearchSpace, SearchSpaceError, config_key

log = logging.getLogger(__name__)


def recipe(config: DictConfig, space: SearchSpace) -> dict[str, Any] | None:
    """The composed config's values of the swept params (a group param by its chosen option); None when
    one of them lies outside the space, since a partial config is not the recipe."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
    found = {}
    for name, dist in space.distributions.items():
        key = config_key(name)
        value = choices.get(key) if key in choices else OmegaConf.select(config, key, default=None)
        try:
            if value is not None and dist._contains(dist.to_internal_repr(value)):
                found[name] = value
        except (ValueError, TypeError):
            pass
    return found if len(found) == len(space.distributions) else None


def checked(enqueue: Sequence[Mapping[str, Any]], space: SearchSpace) -> list[dict[str, Any]]:
    """hydra.sweeper.enqueue's entries, each checked to name only params of the space."""
    out = []
    for entry in enqueue:
        unknown = set(entry) - set(space.distributions)
        if unknown:
            raise SearchSpaceError([Problem("hydra.sweeper.enqueue", sorted(unknown),
                                            f"params of the search space: {', '.join(space.distributions)}")])
        out.append(dict(entry))
    return out


def entries(config: DictConfig, space: SearchSpace, enqueue: Sequence[dict[str, Any]],
            enqueue_recipe: bool) -> list[dict[str, Any]]:
    """The recipe's config first (when asked and inside the space), then the `enqueue` entries."""
    out: list[dict[str, Any]] = []
    if enqueue_recipe:
        own = recipe(config, space)
        if own is not None:
            out.append(own)
        else:
            log.info("study.enqueue_recipe: the composed values are not all inside the search space; skipped")
    return out + list(enqueue)
