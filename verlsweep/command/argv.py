"""`python sweep.py` arguments read before Hydra composes anything: group choices checked against
the config tree (with a "did you mean"), and the search-space group left out for another sweeper.

Hydra reports an unknown option only as its list of options (hydra/_internal/config_loader_impl.py
MissingConfigException); a near miss such as `hardware=a2_64G` deserves the closest name beside it.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

from hydra.errors import HydraException

from verlsweep.command.hydra_compose import group_options as hydra_group_options
from verlsweep.command.suggest import did_you_mean
from verlsweep.common import moved_keys
from verlsweep.common.names import CONFIG_PATH_ENV

SPACE_GROUP = "space"            # the search space: configures our sweeper (hydra.sweeper.*) only
OUR_SWEEPER = "verlsweep"
OUR_SWEEPERS = (OUR_SWEEPER, "verl_trials")      # the plugin, and conf/hydra/sweeper's option over it
_CHOICE = re.compile(r"^[+~]*([A-Za-z_][\w/]*)=(.*)$")
# Hydra's search path as the command line extends it: the check reads a `hydra.searchpath=` with it; another
# primary config dir it does not follow
_SEARCHPATH = "hydra.searchpath="
_OTHER_DIRS = ("--config-dir", "-cd", "--config-path", "-cp")


def _searchpath(argv: list[str]) -> list[str]:
    return [a for a in argv if a.startswith(_SEARCHPATH)]


def group_options(conf_dir: Path, argv: list[str] | None = None) -> dict[str, list[str]]:
    """Config group -> its options, as Hydra finds them from `conf_dir` (the search spaces and the user's
    config dirs included, with a `hydra.searchpath=` of `argv`); Hydra's own groups excluded."""
    # the user's config dirs of VERLSWEEP_CONFIG_PATH are options too: a part of the cache's key
    return dict(_group_options(conf_dir, tuple(_searchpath(argv or [])), os.environ.get(CONFIG_PATH_ENV, "")))


@functools.lru_cache(maxsize=4)
def _group_options(conf_dir: Path, searchpath: tuple[str, ...], config_path: str) -> dict[str, list[str]]:
    """Cached: each check of the command line asks, and each answer loads Hydra's config repository."""
    from verlsweep import ROOT_CONFIG

    return hydra_group_options(conf_dir, ROOT_CONFIG, list(searchpath))


def group_typos(argv: list[str], conf_dir: Path) -> list[str]:
    """One message per group choice on the command line that names no option of its group."""
    if any(a.startswith(_OTHER_DIRS) for a in argv):
        return []
    try:
        groups = group_options(conf_dir, argv)
    except HydraException:
        return []                 # a malformed hydra.searchpath: Hydra's own message when it composes
    out = []
    for arg in argv:
        match = _CHOICE.match(arg)
        if not match or match.group(1) not in groups or arg.startswith("~"):
            continue
        group, value = match.groups()
        if "(" in value or "$" in value or value[:1] in "'\"":
            continue              # sweeps (the sweeper names the param), interpolations, quoting: Hydra's
        options = groups[group]
        for option in (v.strip() for v in value.split(",")):
            if option and option not in options and option != "null":
                out.append(f"{group}={option}: not an option of group {group}{did_you_mean(option, options)}\n"
                           f"  options: {', '.join(options)}")
    return out


def moved(argv: list[str]) -> list[str]:
    """One message per setting on the command line spelled as before it moved (verlsweep.common.moved_keys)."""
    items = [(a.split("=", 1)[0].lstrip("+~"), a.split("=", 1)[1]) for a in argv if "=" in a]
    return [str(p) for p in moved_keys.problems(items)]


def _other_sweeper(argv: list[str]) -> str | None:
    sweeper = next((m.group(2) for a in argv if (m := _CHOICE.match(a)) and m.group(1) == "hydra/sweeper"), None)
    return None if sweeper is None or sweeper in OUR_SWEEPERS else sweeper


def _picks_space(argv: list[str]) -> bool:
    return any(re.match(rf"^[+]*{SPACE_GROUP}(@|=)", a) for a in argv)


