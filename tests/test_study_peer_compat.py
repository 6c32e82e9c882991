"""Other Hydra apps than ours, and hydra-optuna-sweeper's config language (verlsweep.study.hooks and
peer_compat; in-process, fast). Whole sweeps of the peer's apps: tests/e2e/test_peer_apps.py."""
from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
import yaml
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from hydra_plugins.verlsweep_sweeper.config import BoundarySamplerConfig, CmaEsSamplerConfig, NSGAIISamplerConfig
from verlsweep import CONF_DIR
from verlsweep.command import config_store
from verlsweep.command.hydra_compose import compose_dir
from verlsweep.config.study import study_config
from verlsweep.reconcile.results import Told
from verlsweep.study import hooks, peer_compat, verl_hooks
from verlsweep.study import space as _space
from verlsweep.study.space import SearchSpaceError

APP = hooks.AppHooks(OmegaConf.create({"x": 1}), Path("sweep"))     # any Hydra app's


def parse(*lines: str) -> _space.SearchSpace:
    return _space.parse(list(lines), OverridesParser.create())


def test_our_root_config_is_our_own_task_and_an_app_with_a_trial_key_is_not():
    config_store.register()
    assert hooks.is_own_task(compose_dir(CONF_DIR, "sweep", [], return_hydra_config=True))
    other = OmegaConf.create({"x": 1, "trial": {"number": 3}, "tracking": {"enabled": True},
                              "hydra": {"job": {"name": "sphere"}}})
    assert not hooks.is_own_task(other)
    assert hooks.AppHooks(other, Path("sweep")).study_name(parse("x=range(1,3)")).startswith("sphere.")


@pytest.mark.parametrize("line, dist", [
    ("x=range(1,3)", IntDistribution(1, 3)),
    ("x=range(-5.5, 5.5, step=0.5)", FloatDistribution(-5.5, 5.5, step=0.5)),
    ("x=range(0, 5, step=2)", IntDistribution(0, 4, step=2)),   # 5 is off the steps
    ("x=shuffle(range(1,3))", CategoricalDistribution([1, 2, 3])),
])
def test_range_includes_its_stop_for_every_app_as_hydra_optuna_sweeper_reads_it(line, dist):
    got = parse(line).distributions["x"]
    assert (sorted(got.choices) == sorted(dist.choices)) if isinstance(dist, CategoricalDistribution) else got == dist


def test_the_deprecated_search_space_becomes_distributions_with_a_deprecation_line(caplog):
    legacy = OmegaConf.create({"x": {"type": "float", "low": -5.5, "high": 5.5, "step": 0.5},
                               "n": {"type": "int", "low": 1, "high": 100, "log": True},
                               "c": {"type": "categorical", "choices": ["a", "b"]}})
    with caplog.at_level(logging.WARNING):
        got = peer_compat.legacy_search_space(legacy, None)
    assert got == {"x": FloatDistribution(-5.5, 5.5, step=0.5), "n": IntDistribution(1, 100, log=True),
                   "c": CategoricalDistribution(["a", "b"])}
    assert "DeprecationWarning" in caplog.text and "hydra.sweeper.params" in caplog.text
    space = parse("x=0", "c=choice(a)")
    peer_compat.add_legacy(space, got)            # params and the command line win
    assert set(space.distributions) == {"c", "n"} and space.fixed == {"x": "0"}


def test_search_space_beside_params_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert peer_compat.legacy_search_space(OmegaConf.create({"x": {"type": "int", "low": 0, "high": 1}}),
                                               OmegaConf.create({})) == {}
    assert "ignores search_space" in caplog.text


def test_a_bad_search_space_entry_says_what_to_write():
    with pytest.raises(SearchSpaceError, match=r"hydra.sweeper.search_space.x.*hydra.sweeper.params"):
        peer_compat.legacy_search_space(OmegaConf.create({"x": {"type": "float", "low": 0}}), None)


def test_other_apps_get_tpe_for_our_boundary_sampler_and_nsga_iis_own_population():
    boundary = OmegaConf.structured(BoundarySamplerConfig(seed=7))
    assert hooks.sampler_config(boundary, verl_hooks.OWN_POPULATION) == OmegaConf.to_container(boundary)
    inner = hooks.AppHooks.sampler(APP, boundary)
    assert inner["_target_"] == "optuna.samplers.TPESampler" and inner["seed"] == 7
    nsga = OmegaConf.structured(NSGAIISamplerConfig)
    assert hooks.AppHooks.sampler(APP, nsga)["population_size"] == 50
    assert hooks.sampler_config(nsga, verl_hooks.OWN_POPULATION)["population_size"] == 10


