"""verlsweep.common.patterns.text_phase: the phase a failure text names, read from the same pattern rows
the trial's classifier uses (tests/test_patterns.py checks the rows against their sources)."""
from __future__ import annotations

import pytest

from verlsweep.common.patterns import OOM_LABEL_PHASES, PATTERNS, text_phase
from verlsweep.common.result import FAILURE_PHASES
from verlsweep.trial.classify import LogScanner, classify

START = ("ValueError: Free memory on device (36.08/60.96 GiB) on startup is less than desired GPU memory "
         "utilization (0.6, 36.58 GiB).")
KV = ("ValueError: To serve at least one request with the model's max seq len (32768), (4.50 GiB KV cache is "
      "needed, which is larger than the available KV cache memory (2.10 GiB).")


@pytest.mark.parametrize("text, phase", [
    (START, "vllm_start"),
    (KV, "kv_cache"),
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.", "kv_cache"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB", None),   # no phase in the text
    ("", None),
])
def test_text_phase_names_the_phase_of_vllms_own_checks_only(text, phase):
    assert text_phase(text) == phase


def test_every_phase_row_is_a_row_of_the_table_and_a_known_phase():
    labels = {p.label for p in PATTERNS if p.outcome == "oom"}
    assert set(OOM_LABEL_PHASES) <= labels
    assert set(OOM_LABEL_PHASES.values()) <= set(FAILURE_PHASES)


@pytest.mark.parametrize("text", [START, KV])
def test_the_report_and_the_classifier_read_the_same_phase_from_a_text(text):
    """One source of truth: what classify records for a log is what the report reads from its excerpt."""
    scanner = LogScanner()
    scanner.feed(text)
    diagnosis = classify(1, scanner, steps=0)
    assert diagnosis.outcome == "oom"
    assert diagnosis.phase == text_phase(text)