def for_other_sweeper(argv: list[str]) -> list[str]:
    """argv with `~sweep` added when it picks another sweeper (e.g. hydra/sweeper=basic) and no search
    space: the `sweep` group's files set our sweeper's keys, which Hydra's BasicSweeperConf rejects."""
    if _other_sweeper(argv) is None or _picks_space(argv) or any(a.startswith(f"~{SPACE_GROUP}") for a in argv):
        return argv
    return [*argv, f"~{SPACE_GROUP}"]


def sweeper_conflict(argv: list[str]) -> str | None:
    """A search space asked of another sweeper: it could only fail inside Hydra's config checks."""
    other = _other_sweeper(argv)
    if other is None or not _picks_space(argv):
        return None
    return (f"{SPACE_GROUP}=... is a search space of the {OUR_SWEEPER} sweeper, hydra/sweeper={other} cannot run "
            f"it: drop {SPACE_GROUP}=... (Hydra's sweepers take comma lists, e.g. algorithm=remax,grpo) or "
            f"hydra/sweeper={other}")


# Groups a user never picks: `device` is included by each hardware file (conf/device/).
INTERNAL_GROUPS = ("device",)
# A group whose one option is this is a settings node of the root config (conf/trial/default.yaml):
# its keys are set (trial.steps=3), there is nothing to pick.
NODE_OPTION = "default"


def help_groups() -> str:
    """The config groups a user picks from, one line each (`python sweep.py --help`): neither the internal
    ones nor the settings nodes."""
    from verlsweep import CONF_DIR

    groups = {g: o for g, o in group_options(CONF_DIR).items() if g not in INTERNAL_GROUPS and o != [NODE_OPTION]}
    width = max(map(len, groups), default=0)
    return "\n".join(f"  {g:<{width}}  {', '.join(o)}" for g, o in groups.items())


# group -> its former name, still accepted on the command line (with a note) for existing scripts
RENAMED_GROUPS = {SPACE_GROUP: "sweep"}


def renamed_groups(argv: list[str]) -> tuple[list[str], list[str]]:
    """argv with former group names replaced by today's, and one note per replacement."""
    out, notes = [], []
    for a in argv:
        m = _CHOICE.match(a)
        prefix = a[:len(a) - len(a.lstrip("+~"))]
        group = m.group(1) if m else a.lstrip("+~")
        new = next((n for n, old in RENAMED_GROUPS.items() if group == old), None)
        if new and not a.startswith("hydra"):
            a = prefix + new + a[len(prefix) + len(group):]
            notes.append(f"group `{group}` is now `{new}`: read {group}=... as {new}=...")
        out.append(a)
    return out, notes


RECIPE = "recipe"                             # recipe=path/to/run.sh: a recipe script of the user's own
RECIPE_SAYS = ("algorithm", "model", "data")  # groups whose say a recipe script has itself


def recipe_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """argv with `recipe=PATH` spelled as runner=script runner.script=<absolute PATH>, and one problem per
    algorithm/model/data group chosen beside a recipe script (the script says them)."""
    out: list[str] = []
    script = False
    for arg in argv:
        key, _, value = arg.partition("=")
        if key.lstrip("+") == RECIPE and value:
            out += ["runner=script", f"runner.script={Path(value).expanduser().resolve()}"]
            script = True
        else:
            script = script or arg in ("runner=script", "+runner=script")
            out.append(arg)
    if not script:
        return out, []
    chosen = [m.group(1) for a in out if (m := _CHOICE.match(a)) and m.group(1) in RECIPE_SAYS]
    return out, [f"{g}={next(a.split('=', 1)[1] for a in out if a.lstrip('+').startswith(g + '='))}: a recipe "
                 f"script says its own {g}; drop {g}=... (the script's values are the trial's config)"
                 for g in dict.fromkeys(chosen)]


_MULTIRUN = ("-m", "--multirun")
_SHOW = ("--cfg", "-c", "--info", "-i", "--shell-completion", "-sc")
_JOINED_M = re.compile(r"^-m([A-Za-z_+~][^=\s]*=.*)$")


