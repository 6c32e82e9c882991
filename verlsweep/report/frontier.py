"""The OOM frontier per TP/offload combination: both sides of the feasible util band with the trial and
the reason for each side, and the util ranges the finished trials prove to fit or to fail
(verlsweep.proofs.rules, the rules the boundary sampler rules configs out by)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from verlsweep.common.distributions import discrete_values
from verlsweep.common.labels import OFFLOAD_LETTERS, OFFLOAD_TOKEN
from verlsweep.common.patterns import text_phase
from verlsweep.common.result import PLAN_CHECK_PHASES
from verlsweep.proofs.rules import OFFLOADS, TP, UTIL, Decided, Observed, infer
from verlsweep.report.data import TP_SUFFIX, UTIL_SUFFIX, Row, Sweep

FAILS = frozenset({"oom", "infeasible"})           # outcomes that say "does not fit" (told as constraints)

PHASE_TEXT = {
    "vllm_start": "OOM at vLLM start",
    "kv_cache": "KV cache too small",
    "rollout_wake": "OOM when vLLM wakes for a rollout",
    "training": "training OOM",
}

# The planner writes its binding constraint first in a verdict's reason (verlsweep/plan/predictor/memory.py ORDER,
# Check.message): `rollout: need 61.5 GiB of 60.7 ... - why`. Which phase each one is.
_BINDING = re.compile(r"^\s*(\w+): need [\d.]+ GiB of [\d.]+.*?(?: - (.*))?$", re.MULTILINE)


def binding(row: Row) -> tuple[str | None, str | None]:
    """(the planner's binding constraint, its one-line why) from a failure's excerpt, if it has them."""
    m = _BINDING.search(row.excerpt or "")
    return (m.group(1), m.group(2)) if m else (None, None)


def phase_of(row: Row) -> str | None:
    """Where a failure happened: the trial's `failure_phase` when it carries one, else what its error
    text or the planner's binding constraint tells; None when neither tells."""
    if row.phase:
        return row.phase
    return text_phase(row.excerpt or "") or PLAN_CHECK_PHASES.get(binding(row)[0] or "")


def reason(row: Row, brief: bool = False) -> str:
    """Why a trial did not fit, in a few words: `OOM at vLLM start`, `infeasible by the planner (...)`;
    `brief`: the planner's constraint without its explanation (the terminal's line)."""
    if row.ruled_out_by is not None:
        return f"ruled out by trial {row.ruled_out_by}"
    if row.outcome == "infeasible":
        name, why = binding(row)
        if name and (why and not brief):
            return f"infeasible by the planner ({name}: {why})"
        return f"infeasible by the planner ({name})" if name else "infeasible by the planner"
    phase = phase_of(row)
    if phase:
        return PHASE_TEXT.get(phase, f"OOM ({phase})")
    first = (row.excerpt or "").strip().splitlines()
    return f"OOM ({first[0][:80]})" if first else "OOM"


def _below(row: Row) -> bool:
    """A failure that bounds the band from below: only the KV check fails for too low a util."""
    return phase_of(row) == "kv_cache"


@dataclass
class Side:
    util: float
    trial: int
    reason: str
    brief: str = ""         # the reason in fewer words


@dataclass
class Region:
    verdict: str                                   # "fit" | "fail"
    low: float
    high: float
    proofs: list[tuple[int, str]] = field(default_factory=list)   # (trial, its outcome or failure reason)


@dataclass
class Combo:
    tp: Any
    offloads: tuple[bool, ...] | None      # None: the space does not vary offloads
    label: str                             # `tp=2 off=p,o`
    rows: list[Row]
    highest_fit: Side | None = None
    failed_above: Side | None = None       # the lowest util above the highest fit that failed
    failed_below: Side | None = None       # the highest util below the band that failed
    regions: list[Region] = field(default_factory=list)
    grid: list[float] = field(default_factory=list)
    verdicts: list[Decided] = field(default_factory=list)    # one per grid util

    @property
    def trials(self) -> int:
        return len(self.rows)


def _offload_names(sweep: Sweep) -> list[str]:
    return [n for n in OFFLOADS if n in sweep.param_names]


def _offload_label(names: list[str], values: tuple[bool, ...]) -> str:
    on = [OFFLOAD_LETTERS[n.removeprefix("verl.")] for n, v in zip(names, values) if v]
    return f"{OFFLOAD_TOKEN}={','.join(on) or '-'}"


def util_grid(sweep: Sweep) -> list[float]:
    """Every util the space allows (its step), else the utils tried."""
    name = sweep.util_param()
    dist = sweep.distributions.get(name or "")
    values = discrete_values(dist) if dist is not None else None
    if values:
        return sorted(float(v) for v in values)
    return sorted({float(r.param(UTIL_SUFFIX)) for r in sweep.rows if r.param(UTIL_SUFFIX) is not None})


def _knobs(sweep: Sweep, util: float, tp: Any, offloads: tuple[bool, ...] | None) -> dict[str, object]:
    """A config as the rules read it; a knob the space keeps fixed is the same for every trial, so any
    constant stands for it."""
    names = _offload_names(sweep)
    values = dict(zip(names, offloads or ()))
    return {UTIL: util, TP: tp if tp is not None else 0, **{n: values.get(n, False) for n in OFFLOADS}}


def observations(sweep: Sweep) -> list[Observed]:
    """What the rules may read: completed trials (fits) and OOMs with their phase. Planner verdicts and
    ruled-out trials never ran, and a pruned trial stopped before the steps that could still OOM (the
    rollout wake-up of step 2), so none of them proves anything."""
    out = []
    for r in sweep.rows:
        util = r.param(UTIL_SUFFIX)
        if util is None or r.ruled_out_by is not None or r.outcome not in ("completed", "oom"):
            continue
        offs = tuple(bool(r.params[n]) for n in _offload_names(sweep) if n in r.params) or None
        out.append(Observed(r.number, _knobs(sweep, float(util), r.param(TP_SUFFIX), offs), r.outcome,
                            phase_of(r) if r.outcome == "oom" else None))
    return out


def _regions(grid: list[float], verdicts: list[Decided], rows: dict[int, Row]) -> list[Region]:
    """Runs of neighbouring utils with one verdict, and the trials that prove them."""
    out: list[Region] = []
    for i, (util, d) in enumerate(zip(grid, verdicts)):
        if d.verdict == "unknown" or d.trial is None:
            continue
        proof = rows.get(d.trial)
        why = "completed" if proof is None or proof.outcome == "completed" else reason(proof)
        last = out[-1] if out else None
        if last is None or last.verdict != d.verdict or grid.index(last.high) != i - 1:
            last = Region(d.verdict, util, util)
            out.append(last)
        last.high = util
        if (d.trial, why) not in last.proofs:
            last.proofs.append((d.trial, why))
    return out


def combos(sweep: Sweep) -> list[Combo]:
    """One entry per TP (x offload combination, when the space varies offloads) that has a trial."""
    if sweep.util_param() is None:
        return []
    names = _offload_names(sweep)
    groups: dict[tuple, list[Row]] = {}
    for r in sweep.rows:
        if r.param(UTIL_SUFFIX) is None or r.outcome == "running":
            continue
        offs = tuple(bool(r.params.get(n)) for n in names) if names else None
        groups.setdefault((r.param(TP_SUFFIX), offs), []).append(r)
    grid = util_grid(sweep)
    seen = observations(sweep)
    by_number = {r.number: r for r in sweep.rows}
    out = []
    for (tp, offs), rows in sorted(groups.items(), key=lambda kv: (kv[0][0] is None, kv[0][0] or 0,
                                                                  sum(kv[0][1] or ()), kv[0][1] or ())):
        label = " ".join([f"tp={tp}" if tp is not None else "tp fixed",
                          *([_offload_label(names, offs)] if offs is not None else [])])
        combo = Combo(tp, offs, label, rows, grid=grid)
        _band(combo)
        combo.verdicts = infer(seen, [_knobs(sweep, u, tp, offs) for u in grid]) if seen else \
            [Decided("unknown")] * len(grid)
        combo.regions = _regions(grid, combo.verdicts, by_number)
        out.append(combo)
    return out


def _band(combo: Combo) -> None:
    util = lambda r: float(r.param(UTIL_SUFFIX))  # noqa: E731
    fits = [r for r in combo.rows if r.outcome == "completed"]
    fails = [r for r in combo.rows if r.outcome in FAILS]
    if fits:
        best = max(fits, key=util)
        combo.highest_fit = Side(util(best), best.number, "completed", "")
        above = [r for r in fails if util(r) > util(best)]
        below = [r for r in fails if util(r) < min(util(f) for f in fits)]
    else:
        # nothing fit yet: a too-small KV cache bounds from below, every other failure from above
        above = [r for r in fails if not _below(r)]
        below = [r for r in fails if _below(r)]
    if above:
        r = min(above, key=lambda r: (util(r), r.number))
        combo.failed_above = Side(util(r), r.number, reason(r), reason(r, brief=True))
    if below:
        r = max(below, key=lambda r: (util(r), -r.number))
        combo.failed_below = Side(util(r), r.number, reason(r), reason(r, brief=True))


def region_text(region: Region, grid: list[float], shown: Any) -> str:
    """`fails at util >= 0.85: proven by trial 7, OOM at vLLM start`"""
    lo, hi = shown(region.low), shown(region.high)
    # a failure region reaching an end of the space is a bound (the frontier), even if one util wide
    edge = region.verdict == "fail" or region.low != region.high
    if region.low == grid[0] and region.high == grid[-1]:
        where = "every util"
    elif edge and region.high == grid[-1]:
        where = f"util >= {lo}"
    elif edge and region.low == grid[0]:
        where = f"util <= {hi}"
    elif region.low == region.high:
        where = f"util {lo}"
    else:
        where = f"util {lo}-{hi}"
    verb = "fits" if region.verdict == "fit" else "fails"
    whys = {why for _, why in region.proofs}
    if len(region.proofs) == 1:
        (trial, why), = region.proofs
        proof = f"trial {trial}, {why}"
    elif len(whys) == 1:
        proof = f"trials {', '.join(str(t) for t, _ in region.proofs)}, {whys.pop()}"
    else:
        proof = "; ".join(f"trial {t}, {why}" for t, why in region.proofs)
    return f"{verb} at {where}: proven by {proof}"
