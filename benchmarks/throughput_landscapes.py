"""Planner landscapes over the throughput space (sweeps/throughput.yaml), for
`benchmarks/search_efficiency.py --space throughput`.

Each is the second stage of a chained sweep: the same composed recipe and hidden calibration errors
as the memory-space planner landscape of that name (search_landscapes.PLANNER_BASES; the same seed
draws the same errors), started from the best config of that memory landscape's hidden truth (what
a finished memory sweep hands on with study.from_study: util, TP and offloads become fixed
overrides of every trial, verlsweep/study/chain.py). The space is the throughput file's params as the
sweeper reads them (composed with space=throughput, `${verlsweep.sp_choices:}` resolved for the
recipe's hardware x model); the recipe (trial 0) is the composed config's own values of them
(study.enqueue_recipe, verlsweep.study.enqueue.recipe).

Every config of the space is either refused before launch by the trial rules
(verlsweep.command.rules.check_rules, which the task runs before anything launches: outcome
config_error) or gets a hidden truth: the perturbed planner's verdict (search_landscapes.true_verdict).
"""
from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from search_landscapes import KNOBS, Landscape, all_configs, hidden_errors, planner_landscape, true_verdict
from search_landscapes import space as memory_space

from verlsweep.command.throughput_rules import CAPTURE_KEYS
from verlsweep.study import enqueue as _enqueue
from verlsweep.study import guide as _guide
from verlsweep.study import space as _space

SPACE_GROUP = "space=throughput"
# the capture sizes the resolver makes of throughput.max_capture_size, max_num_seqs and enforce_eager:
# configs with the same sizes are the same trial (e.g. every max_capture_size in eager mode)
_CAPTURE_KEY = CAPTURE_KEYS[1]
_CAPTURE_PARAM = "throughput.max_capture_size"


@contextlib.contextmanager
def _parse_once() -> Iterator[None]:
    """OmegaConf parses an interpolation's text on every read; thousands of configs read the same few
    dozen. A parse tree is only read by the resolver (omegaconf/base.py
    _resolve_interpolation_from_parse_tree), so one per text changes no value: it halves the build."""
    import omegaconf.base

    plain = omegaconf.base.parse
    omegaconf.base.parse = functools.lru_cache(maxsize=4096)(plain)
    try:
        yield
    finally:
        omegaconf.base.parse = plain


def memory_best(memory: Landscape) -> dict[str, object]:
    """The memory landscape's best config by its hidden truth: what the first stage hands on."""
    best = max((k for k, t in memory.truth.items() if t.tok_s is not None), key=lambda k: memory.truth[k].tok_s)
    return dict(zip(KNOBS, best))


def _space_lines(overrides: list[str], fixed: dict[str, object]) -> tuple[list[str], object]:
    """The sweep's param lines as the sweeper builds them for a chained sweep (the source's best params
    first, this sweep's own after: hydra_plugins/verlsweep_sweeper/_impl.py), and the composed config."""
    from verlsweep.command.compose import compose_config

    cfg = compose_config([*overrides, SPACE_GROUP], return_hydra_config=True)
    params = OmegaConf.to_container(cfg.hydra.sweeper.params, resolve=True)
    lines = [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in {**fixed, **params}.items()]
    return lines, cfg


def throughput_landscape(name: str, overrides: list[str], seed: int, tok_error: float = 0.2,
                         mem_error: float = 0.1) -> Landscape:
    with _parse_once():
        return _build(name, overrides, seed, tok_error, mem_error)


def _build(name: str, overrides: list[str], seed: int, tok_error: float, mem_error: float) -> Landscape:
    from verlsweep.command.compose import compose_config
    from verlsweep.command.rules import check_rules
    from verlsweep.plan import load_calibration
    from verlsweep.plan.predictor.inputs import from_cfg

    msp = memory_space()
    memory = planner_landscape(name, overrides, seed, msp, all_configs(msp), tok_error, mem_error)
    fixed = memory_best(memory)
    lines, hydra_cfg = _space_lines(overrides, fixed)
    sp = _space.parse(lines, OverridesParser.create())
    recipe = _enqueue.recipe(hydra_cfg, sp)
    if recipe is None:
        raise ValueError(f"{name}: the recipe's values of the throughput knobs lie outside the space")
    knobs = tuple(sp.distributions)

    cfg = compose_config([*overrides, SPACE_GROUP])
    for n, value in sp.fixed.items():   # every trial's overrides (the source's best, dynamic bsz), as the guide
        OmegaConf.update(cfg, n, yaml.safe_load(str(value)), force_add=True)      # sets them (guide.plan_inputs)
    cal = load_calibration(cfg)
    hidden, mem_factor, note = hidden_errors(cal, seed, tok_error, mem_error)
    truth, refused, params_list, inputs = {}, {}, [], []
    # one trial's signature -> (truth, or the keys the rules refuse, inputs)
    same: dict[tuple, tuple] = {}
    last: dict[str, object] = {}
    for p in all_configs(sp):
        shown = {n: sp.value(n, v) for n, v in p.items()}
        for n, value in shown.items():
            if n not in last or last[n] != value:     # the product order changes the last params most
                OmegaConf.update(cfg, n, value, force_add=True)
        last = shown
        sizes = OmegaConf.select(cfg, _CAPTURE_KEY, default=None)
        sig = (*(v for n, v in shown.items() if n != _CAPTURE_PARAM), repr(sizes))
        if sig not in same:
            inp = from_cfg(cfg)
            problems = check_rules(cfg)
            same[sig] = (tuple(pr.key for pr in problems) if problems else true_verdict(inp, hidden, mem_factor), inp)
        verdict, inp = same[sig]
        k = tuple(p[n] for n in knobs)
        if isinstance(verdict, tuple):
            refused[k] = verdict
        else:
            truth[k] = verdict
        params_list.append(p)
        inputs.append(inp)
    # the guide plans every config it samples, refused ones too (the rules run in the task, later)
    guide = _guide.Planned(cal, params_list, inputs)
    predictions = {tuple(pr.params[n] for n in knobs): pr for pr in _guide.predict(guide)}
    recipe_truth = truth.get(tuple(recipe[n] for n in knobs))
    land = Landscape(name, truth, predictions, guide=guide, mem_factor=mem_factor, space_lines=tuple(lines),
                     knobs=knobs, recipe=recipe, refused=refused)
    near = recipe_truth.tok_s / land.best if recipe_truth is not None and recipe_truth.tok_s else 0.0
    util, tp, *offloads = fixed.values()
    start = f"util {util}, TP {tp}, offload actor params/optimizer/ref params {'/'.join('yn'[not o] for o in offloads)}"
    land.note = (f"{note}; from memory best {start}; recipe at {near:.0%} of the best; "
                 f"{len(refused)} of {len(params_list)} configs refused by the rules")
    return land


def _check(land: Landscape) -> None:
    """What the benchmark relies on: the truth holds only configs the rules let launch."""
    assert not set(land.refused) & set(land.truth), "a refused config has a truth"
    print(f"{land.name}: {len(land.truth)} valid, {len(land.refused)} refused; {land.note}")


if __name__ == "__main__":       # a quick look: python benchmarks/throughput_landscapes.py
    from search_landscapes import PLANNER_BASES

    for n, (o, s) in PLANNER_BASES.items():
        _check(throughput_landscape(n, o, s))