def joined_multirun(argv: list[str]) -> list[str]:
    """`-mhardware=a3_64g`: argparse reads it as -m with a value and answers with a riddle about --help;
    -m between overrides: argparse calls the overrides after it "unrecognized arguments" (-m last is fine)."""
    out = [f"{a}: -m and the overrides are separate arguments: -m {m.group(1)}"
           for a in argv if (m := _JOINED_M.match(a))]
    flag = next((i for i, a in enumerate(argv) if a in _MULTIRUN), None)
    def has_override(args: list[str]) -> bool:
        return any("=" in a and not a.startswith("-") for a in args)

    if flag is not None and has_override(argv[:flag]) and has_override(argv[flag + 1:]):
        rest = [a for a in argv if a not in _MULTIRUN]
        out.append(f"{argv[flag]} after an override: options go first, python sweep.py {argv[flag]} {' '.join(rest)}")
    shown = next((a for a in argv if a in _SHOW), None)
    if flag is not None and shown is not None:       # Hydra raises a ValueError, with its traceback
        out.append(f"{argv[flag]} with {shown}: Hydra does one of them; drop {argv[flag]} to see the config, "
                   f"{shown} to sweep")
    return out


# Hydra's options that take a value (hydra/_internal/utils.py get_args_parser); --info's is optional
_VALUED = ("--cfg", "-c", "--package", "-p", "--config-path", "-cp", "--config-name", "-cn", "--config-dir", "-cd",
           "--experimental-rerun")
_INFO = ("--info", "-i")
_INFO_VALUES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def overrides_of(argv: list[str]) -> list[str]:
    """The overrides among Hydra's command-line arguments (options and their values left out)."""
    out = []
    for i, arg in enumerate(argv):
        before = argv[i - 1] if i else ""
        if arg.startswith("-") or before in _VALUED or (before in _INFO and arg in _INFO_VALUES):
            continue
        out.append(arg)
    return out


def grammar_errors(argv: list[str]) -> list[str]:
    """Overrides Hydra's grammar rejects (`frobnicate`, `trial.steps=[1`), with Hydra's own reason: Hydra
    says it with exit 1, as if the program had failed."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    out = []
    parser = OverridesParser.create()
    for arg in overrides_of(argv):
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as exc:
            reason = " ".join(line for line in str(exc).splitlines()
                              if not line.startswith(("See ", "Error parsing override")))
            out.append(f"{arg}: not an override Hydra can read ({reason}); write key=value, "
                       f"e.g. trial.steps=3 (grammar: https://hydra.cc/docs/advanced/override_grammar/basic/)")
    return out


SWEEPER_PREFIX = "hydra.sweeper."


def sweep_without_multirun(argv: list[str]) -> list[str]:
    """hydra.sweeper.* set without -m: Hydra runs one job and the sweeper settings do nothing. Refused
    (exit 2) rather than warned: the single run may be an hour of a real trainer."""
    if any(a in _MULTIRUN for a in argv):
        return []
    keys = [a for a in argv if a.lstrip("+~").startswith(SWEEPER_PREFIX)]
    if not keys:
        return []
    return [f"{keys[0]}: sweeper settings take effect in a sweep only, and a sweep needs -m: python sweep.py -m "
            f"{' '.join(argv)} (without -m this would run one trial)"]


def key_typos(argv: list[str], conf_dir: Path, run_dir: bool = False) -> list[str]:
    """Misspelt keys on the command line and config files that are not valid YAML
    (verlsweep.command.cli_keys), with the config composed from `conf_dir` as Hydra would; `run_dir`:
    and the output root of a single run's dir (sweep.py's)."""
    from verlsweep import ROOT_CONFIG
    from verlsweep.command import cli_keys, config_store

    config_store.register()       # the open `verl:` node conf/sweep.yaml composes with
    if any(a.startswith(_OTHER_DIRS) for a in argv):
        return []
    try:
        groups = group_options(conf_dir, argv)
    except HydraException:
        return []
    return cli_keys.check(argv, conf_dir, ROOT_CONFIG, groups, run_dir=run_dir)
