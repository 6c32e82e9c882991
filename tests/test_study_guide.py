"""The planner-guided start (verlsweep/study/guide.py): which configs it enqueues."""
from __future__ import annotations

from dataclasses import fields

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf, open_dict

from verlsweep.command.compose import compose_config
from verlsweep.plan import load_calibration
from verlsweep.plan.predictor.calibration import THROUGHPUT_CONSTANTS, Constants
from verlsweep.study import guide as _guide
from verlsweep.study import space as _space

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
P_OFF = "verl.actor_rollout_ref.actor.fsdp_config.param_offload"
O_OFF = "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload"
SPACE = [f"{UTIL}=range(0.30,0.95,0.05)", f"{TP}=choice(1,2,4,8)", f"{P_OFF}=choice(true,false)",
         f"{O_OFF}=choice(true,false)"]


def _space_of(lines: list[str]) -> _space.SearchSpace:
    return _space.parse(lines, OverridesParser.create())


def test_the_guide_enqueues_the_best_predicted_feasible_configs_one_per_tp_and_offload_combination():
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    sp = _space_of(SPACE)
    predictions = _guide.predict_all(cfg, sp, _guide.candidates(sp))
    assert len(predictions) == 14 * 4 * 2 * 2
    assert any(not p.feasible for p in predictions)            # the space has an OOM region to avoid

    picked = _guide.entries(cfg, sp, top_k=3, draws=0)     # the planner's own ranking
    assert len(picked) == 3
    by_params = {tuple(sorted(p.params.items())): p for p in predictions}
    chosen = [by_params[tuple(sorted(e.items()))] for e in picked]
    assert all(p.status == "ok" for p in chosen)
    best_ok = max(p.tok_s for p in predictions if p.status == "ok")
    assert chosen[0].tok_s == best_ok
    assert [p.tok_s for p in chosen] == sorted((p.tok_s for p in chosen), reverse=True)
    assert len({(e[TP], e[P_OFF], e[O_OFF]) for e in picked}) == 3   # not three utils of one combination


def test_a_fixed_override_of_the_sweep_is_part_of_what_the_planner_predicts():
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    config = [{UTIL: 0.6, TP: 2, P_OFF: True, O_OFF: True}]
    plain = _guide.predict_all(cfg, _space_of(SPACE), config)[0]
    longer = _guide.predict_all(cfg, _space_of([*SPACE, "verl.data.max_response_length=4096"]), config)[0]
    assert longer.tok_s != plain.tok_s


def test_without_a_planner_opinion_the_start_is_unguided():
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax",
                          "verl.actor_rollout_ref.rollout.name=sglang"])
    assert _guide.entries(cfg, _space_of(SPACE), top_k=3) == []


def test_top_k_zero_switches_the_guide_off():
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    assert _guide.entries(cfg, _space_of(SPACE), top_k=0) == []


def test_the_guide_also_enqueues_the_config_a_plausible_planner_error_puts_first():
    # ReMax on A2: the planner ranks TP 2 first and its nominal top 3 never leaves TP 2, but within its
    # +-20% throughput error a TP 1 config wins a share of the draws
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    sp = _space_of(SPACE)
    nominal = _guide.entries(cfg, sp, top_k=3, draws=0)
    drawn = _guide.entries(cfg, sp, top_k=3, draws=32, error=0.2)
    assert {e[TP] for e in nominal} == {2}
    assert drawn[0] == nominal[0]                               # the planner's best still runs first
    assert 1 in {e[TP] for e in drawn[1:] if e not in nominal}


def test_where_every_error_draw_agrees_the_guide_enqueues_one_config():
    cfg = compose_config(["hardware=h100_80g", "model=qwen3_8b", "algorithm=ppo"])
    sp = _space_of(SPACE)
    drawn = _guide.entries(cfg, sp, top_k=3, draws=32, error=0.2)
    assert drawn == _guide.entries(cfg, sp, top_k=1, draws=0)
    assert len(_guide.entries(cfg, sp, top_k=3, draws=0)) == 3


