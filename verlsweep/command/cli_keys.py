"""The keys a `python sweep.py` command line sets, checked against the config they would set, before Hydra.

Hydra refuses a key the composed config lacks with OmegaConf's "Key 'step' is not in struct" and the
advice to add it with `+` (hydra/_internal/config_loader_impl.py _apply_overrides_to_config); followed,
`+hardwre=a2_64g` composes a new key nothing reads and the run goes on with the default hardware. Here
the config is composed once with the command line's group choices, and each key is looked up in it: a
missing one gets the closest existing key or group ("did you mean"), exit 2. A config file that is not
valid YAML is named with its line (Hydra shows yaml's traceback).
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml
from omegaconf import DictConfig, OmegaConf

from verlsweep.command.suggest import close_matches
from verlsweep.common.files import writable_dir

_OVERRIDE = re.compile(r"^(?P<prefix>[+~]*)(?P<key>[A-Za-z_][\w.@/-]*)=(?P<value>.*)$")
_SWEEP_VALUE = re.compile(r"^\w+\(|,")          # choice(...), range(...), a comma list: a sweep's
_ABSENT = object()
# hydra's own nodes the check reads: the sweeper's settings; the rest is Hydra's (and checked by it)
_HYDRA_CHECKED = "hydra.sweeper."
_HYDRA_OPEN = ("hydra.sweeper.params.", "hydra.sweeper.sampler.", "hydra.sweeper.pruner.")


def _parsed(argv: list[str]) -> list[tuple[str, str, str, str]]:
    """(argument, prefix, key, value) of each override; options (-m, --cfg) left out."""
    out = []
    for arg in argv:
        m = _OVERRIDE.match(arg)
        if m and not arg.startswith("-"):
            out.append((arg, m["prefix"], m["key"], m["value"]))
    return out


def choices(argv: list[str], groups: dict[str, list[str]]) -> list[str]:
    """The overrides to compose with: group choices of one option and Hydra's search path (a sweep's
    comma list or choice() is left out: composing it needs the sweeper)."""
    out = []
    for arg, prefix, key, value in _parsed(argv):
        group = key.split("@", 1)[0]
        if (group in groups or key.startswith(("hydra/", "hydra.searchpath"))) and "~" not in prefix \
                and (key.startswith("hydra.searchpath") or not _SWEEP_VALUE.search(value)):
            out.append(arg)
    return out


def yaml_problem(exc: BaseException) -> str | None:
    """A config file's YAML syntax error in a compose failure, as `file, line N: what` (None: another
    failure, Hydra's own message follows when it composes)."""
    seen: BaseException | None = exc
    while seen is not None and not isinstance(seen, yaml.MarkedYAMLError):
        seen = seen.__cause__ or seen.__context__
    if not isinstance(seen, yaml.MarkedYAMLError) or seen.problem_mark is None:
        return None
    mark = seen.problem_mark
    opened = seen.context_mark
    where = (f" ({seen.context} at line {opened.line + 1})" if seen.context and opened is not None
             and opened.name == mark.name else "")
    return (f"{mark.name}, line {mark.line + 1}: not valid YAML: {seen.problem}{where}; fix the file (YAML "
            f"syntax: https://yaml.org/spec/1.2.2/)")


def _node_keys(node: DictConfig) -> list[str]:
    return [str(k) for k in node.keys()]


def _struct(node: DictConfig) -> bool:
    """Whether Hydra refuses a new key below `node` without `+` (the struct flag, inherited)."""
    return bool(OmegaConf.is_struct(node))


