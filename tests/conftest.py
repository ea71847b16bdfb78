"""Shared fixtures: where the real traces are, and a CPU budget for tests that train."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("ORACLE_SHARED", REPO.parent / "shared"))
REAL = SHARED / "traces" / "real"


@pytest.fixture(scope="session")
def real_traces() -> Path:
    """The folder of real traces shared beside the checkout."""
    if not REAL.is_dir():
        pytest.fail(f"real traces not found at {REAL}: clone the repo beside ../shared")
    return REAL
