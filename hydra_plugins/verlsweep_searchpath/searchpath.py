"""Adds the search spaces and the user's own config dirs to verlsweep's config search path.

Hydra runs every installed SearchPathPlugin for every app (hydra/_internal/utils.py
create_config_search_path); this one changes only an app whose primary config dir holds verlsweep's
root config, so other Hydra apps and verl's own config (composed for validation) see nothing of it.
Entries go after the primary dir: a file there wins over one of the same name in an added dir.
"""
from __future__ import annotations

import os
from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from hydra_plugins.verlsweep_searchpath.space_source import SpaceConfigSource
from verlsweep import ROOT_CONFIG, SWEEPS_DIR
from verlsweep.common.names import CONFIG_PATH_ENV

PROVIDER = "verlsweep"


def _primary_dir(search_path: ConfigSearchPath) -> Path | None:
    """The app's own config dir (provider `main`) when it is a folder on disk."""
    for element in search_path.get_path():
        if element.provider == "main" and element.path is not None:
            scheme, sep, rest = element.path.partition("://")
            if not sep:
                return Path(element.path)
            return Path(rest) if scheme == "file" else None
    return None


class VerlSweepSearchPathPlugin(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        primary = _primary_dir(search_path)
        if primary is None or not (primary / f"{ROOT_CONFIG}.yaml").is_file():
            return
        if SWEEPS_DIR.is_dir():
            search_path.append(PROVIDER, f"{SpaceConfigSource.scheme()}://{SWEEPS_DIR}")
        for folder in os.environ.get(CONFIG_PATH_ENV, "").split(os.pathsep):
            if folder:
                search_path.append(f"{PROVIDER} ({CONFIG_PATH_ENV})", f"file://{Path(folder).expanduser().resolve()}")
