"""Where Touchstone keeps data and caches. One place, so every stage agrees."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """Data root: rounds, DuckDB file, Dagster home. `TOUCHSTONE_HOME`, default ./.touchstone."""
    return Path(os.environ.get("TOUCHSTONE_HOME", ".touchstone")).resolve()


def cache() -> Path:
    """Build caches (sandbox root filesystems). `TOUCHSTONE_CACHE`, default ~/.cache/touchstone."""
    default = Path.home() / ".cache" / "touchstone"
    return Path(os.environ.get("TOUCHSTONE_CACHE", default)).resolve()
