"""A sweep started from another one's best config (`study.from_study`): the second stage of a
two-stage search, e.g. the throughput knobs (sweeps/throughput.yaml) once the memory knobs fit
(sweeps/rollout_memory.yaml).

The source is a study name in the sweep's storage or the path of a sweep's best.yaml. Its best trial's
params become plain overrides of every trial, ahead of the space's own params and the command line, so
they stay fixed unless this sweep sweeps or sets the same key. The link is kept with the study (user
attr FROM_STUDY_ATTR), on its MLflow parent run (tags under TAG_PREFIX) and in the report
(verlsweep.report.html.chained_text).
"""
from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from verlsweep.command.overrides import format_value
from verlsweep.common.errors import Problem
from verlsweep.common.names import FROM_STUDY_ATTR
from verlsweep.study.space import SearchSpaceError

log = logging.getLogger(__name__)

KEY = "study.from_study"
TAG_PREFIX = "sweep.from_study"
CONTINUED_BY_TAG = "sweep.continued_by"     # on the source's parent run: the chained sweep's parent run


@dataclass(frozen=True)
class Link:
    """Where a chained sweep starts: the source as given, its study and best trial, and the params taken."""

    source: str
    study_name: str
    trial_number: int | None
    params: dict[str, Any] = field(default_factory=dict)

    def overrides(self) -> dict[str, str]:
        """{key: value in override grammar} for the sweep's params."""
        return {k: format_value(v) for k, v in self.params.items()}

    def to_attr(self) -> dict[str, Any]:
        return asdict(self)

    def tags(self) -> dict[str, str]:
        return {TAG_PREFIX: self.study_name, f"{TAG_PREFIX}.trial": str(self.trial_number),
                f"{TAG_PREFIX}.source": self.source}


def _rounded(value: Any) -> Any:
    # a float step's value as the source's command line had it (0.7, not 0.7000000000000001)
    return round(value, 9) if isinstance(value, float) else value


def _from_best_yaml(path: Path) -> Link:
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise SearchSpaceError([Problem(KEY, str(path), f"a readable best.yaml ({exc})")]) from None
    entry = doc
    if doc.get("pareto_front"):
        entry = next((e for e in doc["pareto_front"] if e.get("trial_number") == doc.get("launch_trial")),
                     doc["pareto_front"][0])
    if not isinstance(entry.get("params"), dict) or not entry["params"]:
        raise SearchSpaceError([Problem(KEY, str(path), "a best.yaml with a best trial (this one has none yet: "
                                                        f"{doc.get('note', 'no params')})")])
    return Link(str(path), str(doc.get("study_name")), entry.get("trial_number"),
                {k: _rounded(v) for k, v in entry["params"].items()})


def _from_storage(name: str, storage_url: str | None) -> Link:
    import optuna

    from verlsweep.reconcile.budget import quiet_optuna
    from verlsweep.study.outputs import best_trials
    from verlsweep.study_link import open_storage

    if not storage_url:
        raise SearchSpaceError([Problem(KEY, name, "a best.yaml path, or a study name with hydra.sweeper.storage set")])
    storage = open_storage(storage_url)
    try:
        with quiet_optuna():
            study = optuna.load_study(study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler())
    except KeyError:
        names = sorted(optuna.get_all_study_names(storage=storage))
        raise SearchSpaceError([Problem(KEY, name, f"a study in {storage_url} ({', '.join(names) or 'none there'}) "
                                                   "or the path of a best.yaml")]) from None
    best = best_trials(study)
    if not best:
        raise SearchSpaceError([Problem(KEY, name, "a study with a completed feasible trial")])
    return Link(name, name, best[0].number, {k: _rounded(v) for k, v in best[0].params.items()})


def resolve(source: str, storage_url: str | None, cwd: Path) -> Link:
    """The Link of `source`: a best.yaml (a path that exists, or ends in .yaml) or a study name."""
    path = Path(source) if Path(source).is_absolute() else cwd / source
    if path.is_file() or source.endswith((".yaml", ".yml")):
        return _from_best_yaml(path)
    return _from_storage(source, storage_url)


def record(study: Any, link: dict[str, Any] | None, parent_run_id: str | None, config: Any) -> None:
    """Keep the link with the study and, when tracked, on its MLflow parent run."""
    if not link:
        return
    study.set_user_attr(FROM_STUDY_ATTR, link)
    if parent_run_id:
        from verlsweep.tracking import store

        try:
            client = store.client_for(store.tracking_uri(config))
            tags = Link(**link).tags()
            source = _source_run(client, store, config, tags[TAG_PREFIX])
            if source is not None:      # the stages link to each other, both ways
                tags[f"{TAG_PREFIX}.run_id"] = source
                client.set_tag(source, CONTINUED_BY_TAG, parent_run_id)
            for key, value in tags.items():
                client.set_tag(parent_run_id, key, value)
        except Exception as exc:  # noqa: BLE001 - the study keeps the link either way
            log.warning("verlsweep: could not tag parent run %s with %s: %s", parent_run_id, TAG_PREFIX, exc)


def _source_run(client: Any, store: Any, config: Any, study_name: str) -> str | None:
    """The parent run of the source study in the same store (its experiment as this config names it)."""
    from verlsweep.tracking import study_runs

    exp = study_runs.experiment_id(client, store.experiment_name(config, study_name))
    found = study_runs.parents(client, exp, study_name) if exp is not None else []
    return found[0].info.run_id if found else None
