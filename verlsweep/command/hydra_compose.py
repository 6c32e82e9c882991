"""Hydra's compose API, usable from inside a running Hydra app.

Both our own conf/ (planner CLI, tests, best-config export) and verl's ppo_trainer config (validation)
are composed this way. Hydra allows one GlobalHydra per process; sweep.py already holds it, so the
compose runs against a fresh one and the app's is put back afterwards.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig


@contextlib.contextmanager
def _own_global_hydra() -> Iterator[None]:
    gh = GlobalHydra.instance()
    saved = gh.hydra if gh.is_initialized() else None
    gh.clear()
    try:
        yield
    finally:
        GlobalHydra.instance().clear()
        if saved is not None:
            GlobalHydra.instance().initialize(saved)


def compose_dir(config_dir: Path, config_name: str, overrides: list[str],
                return_hydra_config: bool = False) -> DictConfig:
    """Compose `config_name` from `config_dir` with `overrides` (Hydra's errors propagate)."""
    with _own_global_hydra(), initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(config_name=config_name, overrides=list(overrides),
                       return_hydra_config=return_hydra_config)
