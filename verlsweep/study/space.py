"""Search space: Hydra's sweep grammar -> Optuna distributions, checked before the first trial.

Grammar as in Hydra's override parser (hydra/core/override_parser/types.py), mapped the way
hydra-optuna-sweeper maps it (its _impl.py create_optuna_distribution_from_override), except:
- `range(start, stop, step)` includes stop where the steps land on it, for every app: hydra-optuna-sweeper
  reads it so (Int/FloatDistribution(start, stop, step)), and so does `shuffle(range(...))` here (the
  peer's shuffle keeps Hydra's exclusive stop): `range(0.30,0.95,0.05)` is 0.30, 0.35, ..., 0.95;
- values of float ranges are rounded to the step's decimals (no 0.7000000000000001 in a command);
- every mistake is reported up front, naming the param.

    choice(a,b,c) / a,b,c      -> CategoricalDistribution
    range(start,stop[,step])   -> IntDistribution / FloatDistribution(step)   (shuffle(range) -> categorical)
    interval(lo,hi)            -> FloatDistribution; int(interval(lo,hi)) -> IntDistribution
    tag(log, interval(lo,hi))  -> log=True
    anything else              -> a fixed override passed to every trial
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, cast

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import IntervalSweep, Override, RangeSweep, Transformer, ValueType
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from verlsweep.command.overrides import flatten, format_value
from verlsweep.command.suggest import did_you_mean
from verlsweep.common.distributions import decimals_of, discrete_values
from verlsweep.common.errors import Problem

PARAMS_KEY = "hydra.sweeper.params"
# Values of a discrete param checked one by one against our rules; beyond this only the endpoints.
_MAX_PROBES = 256


class SearchSpaceError(ValueError):
    """The search space cannot be run; raised before any trial exists."""

    def __init__(self, problems: list[Problem]):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid sweep ({PARAMS_KEY}, hydra.sweeper.* or sweep overrides), nothing "
                         f"started:\n{lines}")


@dataclass
class SearchSpace:
    distributions: dict[str, BaseDistribution] = field(default_factory=dict)
    fixed: dict[str, str] = field(default_factory=dict)       # key element -> value in override grammar
    decimals: dict[str, int] = field(default_factory=dict)    # float-step params: digits to round to

    def value(self, name: str, value: Any) -> Any:
        """A sampled value as it goes into the command line (float steps rounded)."""
        if name in self.decimals and isinstance(value, float):
            return round(value, self.decimals[name])
        return value

    def overrides(self, params: dict[str, Any]) -> list[str]:
        """Fixed overrides first, then the trial's params; fixed keys win (upstream's rule)."""
        out = [f"{k}={v}" for k, v in self.fixed.items()]
        out += [f"{k}={format_value(self.value(k, v))}" for k, v in params.items() if k not in self.fixed]
        return out

    def grid(self) -> dict[str, list[Any]]:
        """Every param's values, for the grid sampler (discrete params only)."""
        grid: dict[str, list[Any]] = {}
        problems = []
        for name, dist in self.distributions.items():
            values = discrete_values(dist, self.decimals.get(name))
            if values is None:
                problems.append(Problem(f"{PARAMS_KEY}.{name}", describe(dist),
                                        "discrete values for the grid sampler: choice(...) or range(...)"))
            else:
                grid[name] = values
        if problems:
            raise SearchSpaceError(problems)
        return grid

    def size(self) -> int | None:
        """Number of distinct configurations, None when a param is continuous."""
        n = 1
        for name, dist in self.distributions.items():
            values = discrete_values(dist, self.decimals.get(name))
            if values is None:
                return None
            n *= len(values)
        return n

    def describe(self) -> dict[str, str]:
        return {**{k: describe(d) for k, d in self.distributions.items()}, **dict(self.fixed)}


def describe(dist: BaseDistribution) -> str:
    if isinstance(dist, CategoricalDistribution):
        return "choice(" + ",".join(format_value(c) for c in dist.choices) + ")"
    if isinstance(dist, (IntDistribution, FloatDistribution)):
        if dist.step is not None and not dist.log:
            return f"range({dist.low},{dist.high},step={dist.step}) inclusive"
        return f"{'tag(log, ' if dist.log else ''}interval({dist.low},{dist.high}){')' if dist.log else ''}"
    return repr(dist)


def numeric(dist: BaseDistribution) -> bool:
    """Numbers on an axis: an int or float range, or a choice of numbers only (not of flags)."""
    if isinstance(dist, (IntDistribution, FloatDistribution)):
        return True
    choices = getattr(dist, "choices", ())
    return bool(choices) and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in choices)


