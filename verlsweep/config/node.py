"""The base of every typed config node, and the two ways a node is made from the composed config.

A node is a frozen dataclass that also reads as a read-only mapping (`node["key"]`, `node.get(key)`,
`dict(node)`), as verl's own config nodes do (verl/base_config.py BaseConfig), so code written against a
plain tree reads a node the same way.

`convert` makes one node from the composed config the way verl makes its nodes (verl/utils/config.py
omega_conf_to_dataclass: OmegaConf.structured(cls) merged with the node, then OmegaConf.to_object), and
turns what OmegaConf refuses into Problems that name the full key and what it takes: a wrong type, a
key the node does not have, a required key left out. All of a node's problems come out at once.

`from_plain` makes a node from a plain tree of a config that has been read once already, without the
checks: the sweeper's guide plans hundreds of candidates of one config, and `convert` costs about a
millisecond per node where `from_plain` costs microseconds. Each value is cast to its field's type as
OmegaConf would (313 -> 313.0 for a float field), so both give equal nodes (tests/test_config.py).
"""
from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import MISSING, fields, is_dataclass, replace
from functools import cache
from typing import Any, TypeVar, cast

from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from verlsweep.common.errors import ConfigError, Problem

N = TypeVar("N", bound="ConfigNode")
D = TypeVar("D")      # any dataclass (the sweeper's config dataclass too)
F = TypeVar("F", bound=Callable[..., Any])


def _per_class(fn: F) -> F:
    """functools.cache that keeps the function's signature for mypy (its wrapper takes only Hashable, which
    mypy does not see a `type[D]` as)."""
    return cast(F, cache(fn))


class ConfigNode(Mapping[str, Any]):
    """A typed node that reads as a read-only mapping of its fields (subclasses are frozen dataclasses)."""

    def __getitem__(self, key: str) -> Any:
        if key not in _names(type(self)):
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(_names(type(self)))

    def __len__(self) -> int:
        return len(_names(type(self)))


@_per_class
def _names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


@_per_class
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def required(cls: type) -> list[str]:
    """The fields of a node without a default: what its YAML must state."""
    return [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]


def expected(hint: Any) -> str:
    """What a field of this type takes, in words for a Problem."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join([*(expected(a) for a in args), "null"])
    origin = typing.get_origin(hint) or hint
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string", list: "a list",
            tuple: "a list", dict: "a mapping"}.get(origin, "any value")


def _element(hint: Any) -> Any:
    """The type of an element of a list/tuple/dict field (for an error inside it), else the hint itself."""
    args = [a for a in typing.get_args(hint) if a is not type(None) and a is not Ellipsis]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        return _element(args[0])
    return args[-1] if typing.get_origin(hint) in (list, tuple, dict) and args else hint


def _at(tree: Any, parts: list[str]) -> Any:
    for part in parts:
        tree = tree.get(part) if isinstance(tree, Mapping) else (
            tree[int(part)] if isinstance(tree, list) and part.isdigit() and int(part) < len(tree) else None)
    return tree


def convert(cls: type[D], node: Any, key: str) -> D:
    """The node at `key` of the composed config (resolved) as `cls`. Raises ConfigError naming every key of
    it that is unknown, missing or of the wrong type."""
    plain = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node
    names = _names(cls)
    if not isinstance(plain, Mapping):
        raise ConfigError([Problem(key, plain, f"a mapping with the keys {', '.join(names)}")])
    problems = [Problem(f"{key}.{k!s}", v, f"a key of {key}: {', '.join(names)}")
                for k, v in plain.items() if k not in names]
    data = {str(k): v for k, v in plain.items() if k in names}
    problems += [Problem(f"{key}.{name}", None, f"required: {expected(_hints(cls)[name])}")
                 for name in required(cls) if name not in data]
    schema = _schema(cls)
    while True:
        try:
            merged = OmegaConf.merge(schema, data)
            break
        except (ValidationError, ConfigKeyError) as exc:     # one at a time: drop it and look for the next
            parts = [p for p in re.split(r"[.\[\]]", str(exc.full_key)) if p]
            hint = _hints(cls).get(parts[0]) if parts else None
            if hint is None or parts[0] not in data:
                raise
            if isinstance(exc, ConfigKeyError):     # a key a nested node (study.guide) does not have
                parent = ".".join([key, *parts[:-1]])
                nested = _node_class(hint)
                allowed = f"a key of {parent}: {', '.join(_names(nested))}" if nested else "a known key"
                problems.append(Problem(f"{key}.{exc.full_key}", _at(data, parts), allowed))
            else:
                problems.append(Problem(f"{key}.{exc.full_key}", _at(data, parts),
                                        expected(hint if len(parts) == 1 else _element(hint))))
            del data[parts[0]]
    if problems:
        raise ConfigError(problems)
    out = OmegaConf.to_object(merged)
    assert isinstance(out, cls)
    return _with_tuples(out)


@_per_class
def _schema(cls: type) -> Any:
    """The class as OmegaConf's structured node (OmegaConf.merge copies it: one per class is enough), opened
    for the merge: a frozen dataclass's node and every node nested in it are read-only."""
    node = OmegaConf.structured(cls)
    OmegaConf.set_readonly(node, False)
    for f in fields(cls):         # a nested node (study.guide) exists, open, for the merge to fill in
        nested = _node_class(_hints(cls)[f.name])
        if nested is not None and OmegaConf.is_missing(node, f.name):
            node[f.name] = _schema(nested)
    return node


def _node_class(hint: Any) -> type | None:
    """The dataclass a field's type names (a nested node such as study.guide), else None."""
    return hint if isinstance(hint, type) and is_dataclass(hint) else None


def _with_tuples(out: D) -> D:
    """OmegaConf returns a list for a tuple field; a frozen node holds the tuple it declares."""
    lists = {name: tuple(value) for name, value in ((n, getattr(out, n)) for n in _names(type(out)))
             if isinstance(value, list) and _casts(type(out))[name] is tuple}
    return replace(cast(Any, out), **lists) if lists else out


@_per_class
def _casts(cls: type) -> dict[str, Callable[[Any], Any] | None]:
    """Per field, the type a plain value is cast to (None: kept as it is)."""
    out: dict[str, Callable[[Any], Any] | None] = {}
    for name in _names(cls):
        hint = _hints(cls)[name]
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
            hint = args[0]
        origin = typing.get_origin(hint) or hint
        out[name] = origin if origin in (int, float, str, bool, tuple, list, dict) else None
    return out


def from_plain(cls: type[N], values: Mapping[str, Any]) -> N:
    """A node from a plain, already-read tree (no checks; keys the node lacks are left out)."""
    casts = _casts(cls)
    return cls(**{name: (value if cast is None or value is None else cast(value))
                  for name, cast in casts.items() if name in values for value in (values[name],)})
