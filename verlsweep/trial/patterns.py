"""The failure-text table lives in verlsweep.common.patterns (the report reads an OOM's phase from it
too, and may not import the trial stage); these names stay importable from here."""
from verlsweep.common.patterns import (INSTALLED, OOM_LABEL_PHASES, PATTERNS, Pattern, Source,  # noqa: F401
                                       text_phase)
