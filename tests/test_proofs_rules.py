"""verlsweep.proofs.rules: what one trial proves about the configs not tried (one test per rule)."""
from __future__ import annotations

import itertools

from verlsweep.proofs.rules import KNOBS, OFFLOADS, PRIORS, RULES, TP, UTIL, Observed, decide, infer

UTILS = [round(0.30 + 0.05 * i, 2) for i in range(14)]


def cfg(util: float, tp: int = 2, actor: bool = True, opt: bool = True, ref: bool = True) -> dict:
    return {UTIL: util, TP: tp, OFFLOADS[0]: actor, OFFLOADS[1]: opt, OFFLOADS[2]: ref}


def test_every_rule_cites_a_source_and_every_prior_says_why():
    assert all(r.source and r.verdict in ("fail", "fit") for r in RULES)
    assert all(name and why for name, why in PRIORS)


def test_a_vllm_start_oom_at_util_080_rules_out_higher_utils_and_fewer_offloads_only():
    oom = Observed(3, cfg(0.8), "oom", "vllm_start")
    for u in (0.8, 0.85, 0.9, 0.95):
        d = decide([oom], cfg(u))
        assert (d.verdict, d.trial) == ("fail", 3) and "vllm start" in d.rule
    assert decide([oom], cfg(0.8, opt=False)).verdict == "fail"           # fewer offloads
    assert decide([oom], cfg(0.75)).verdict == "unknown"                   # lower util
    assert decide([oom], cfg(0.9, tp=4)).verdict == "unknown"              # another TP
    assert decide([oom], cfg(0.8, actor=True, opt=True, ref=True)).verdict == "fail"
    more = Observed(4, cfg(0.8, opt=False), "oom", "vllm_start")
    assert decide([more], cfg(0.8)).verdict == "unknown"                   # more offloads may fit


def test_a_training_oom_rules_out_every_util_of_its_combination_and_fewer_offloads():
    oom = Observed(5, cfg(0.5, actor=False), "oom", "training")
    assert all(decide([oom], cfg(u, actor=False)).verdict == "fail" for u in UTILS)
    assert decide([oom], cfg(0.3, actor=False, ref=False)).verdict == "fail"
    assert decide([oom], cfg(0.3, actor=True)).verdict == "unknown"
    assert decide([oom], cfg(0.3, tp=8, actor=False)).verdict == "unknown"


def test_a_kv_cache_too_small_rules_out_every_lower_util_only():
    oom = Observed(2, cfg(0.4), "oom", "kv_cache")
    assert [decide([oom], cfg(u)).verdict for u in (0.3, 0.35, 0.4, 0.45)] == ["fail", "fail", "fail", "unknown"]


def test_a_fit_proves_the_same_util_with_more_offloads_and_nothing_higher():
    fit = Observed(1, cfg(0.6, actor=False, opt=False), "completed")
    d = decide([fit], cfg(0.6, actor=True, opt=False))
    assert (d.verdict, d.trial) == ("fit", 1)
    assert decide([fit], cfg(0.65, actor=False, opt=False)).verdict == "unknown"
    assert decide([fit], cfg(0.6, actor=False, opt=False, ref=False)).verdict == "unknown"


def test_an_oom_of_unknown_phase_and_other_failures_prove_nothing():
    assert decide([Observed(1, cfg(0.5), "oom", None), Observed(2, cfg(0.5), "crash")], cfg(0.9)).verdict == "unknown"


def test_proofs_gives_one_verdict_per_config_and_names_the_earliest_trial():
    space = [dict(zip(KNOBS, c)) for c in itertools.product(UTILS, (1, 2), *([(True, False)] * 3))]
    trials = [Observed(7, cfg(0.8), "oom", "vllm_start"), Observed(2, cfg(0.7), "oom", "vllm_start")]
    out = infer(trials, space)
    assert len(out) == len(space)
    assert str(decide(trials, cfg(0.9))).startswith("proven fail by trial 2")
