"""Shared pytest fixtures for verlsweep's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.tiny_verl import make_gsm8k_parquet, make_tiny_qwen3


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Qwen3 checkpoint with a local tokenizer (see tests/fixtures/tiny_verl.py)."""
    return make_tiny_qwen3(tmp_path_factory.mktemp("tiny_qwen3"))


@pytest.fixture(scope="session")
def gsm8k_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding GSM8K-format ``train.parquet`` and ``test.parquet``."""
    data_dir = tmp_path_factory.mktemp("gsm8k")
    make_gsm8k_parquet(data_dir)
    return data_dir
