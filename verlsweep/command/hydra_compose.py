"""Hydra's compose API, usable from inside a running Hydra app.

Both our own conf/ (planner CLI, tests, best-config export) and verl's ppo_trainer config (validation)
are composed this way. Hydra allows one GlobalHydra per process; sweep.py already holds it, so the
compose runs against a fresh one and the app's is put back afterwards.
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.object_type import ObjectType
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


def group_options(config_dir: Path, config_name: str, overrides: list[str] | None = None) -> dict[str, list[str]]:
    """Config group -> its options, as Hydra's search path for `config_dir` shows them: its own folders,
    what the installed SearchPathPlugins add (the search spaces, the user's config dirs) and the
    `hydra.searchpath` among `overrides` (read from `config_name` too, so only then is it loaded). Hydra's
    own groups (`hydra/...`) are left out; its warnings wait for the compose that follows."""
    with _own_global_hydra(), initialize_config_dir(config_dir=str(config_dir), version_base=None), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = GlobalHydra.instance().config_loader()

        def options(group: str, kind: ObjectType) -> list[str]:
            return loader.get_group_options(group, results_filter=kind, config_name=config_name if overrides else None,
                                            overrides=list(overrides or []))

        return {g: options(g, ObjectType.CONFIG) for g in options("", ObjectType.GROUP) if g != "hydra"}
