"""Errors raised before anything launches."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One rejected setting: which key, what it was, what would be accepted."""

    key: str
    value: Any
    allowed: str
    rule: str = ""

    def __str__(self) -> str:
        rule = f" [{self.rule}]" if self.rule else ""
        return f"{self.key}={self.value!r}: {self.allowed}{rule}"


@dataclass(frozen=True)
class MissingPath(Problem):
    """A file or directory a trial reads is not there; `groups` are the config groups (and roots)
    whose choice sets it, so a sweep that varies one of them knows the path varies too."""

    groups: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"not found: {self.key}={self.value} ({self.allowed})"


class ConfigError(ValueError):
    """The composed trial is invalid; nothing was launched."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid trial config ({len(self.problems)} problem(s)), nothing launched:\n{lines}")


def full_traceback_wanted() -> bool:
    """Hydra's switch for full tracebacks (hydra/_internal/utils.py run_and_report): with it, an input
    error's message comes with its traceback; the exit status and everything else stay the same (verl's
    recipe scripts export it)."""
    return os.environ.get("HYDRA_FULL_ERROR") == "1"