def test_the_sweeps_guide_settings_reach_the_guide():
    cfg = compose_config(["hardware=a3_64g", "model=qwen3_8b", "algorithm=grpo"])
    sp = _space_of(SPACE)
    with open_dict(cfg):
        cfg.study.guide = {"top_k": 3, "draws": 0, "error": 0.2}
    assert _guide.entries(cfg, sp, top_k=3) == _guide.entries(cfg, sp, top_k=3, draws=0)
    assert _guide.entries(cfg, sp, top_k=3) != _guide.entries(cfg, sp, top_k=3, draws=32)


def test_error_draws_scale_each_throughput_constant_within_the_error_and_leave_memory_alone():
    assert set(THROUGHPUT_CONSTANTS) <= {f.name for f in fields(Constants)}
    cal = load_calibration(compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"]))
    draws = _guide.error_draws(cal, 8, 0.2, seed=1)
    assert len(draws) == 8
    for drawn in draws:
        for f in fields(Constants):
            ratio = getattr(drawn.constants, f.name) / getattr(cal.constants, f.name)
            if f.name in THROUGHPUT_CONSTANTS:
                assert 0.8 <= ratio <= 1.2
            else:
                assert ratio == 1.0
    assert len({d.constants.decode_bw_efficiency for d in draws}) == 8


def test_a_group_option_given_on_the_command_line_needs_no_compose_and_every_config_is_ranked():
    # Hydra composes a multirun's plain overrides into the config the sweeper gets: hardware=a3_64g is
    # in it already, so the planner updates one config per candidate instead of composing 64 of them
    cfg = compose_config(["hardware=a3_64g", "model=qwen3_8b", "algorithm=grpo"])
    with open_dict(cfg):
        cfg.hydra = {"runtime": {"choices": {"hardware": "a3_64g", "model": "qwen3_8b", "algorithm": "grpo"}}}
    sp = _space_of([*SPACE, "hardware=a3_64g"])
    assert not _guide.needs_compose(cfg, sp)
    assert len(_guide.predict_all(cfg, sp, _guide.candidates(sp))) == 14 * 4 * 2 * 2
    composed = compose_config(["hardware=a3_64g", "model=qwen3_8b", "algorithm=grpo"])
    assert (_guide.entries(cfg, sp, top_k=3, draws=32)
            == _guide.entries(composed, _space_of(SPACE), top_k=3, draws=32))     # what composing ranks
    assert _guide.needs_compose(cfg, _space_of([*SPACE, "hardware=a2_64g"]))     # another option: compose


def test_the_guides_prior_gives_the_boundary_sampler_the_planners_tok_s_of_feasible_configs_only():
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    sp = _space_of(SPACE)
    entries, predictions = _guide.guide(cfg, sp, top_k=3, draws=0)
    prior = _guide.prior(predictions, sp)
    fits = next(p for p in predictions if p.feasible)
    fails = next(p for p in predictions if not p.feasible)
    # the sampler asks with raw Optuna floats (0.30 + 7 x 0.05 is not 0.65 exactly)
    raw = {**fits.params, UTIL: fits.params[UTIL] + 1e-12}
    assert prior(raw) == fits.tok_s
    assert prior(fails.params) is None
    assert entries == _guide.entries(cfg, sp, top_k=3, draws=0)


def test_the_guides_defaults_are_written_once_in_the_study_node():
    """study.guide's values are conf/study/default.yaml's alone: the guide reads them from the config, the
    typed node has no defaults of its own, and the sweeper's config no guide key."""
    from dataclasses import fields as dataclass_fields

    from hydra_plugins.verlsweep_sweeper.config import VerlSweepSweeperConf
    from verlsweep.config.study import GuideConfig

    cfg = compose_config([])
    assert (cfg.study.guide.draws, cfg.study.guide.error) == (32, 0.2)
    assert not hasattr(_guide, "DRAWS") and not hasattr(_guide, "ERROR")
    assert all(OmegaConf.is_missing(OmegaConf.structured(GuideConfig), f.name) for f in dataclass_fields(GuideConfig))
    assert "guide" not in {f.name for f in dataclass_fields(VerlSweepSweeperConf)}


def test_edge_probes_are_ranked_only_where_the_planner_predicts_nothing_to_fit():
    sp = _space_of([f"{UTIL}=choice(0.5,0.7,0.9)", f"{TP}=choice(1,2)"])

    def pred(util: float, tp: int, status: str, tok_s: float) -> _guide.Prediction:
        return _guide.Prediction({UTIL: util, TP: tp}, status, tok_s)

    edges = [pred(0.7, 1, "edge", 300.0), pred(0.9, 2, "edge", 500.0), pred(0.9, 1, "infeasible", 900.0)]
    # nothing predicted to fit: the best edge probes, never a vetoed config (verlsweep/plan/predictor/band.py)
    assert _guide.rank(edges, sp, top_k=3) == [{UTIL: 0.9, TP: 2}, {UTIL: 0.7, TP: 1}]
    assert _guide.prior(edges, sp)({UTIL: 0.9, TP: 2}) == 500.0
    with_fit = [*edges, pred(0.5, 1, "ok", 100.0)]
    assert _guide.rank(with_fit, sp, top_k=3) == [{UTIL: 0.5, TP: 1}]     # a fit outranks every edge probe
    assert _guide.prior(with_fit, sp)({UTIL: 0.9, TP: 2}) is None


def test_each_candidates_inputs_are_those_of_its_own_composed_config_interpolations_included():
    # PPO's critic offload flags interpolate the actor's, and the log-prob token budgets interpolate
    # ppo_max_token_len_per_gpu (conf/algorithm/ppo.yaml, conf/verl/default.yaml): the guide resolves the
    # config once, so a value that follows a swept key must be resolved again for each candidate
    from verlsweep.plan import from_cfg

    max_tok = "verl.actor_rollout_ref.actor.ppo_max_token_len_per_gpu"
    lines = [f"{UTIL}=choice(0.5,0.8)", f"{P_OFF}=choice(true,false)", f"{max_tok}=choice(8192,24576)"]
    base = ["hardware=a2_64g", "model=qwen3_8b", "algorithm=ppo"]
    sp = _space_of(lines)
    params = _guide.candidates(sp)
    planned = _guide.plan_inputs(compose_config(base), sp, params)
    for p, inp in zip(params, planned.inputs):
        assert inp == from_cfg(compose_config([*base, *sp.overrides(p)])), p
    assert len({(i.critic.param_offload, i.actor.forward_max_token_len) for i in planned.inputs}) == 4


def test_an_error_draws_tokens_per_s_is_what_the_whole_planner_predicts_under_that_calibration():
    from verlsweep.plan import predict
    from verlsweep.plan.predictor.verdict import tok_s_under

    cfg = compose_config(["hardware=a3_64g", "model=qwen3_8b", "algorithm=grpo"])
    sp = _space_of(SPACE)
    planned = _guide.plan_inputs(cfg, sp, _guide.candidates(sp)[::17])
    for drawn in _guide.error_draws(planned.calibration, 3, 0.2, seed=1):
        for inp in planned.inputs:
            assert tok_s_under(inp, predict(inp, planned.calibration), drawn) == predict(inp, drawn).tok_s


def test_a_repeated_guide_reads_its_predictions_back_and_another_input_predicts_anew(tmp_path, monkeypatch):
    monkeypatch.setenv("VERLSWEEP_CACHE", str(tmp_path))
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    sp, longer = _space_of(SPACE), _space_of([*SPACE, "verl.data.max_response_length=4096"])
    fresh = _guide.predict_all(cfg, sp, _guide.candidates(sp), draws=8, error=0.2)
    (entry,) = (tmp_path / "guide").glob("predictions-*.json")
    assert any(p.p_best for p in fresh)

    def predicted_again(*args):
        raise AssertionError("predicted again")
    monkeypatch.setattr(_guide, "predict", predicted_again)
    assert _guide.predict_all(cfg, sp, _guide.candidates(sp), draws=8, error=0.2) == fresh     # the kept ones
    # another seed of the draws, another planner input (a longer response), a damaged entry: predicted anew
    with pytest.raises(AssertionError, match="predicted again"):
        _guide.predict_all(cfg, sp, _guide.candidates(sp), draws=8, error=0.2, seed=1)
    with pytest.raises(AssertionError, match="predicted again"):
        _guide.predict_all(cfg, longer, _guide.candidates(sp), draws=8, error=0.2)
    entry.write_text("[")
    with pytest.raises(AssertionError, match="predicted again"):
        _guide.predict_all(cfg, sp, _guide.candidates(sp), draws=8, error=0.2)
