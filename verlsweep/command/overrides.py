"""The `verl:` subtree of a composed config as Hydra command-line overrides for verl.

The subtree mirrors verl's own key paths, so flattening it yields `path=value` pairs verl's Hydra
accepts. Values are written in Hydra's override grammar (hydra/core/override_parser, the grammar in
hydra/grammar/OverrideParser.g4) so that what verl parses equals what we composed.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from verlsweep.config.task_config import flatten  # noqa: F401 - its old home: importers of the sweep keep it

# A string Hydra reads back as the same string without quotes. Anything else gets quoted.
_PLAIN = re.compile(r"[A-Za-z_/~.][\w./~+@-]*")
_NON_STRINGS = {"true", "false", "null", "nan", "inf", "-inf", "+inf"}

# Order in which verl's own scripts group their overrides (DATA / MODEL / ACTOR / ROLLOUT / REF /
# ALGORITHM / TRAINER arrays in verl-ascend-recipe scripts); critic and reward sit before algorithm.
# The names are those arrays' (verlsweep/command/launch_script.py writes them).
_SECTIONS = (
    ("data.", "DATA"),
    ("actor_rollout_ref.model.", "MODEL"),
    ("actor_rollout_ref.actor.", "ACTOR"),
    ("actor_rollout_ref.rollout.", "ROLLOUT"),
    ("actor_rollout_ref.ref.", "REF"),
    ("critic.", "CRITIC"),
    ("reward.", "REWARD"),
    ("algorithm.", "ALGORITHM"),
    ("trainer.", "TRAINER"),
)
OTHER_SECTION = "EXTRA"     # keys of no section above (ray_kwargs, ...), last


def format_value(value: Any) -> str:
    """Render a Python value in Hydra's override grammar."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if _PLAIN.fullmatch(value) and value.lower() not in _NON_STRINGS:
            return value
        return quoted(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{format_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot express {type(value).__name__} {value!r} as a Hydra override")


def quoted(value: str) -> str:
    """A string as a quoted Hydra value: it is read back as that string, never as a number or bool.

    In a quoted value Hydra takes a backslash literally unless it precedes a quote or ends the value
    (hydra/grammar/OverrideLexer.g4, "Escaped characters in quoted values"): only those runs are doubled.
    """
    escaped = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value).replace("'", "\\'")
    return f"'{escaped}'"


def section_rank(path: str) -> int:
    """Position of a key's section in verl's script order; unknown sections go last."""
    for rank, (prefix, _) in enumerate(_SECTIONS):
        if path.startswith(prefix):
            return rank
    return len(_SECTIONS)


def section_name(path: str) -> str:
    """The array a key's override goes in, in a launch script (DATA, ACTOR, ...)."""
    rank = section_rank(path)
    return _SECTIONS[rank][1] if rank < len(_SECTIONS) else OTHER_SECTION


def ordered(paths: Iterable[str]) -> list[str]:
    """Group by section, keep composition order inside a section (sorted() is stable)."""
    return sorted(paths, key=section_rank)