def key_problems(argv: list[str], cfg: DictConfig, groups: dict[str, list[str]]) -> list[str]:
    """One message per key the command line sets that `cfg` (composed with its group choices, the
    `hydra` node included) lacks where Hydra would refuse it, and per `+key` that adds a near miss of
    a group or top-level key."""
    roots = sorted({*groups, *(str(k) for k in cfg.keys())} - {"hydra"})
    out = []
    for arg, prefix, key, value in _parsed(argv):
        if "~" in prefix or "@" in key or "/" in key or key in groups:
            continue
        if key.startswith("hydra.") and (not key.startswith(_HYDRA_CHECKED) or key.startswith(_HYDRA_OPEN)):
            continue
        if "+" in prefix:
            root = key.split(".", 1)[0]
            if root not in roots and root != "hydra" and (close := close_matches(root, roots)):
                # `+` adds the key Hydra asked for, and nothing reads it: the run would silently use defaults
                out.append(f"{arg}: adds a new key `{root}` that nothing reads; did you mean "
                           f"{_with(key, root, close[0])}={value}?")
            continue
        message = _missing(arg, key, value, cfg, roots)
        if message:
            out.append(message)
    return out


def _with(key: str, part: str, replacement: str) -> str:
    head, _, tail = key.rpartition(part)
    return head + replacement + tail


def _missing(arg: str, key: str, value: str, cfg: DictConfig, roots: list[str]) -> str | None:
    """The message for `key` when it is not in `cfg` and its parent refuses new keys."""
    parts = key.split(".")
    node: object = cfg
    for depth, part in enumerate(parts):
        if not isinstance(node, DictConfig):
            return None                       # below a value: Hydra's own message
        child = node._get_node(part) if part in node else _ABSENT      # unresolved: no interpolation runs
        if child is _ABSENT:
            if not _struct(node):
                return None                   # an open node (verl:, env vars) takes any key
            parent = ".".join(parts[:depth])
            siblings = roots if depth == 0 else _node_keys(node)
            close = close_matches(part, siblings)
            what = f"no key `{part}` in {parent}" if parent else f"no config group or key `{part}`"
            if close:
                fixed = ".".join([*parts[:depth], close[0], *parts[depth + 1:]])
                return f"{arg}: {what}; did you mean {fixed}={value}?"
            shown = ", ".join(siblings[:25]) + (", ..." if len(siblings) > 25 else "")
            return f"{arg}: {what}; {'its keys' if parent else 'groups and keys'}: {shown}"
        node = child
    return None


def check(argv: list[str], conf_dir: Path, root_config: str, groups: dict[str, list[str]],
          run_dir: bool = False) -> list[str]:
    """The command line's misspelt keys and a config file's YAML error, as messages ([]: compose as usual);
    `run_dir`: and the output root a single run's dir goes in. A compose that fails otherwise is left to
    Hydra, whose message follows."""
    from verlsweep.command.hydra_compose import compose_dir

    if not any(not a.startswith("-") and "=" in a for a in argv):
        return []
    try:
        cfg = compose_dir(conf_dir, root_config, choices(argv, groups), return_hydra_config=True)
    except Exception as exc:  # noqa: BLE001 - Hydra's compose errors are many kinds; only YAML's is ours
        problem = yaml_problem(exc)
        return [problem] if problem else []
    problems = key_problems(argv, cfg, groups)
    return problems or (run_dir_problems(argv, cfg) if run_dir else [])


def run_dir_problems(argv: list[str], cfg: DictConfig) -> list[str]:
    """A single run's output root that cannot hold its run dir: Hydra would fail making
    `<paths.output_root>/runs/<time>` with a traceback, before the task starts."""
    given = {key: value for _, prefix, key, value in _parsed(argv) if "~" not in prefix}
    if any(a in ("-m", "--multirun") for a in argv) or "hydra.run.dir" in given:
        return []                 # a sweep's dir is the sweeper's to check; a run dir of one's own: Hydra's
    root = given.get("paths.output_root")
    if root is None:
        try:
            root = str(OmegaConf.select(cfg, "paths.output_root"))     # ${oc.env:VERLSWEEP_OUTPUT_ROOT,outputs}
        except Exception:  # noqa: BLE001 - an interpolation that does not resolve: the task names it
            return []
    found = writable_dir("paths.output_root", root, Path(root) / "runs", "a directory for the run dirs (hydra.run.dir)")
    return [str(p) for p in found]
