"""Every failure text the classifier matches is proven against where it comes from.

Rows from installed packages (verl, ray, torch, hydra, omegaconf, mlflow) are looked up in the installed
files: a version bump that rewords a message, or an edit of a row's regex, fails here.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import mmap
import re
from pathlib import Path

import pytest

from verlsweep.common.patterns import INSTALLED, PATTERNS, Pattern, Source

# printf / str.format placeholders of a format string (C++ `%s %d %f`, Python `{name}`)
_PLACEHOLDER = re.compile(r"\{[^{}]*\}|%[-+ #0]*\d*(?:\.\d+)?l*[sdfu]")


def package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.submodule_search_locations, f"{name} is not installed"
    return Path(next(iter(spec.submodule_search_locations)))


def file_contains(path: Path, needle: bytes) -> bool:
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return data.find(needle) >= 0


def printed_form(fragment: str) -> re.Pattern[str]:
    """What a format string prints: its literal parts in order, anything in place of a placeholder."""
    return re.compile(".*?".join(re.escape(part) for part in _PLACEHOLDER.split(fragment)), re.S)


def proven(pattern: Pattern, source: Source) -> list[str]:
    """Why `source` does not back `pattern` (empty when it does)."""
    problems = []
    if source.installed:
        path = package_dir(source.package) / source.path
        if not path.is_file():
            return [f"{path} does not exist"]
        if not file_contains(path, source.fragment.encode()):
            problems.append(f"{source.fragment!r} is not in {path}")
    elif not (source.version and source.path):
        problems.append(f"upstream source {source.package} names no file/issue and version")
    if source.printed not in source.fragment:
        problems.append(f"{source.printed!r} is not part of {source.fragment!r}")
    if not printed_form(source.printed).search(source.example):
        problems.append(f"the example line {source.example!r} is not what {source.printed!r} prints")
    if not pattern.regex.search(source.example):
        problems.append(f"regex {pattern.regex.pattern!r} does not match {source.example!r}")
    return problems


ROWS = [(p, s) for p in PATTERNS for s in p.sources]


@pytest.mark.parametrize("pattern,source", ROWS, ids=[f"{p.label}-{s.package}-{i}" for i, (p, s) in enumerate(ROWS)])
def test_every_pattern_text_is_found_where_its_row_says_it_comes_from(pattern, source):
    assert proven(pattern, source) == []


def test_every_row_has_a_source_and_the_installed_packages_back_most_of_them():
    assert all(p.sources for p in PATTERNS)
    installed = {s.package for _, s in ROWS if s.installed}
    assert {"verl", "ray", "torch", "hydra", "omegaconf"} <= installed <= set(INSTALLED)


@pytest.mark.parametrize("label,edit", [
    # Ray 2.60 no longer prints the pre-2.10 text: a row pointing at it must fail
    ("host memory (ray memory monitor)",
     lambda s: dataclasses.replace(s, fragment="which exceeds the memory usage threshold")),
    ("verl device check", lambda s: dataclasses.replace(s, fragment=s.fragment.replace("desired", "requested"))),
])
def test_the_check_fails_when_a_text_no_longer_matches_its_package(label, edit):
    pattern = next(p for p in PATTERNS if p.label == label)
    assert proven(pattern, edit(pattern.sources[0]))


def test_the_check_fails_when_a_rows_regex_is_edited():
    pattern = next(p for p in PATTERNS if p.label == "verl device check")
    edited = dataclasses.replace(pattern, regex=re.compile(r"Total available NPUs \d+ is less than"))
    assert proven(edited, pattern.sources[0])
