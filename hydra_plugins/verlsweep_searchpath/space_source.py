"""A folder of YAML files seen as one config group: sweeps/*.yaml as `space/*`.

The search spaces live in the top-level sweeps/ (where the docs point users), not under conf/. A search
path entry is the root of a config tree, so sweeps/ itself would hold its files as top-level configs;
this source puts them one level down, under the group name, and holds nothing else. It wraps Hydra's
own FileConfigSource (hydra/_internal/core_plugins/file_config_source.py) for reading the files.
"""
from __future__ import annotations

import builtins

from hydra._internal.core_plugins.file_config_source import FileConfigSource
from hydra.core.object_type import ObjectType
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource

GROUP = "space"


class SpaceConfigSource(ConfigSource):
    """`verlsweep-space://<dir>`: group `space` with one option per `<dir>/<name>.yaml`."""

    def __init__(self, provider: str, path: str) -> None:
        super().__init__(provider=provider, path=path)
        self._files = FileConfigSource(provider=provider, path=f"file://{self.path}")

    @staticmethod
    def scheme() -> str:
        return "verlsweep-space"

    @staticmethod
    def _inside(config_path: str) -> str | None:
        """The path inside the folder for a path under the group (`space/smoke` -> `smoke`); None outside it."""
        if config_path == GROUP:
            return ""
        if config_path.startswith(f"{GROUP}/"):
            return config_path[len(GROUP) + 1:]
        return None

    def load_config(self, config_path: str) -> ConfigResult:
        inside = self._inside(config_path)
        if not inside:
            raise ConfigLoadError(f"Config not found : {config_path} (this source holds group {GROUP} only)")
        result = self._files.load_config(inside)
        result.path = self.full_path()
        return result

    def available(self) -> bool:
        return self._files.available()

    def is_group(self, config_path: str) -> bool:
        inside = self._inside(config_path)
        return config_path == "" or (inside is not None and self._files.is_group(inside))

    def is_config(self, config_path: str) -> bool:
        inside = self._inside(config_path)
        return inside is not None and inside != "" and self._files.is_config(inside)

    def list(self, config_path: str, results_filter: ObjectType | None) -> builtins.list[str]:
        if config_path == "":
            return [GROUP] if results_filter in (None, ObjectType.GROUP) else []
        inside = self._inside(config_path)
        return [] if inside is None else self._files.list(inside, results_filter)