def _with_stop(start: Any, stop: Any, step: Any, values: list[Any]) -> list[Any]:
    """`values` of Hydra's range(start, stop, step) plus `stop` itself when the steps land on it
    (hydra-optuna-sweeper's reading: its _impl.py builds Int/FloatDistribution(start, stop, step))."""
    n = round((stop - start) / step) if step else -1
    if n >= 0 and abs(start + n * step - stop) <= 1e-9 * max(1.0, abs(stop)) and stop not in values:
        return [*values, stop]
    return values


def _values(override: Override) -> list[Any]:
    """A choice's values, or a range's with its stop (`_with_stop`)."""
    values = list(override.sweep_iterator(transformer=Transformer.identity))
    if override.is_range_sweep():
        rng = cast(RangeSweep, override.value())
        values = _with_stop(rng.start, rng.stop, rng.step, values)
    return values


def _distribution(name: str, override: Override) -> BaseDistribution:
    """One sweep override -> distribution; raises SearchSpaceError naming `name`."""
    key = f"{PARAMS_KEY}.{name}"
    if override.is_choice_sweep() or (override.is_range_sweep() and cast(RangeSweep, override.value()).shuffle):
        choices = _values(override)
        bad = [c for c in choices if not isinstance(c, (str, int, float, bool, type(None)))]
        if bad:
            raise SearchSpaceError([Problem(key, bad[0], "choices of str, int, float, bool or null")])
        if not choices:
            raise SearchSpaceError([Problem(key, override.input_line, "at least one choice")])
        if len(set(map(repr, choices))) != len(choices):
            raise SearchSpaceError([Problem(key, choices, "distinct choices")])
        return CategoricalDistribution(choices)
    if override.is_range_sweep():
        rng = cast(RangeSweep, override.value())
        values = _values(override)
        if not values:
            raise SearchSpaceError([Problem(key, override.input_line, "a non-empty range(start, stop, step) "
                                            "(stop included where the steps land on it)")])
        step = abs(rng.step)
        if all(isinstance(v, int) for v in (rng.start, rng.stop, rng.step)):
            return IntDistribution(min(values), max(values), step=int(step))
        assert rng.start is not None      # the grammar's range() always has a start
        decimals = decimals_of(rng.start, rng.step)
        values = [round(v, decimals) for v in values]
        return FloatDistribution(min(values), max(values), step=round(float(step), decimals))
    if override.is_interval_sweep():
        iv = cast(IntervalSweep, override.value())
        assert iv.start is not None and iv.end is not None   # the grammar's interval() has both
        if iv.start > iv.end:
            raise SearchSpaceError([Problem(key, override.input_line, f"interval(low, high) with low <= high "
                                                                       f"(got low={iv.start} > high={iv.end})")])
        log = "log" in iv.tags
        if log and iv.start <= 0:
            raise SearchSpaceError([Problem(key, override.input_line, "a log interval with low > 0")])
        if isinstance(iv.start, int) and isinstance(iv.end, int):
            return IntDistribution(iv.start, iv.end, log=log)
        return FloatDistribution(float(iv.start), float(iv.end), log=log)
    raise SearchSpaceError([Problem(key, override.input_line,
                                    "choice(...), range(...), interval(...) or tag(log, interval(...))")])


def parse(params_conf: list[str], parser: OverridesParser) -> SearchSpace:
    """`key=value` strings (sweep params, then command-line overrides) -> SearchSpace.

    A later override of the same key wins (the command line over the sweep file).
    """
    space = SearchSpace()
    problems: list[Problem] = []
    for line in params_conf:
        name = line.split("=", 1)[0].strip()
        try:
            override = parser.parse_override(line)
        except HydraException as exc:
            problems.append(Problem(f"{PARAMS_KEY}.{name}", line.split("=", 1)[-1], f"valid sweep grammar ({exc})"))
            continue
        name = override.get_key_element()
        space.distributions.pop(name, None)
        space.fixed.pop(name, None)
        space.decimals.pop(name, None)
        if not override.is_sweep_override():
            space.fixed[name] = override.get_value_element_as_str()
            continue
        if override.value_type == ValueType.GLOB_CHOICE_SWEEP:
            problems.append(Problem(f"{PARAMS_KEY}.{name}", line, "choice(...) instead of glob(...)"))
            continue
        try:
            dist = _distribution(name, override)
        except SearchSpaceError as exc:
            problems += exc.problems
            continue
        except (ValueError, HydraException) as exc:  # optuna's own checks, e.g. a zero step
            problems.append(Problem(f"{PARAMS_KEY}.{name}", line.split("=", 1)[-1], str(exc)))
            continue
        space.distributions[name] = dist
        if isinstance(dist, FloatDistribution) and dist.step is not None:
            space.decimals[name] = decimals_of(dist.low, dist.step)
    if problems:
        raise SearchSpaceError(problems)
    return space


