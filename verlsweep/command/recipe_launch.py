"""A recipe script's launch as what is recorded and handed on: command.json, command.sh, best_launch.sh.

What runs is the user's script, `bash <script> <args>` under the knobs' variables; the verl argv it
launches (captured, verlsweep.command.recipe_capture) is recorded beside it, so the record says both
what was started and what verl received.
"""
from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from verlsweep.command.launch_script import TRACKING_VAR, export_lines


def script_json(record: Mapping[str, Any]) -> dict[str, Any]:
    """command.json's `script`: the script, its digest and how it was run."""
    return {"path": record["script"], "sha256": record["sha256"], "env": dict(record["env"]),
            "args": list(record["args"]), "captured_in": record["cwd"], "launch_line": record["line"],
            "script_env": dict(record["script_env"]), "skipped": list(record["skipped"])}


def _run_line(script: str, args: Sequence[str], extra: str = "") -> str:
    words = ["bash", shlex.quote(script), *(shlex.quote(a) for a in args)]
    return " ".join(words) + extra


def script_bash(record: Mapping[str, Any], env: Mapping[str, str], argv: Sequence[str]) -> str:
    """command.sh's body: the script run with the trial's knobs; what it launches as comments."""
    lines = [f"# recipe script {record['script']}", f"# sha256 {record['sha256']}",
             f"# it launches verl at {record['line']} with this argv (captured):",
             "#   " + " \\\n#     ".join([" ".join(argv[:3]), *(shlex.quote(a) for a in argv[3:])])]
    lines += [f"# skipped when captured: {call}" for call in record["skipped"]]
    lines += export_lines(dict(env))
    lines.append(_run_line(str(record["script"]), record["args"]))
    return "\n".join(lines) + "\n"


def render(record: Mapping[str, Any], tracking_uri: str | None) -> str:
    """best_launch.sh's body: the user's script with the best knobs (its variables and appended
    overrides), everything else, the long run's length included, left to the script."""
    knobs = record.get("knobs") or {"env": {}, "args": []}
    lines = [f"# the recipe script this sweep ran (sha256 {record['sha256']}): its own values stand but for the",
             "# best knobs below; arguments to this script are passed on to it"]
    lines += [f"export {k}=${{{k}:-{shlex.quote(v)}}}" for k, v in knobs["env"].items()]
    if tracking_uri:
        lines.append(f"export {TRACKING_VAR}=${{{TRACKING_VAR}:-{shlex.quote(tracking_uri)}}}")
    lines += ["", _run_line(str(record["script"]), knobs["args"], ' "$@"')]
    return "\n".join(lines) + "\n"
