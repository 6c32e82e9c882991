"""A config node read once into its frozen dataclass, every mistake in it a Problem naming its key.

As verl turns each config node into its dataclass once (verl/utils/config.py omega_conf_to_dataclass),
through OmegaConf's structured merge: a value of the wrong type, a key the dataclass lacks and a
missing value are refused there, not found later where the value is read.
"""
from __future__ import annotations

from typing import Any, Mapping, TypeVar, cast

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from verlsweep.common.errors import ConfigError, Problem

T = TypeVar("T")


def _writable(node: DictConfig) -> DictConfig:
    """A frozen dataclass's node, with its nested nodes, opened for the merge (each is read-only)."""
    OmegaConf.set_readonly(node, False)
    for key in node:
        if not OmegaConf.is_missing(node, key) and isinstance(node[key], DictConfig):
            _writable(node[key])
    return node


def to_dataclass(schema: type[T], values: Mapping[str, Any] | DictConfig, key: str) -> T:
    """`values` (the node at config key `key`) as a `schema` instance; raises ConfigError naming the key."""
    try:
        merged = OmegaConf.merge(_writable(OmegaConf.structured(schema)), values)
        return cast(T, OmegaConf.to_object(merged))
    except OmegaConfBaseException as exc:
        leaf = str(getattr(exc, "full_key", "") or "")
        node = values if isinstance(values, DictConfig) else OmegaConf.create(dict(values))
        value = OmegaConf.select(node, leaf, default=None, throw_on_missing=False) if leaf else None
        raise ConfigError([Problem(f"{key}.{leaf}" if leaf else key, value, str(exc).splitlines()[0])]) from None