# --- checks against the composed config -------------------------------------------------------------


def group_choices(config: DictConfig) -> dict[str, Any]:
    """The option of each config group a composed config was built with (hydra.runtime.choices)."""
    return dict(OmegaConf.select(config, "hydra.runtime.choices", default={}) or {})


def config_key(name: str) -> str:
    """The config key a param sets: its name without Hydra's `+`/`~` and any `@package`."""
    return name.lstrip("+~").split("@", 1)[0]


def _has_key(cfg: DictConfig, key: str) -> bool:
    parent, _, leaf = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
    return isinstance(node, DictConfig) and leaf in node.keys()


def _verl_key_ok(path: str) -> bool | None:
    """Whether verl 0.9.1's ppo_trainer config has `path` (None: verl not installed, cannot tell)."""
    from verlsweep.command import verl_schema

    try:
        verl_schema.config_dir()
    except verl_schema.VerlNotInstalled:
        return None
    return verl_schema.has_key(path) or verl_schema.needs_plus(path)


def _probe_values(dist: BaseDistribution, decimals: int | None) -> list[Any]:
    values = discrete_values(dist, decimals)
    if values is None or len(values) > _MAX_PROBES:
        return [dist.low, dist.high]  # type: ignore[attr-defined]
    return values


def check(space: SearchSpace, config: DictConfig, group_options: Any) -> list[Problem]:
    """Problems with the space against the composed config, each naming its param.

    - a key that is neither a config group, nor a key of the config, nor (under `verl.`) a key of
      verl's own config; a group choice that is not an option of the group;
    - a value our trial rules reject on this hardware x model (verlsweep.command.rules.check_rules: TP
      that does not divide devices/heads, utilization outside (0, 1], non-boolean offload flags ...).
    `group_options(name)` lists a config group's options ([] when `name` is not a group).
    """
    from verlsweep.command import rules

    problems: list[Problem] = []
    probes: dict[str, list[Any]] = {}
    for name in [*space.distributions, *space.fixed]:
        key = config_key(name)
        pkey = f"{PARAMS_KEY}.{name}"
        options = group_options(key)
        dist = space.distributions.get(name)
        if options:
            # a fixed choice was composed by Hydra already (which also sees hydra.searchpath)
            values = dist.choices if isinstance(dist, CategoricalDistribution) else []
            for unknown in [c for c in values if str(c) not in options]:
                problems.append(Problem(pkey, unknown, f"an option of group '{key}': {', '.join(sorted(options))}"
                                                       f"{did_you_mean(str(unknown), options)}"))
            continue
        if name.startswith(("+", "~")):
            continue  # adds or deletes a key on purpose: Hydra checks it when composing the trial
        if key.startswith("verl."):
            known = _verl_key_ok(key[len("verl."):])
            if known is False:
                from verlsweep.command.verl_schema import leaf_keys

                hint = did_you_mean(key[len("verl."):], leaf_keys(), "verl.")
                problems.append(Problem(pkey, None, f"a key of verl 0.9.1's ppo_trainer config{hint}"))
                continue
        elif not _has_key(config, key):
            tree = cast(dict[str, Any], OmegaConf.to_container(config, resolve=False))
            ours = flatten({k: v for k, v in tree.items() if k != "hydra"})
            problems.append(Problem(pkey, None, "an existing config key or config group (add '+' to add a new key)"
                                                f"{did_you_mean(key, ours)}"))
            continue
        if dist is not None:
            probes[name] = _probe_values(dist, space.decimals.get(name))
    if problems or not probes:
        return problems

    base = copy.deepcopy(config)
    try:
        rules.check_rules(base)
    except Exception:  # noqa: BLE001 - not a verlsweep trial config (no hardware/model): no rules to apply
        return problems
    for name, values in probes.items():
        key = config_key(name)
        cfg = copy.deepcopy(base)       # one copy per param: each probe sets the same key again
        for value in values:
            OmegaConf.update(cfg, key, space.value(name, value), merge=False, force_add=True)
            rejected = [p for p in rules.check_rules(cfg) if p.key == key]
            if rejected:
                problems.append(Problem(f"{PARAMS_KEY}.{name}", space.value(name, value), rejected[0].allowed,
                                        rule="search space value rejected by the trial rules"))
                break
    return problems