def test_cmaes_without_its_package_is_refused_naming_the_extra(monkeypatch):
    monkeypatch.setattr(hooks.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SearchSpaceError, match=r"verlsweep\[cmaes\]"):
        hooks.AppHooks.sampler(APP, OmegaConf.structured(CmaEsSamplerConfig))


def test_a_returned_tuple_needs_no_objectives_for_other_apps_but_ours_must_name_them():
    assert hooks.AppHooks.objectives(APP, ["minimize", "minimize"]) == ["objective", "value_1"]
    config_store.register()
    ours = SimpleNamespace(settings=study_config(compose_dir(CONF_DIR, "sweep", [])))
    assert verl_hooks.VerlHooks.objectives(ours, ["maximize", "minimize"]) == ["objective"]
    ours = SimpleNamespace(settings=study_config(compose_dir(CONF_DIR, "sweep", ["study.objectives=[objective]"])))
    assert verl_hooks.VerlHooks.objectives(ours, ["maximize"]) == ["objective"]


def test_max_failure_rate_is_the_share_of_failed_trials_in_a_batch():
    ok, bad = (Told(0, "completed", optuna.trial.TrialState.COMPLETE, [1.0]),
               Told(1, "crash", optuna.trial.TrialState.FAIL, None))
    assert peer_compat.failure_rate_exceeded([ok, bad], 0.0)
    assert not peer_compat.failure_rate_exceeded([ok, bad], 0.5)
    assert not peer_compat.failure_rate_exceeded([bad, bad], 1.0)
    assert peer_compat.check_rate(1.5)[0].key == "hydra.sweeper.max_failure_rate"


def test_optimization_results_has_the_peers_schema_for_one_and_for_two_objectives(tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    single = optuna.create_study()
    single.add_trial(optuna.trial.create_trial(params={"x": 1.0}, distributions={"x": FloatDistribution(0, 2)},
                                               value=1.0))
    peer_compat.write_results(single, single.best_trials, tmp_path, lambda k, v: v)
    assert yaml.safe_load((tmp_path / "optimization_results.yaml").read_text()) == {
        "name": "optuna", "best_params": {"x": 1.0}, "best_value": 1.0}
    multi = optuna.create_study(directions=["minimize", "minimize"])
    multi.add_trial(optuna.trial.create_trial(params={"x": 1.0}, distributions={"x": FloatDistribution(0, 2)},
                                              values=[1.0, 2.0]))
    peer_compat.write_results(multi, multi.best_trials, tmp_path, lambda k, v: v)
    assert yaml.safe_load((tmp_path / "optimization_results.yaml").read_text()) == {
        "name": "optuna", "solutions": [{"params": {"x": 1.0}, "values": [1.0, 2.0]}]}


def test_the_cmaes_group_builds_optunas_cma_es_sampler_when_its_package_is_there():
    pytest.importorskip("cmaes")
    from verlsweep.study.create import build_sampler

    cfg = hooks.AppHooks.sampler(APP, OmegaConf.structured(CmaEsSamplerConfig(seed=1)))
    assert isinstance(build_sampler(cfg, parse("x=interval(0, 1)")), optuna.samplers.CmaEsSampler)


def test_the_peers_tpe_keys_reach_optunas_tpe_sampler():
    from hydra_plugins.verlsweep_sweeper.config import MOTPESamplerConfig, TPESamplerConfig
    from verlsweep.study.create import build_sampler

    # hydra-optuna-sweeper 1.3's tpe group with every key set (its TPESamplerConfig)
    peer = {"seed": 123, "consider_prior": True, "prior_weight": 2.0, "consider_magic_clip": False,
            "consider_endpoints": True, "n_startup_trials": 10, "n_ei_candidates": 24, "multivariate": False,
            "warn_independent_sampling": False}
    for node in (TPESamplerConfig, MOTPESamplerConfig):
        cfg = OmegaConf.merge(OmegaConf.structured(node), {k: v for k, v in peer.items() if hasattr(node, k)})
        with pytest.warns(FutureWarning, match="consider_prior"):   # Optuna's own deprecation, passed on
            sampler = build_sampler(hooks.AppHooks.sampler(APP, cfg), parse("x=interval(0, 1)"))
        estimator = sampler._parzen_estimator_parameters
        assert (estimator.prior_weight, estimator.consider_magic_clip,
                estimator.consider_endpoints) == (2.0, False, True)
