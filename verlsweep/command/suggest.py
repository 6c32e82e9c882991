"""'did you mean' for a misspelt key or group option (difflib, the matcher Python's own hints use)."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The candidates closest to `word`, best first; case differences count as close (a2_64G)."""
    pool = list(candidates)
    by_lower = {c.lower(): c for c in pool}
    if word.lower() in by_lower and word not in pool:
        return [by_lower[word.lower()]]           # only the case differs: that is the one
    close = difflib.get_close_matches(word.lower().replace("-", "_"), list(by_lower), n=n, cutoff=0.75)
    return [by_lower[c] for c in close]


def did_you_mean(word: str, candidates: Iterable[str], prefix: str = "") -> str:
    """'; did you mean a, b?' or '' when nothing is close."""
    close = close_matches(word, candidates)
    return f"; did you mean {', '.join(prefix + c for c in close)}?" if close else ""
