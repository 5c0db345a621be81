"""The evaluation history a round's report shows: the metrics of every
earlier evaluated round, oldest first."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from touchstone.evaluate.schema import RoundMetrics
from touchstone.rounds import round_index


def earlier_rounds(metrics_files: Mapping[str, Path], round_key: str) -> list[RoundMetrics]:
    """`metrics_files`: round key -> that round's metrics.parquet; the rounds
    before `round_key` are read, oldest first."""
    this = round_index(round_key)
    found = [RoundMetrics.from_flat(pl.read_parquet(str(path)).row(0, named=True))
             for key, path in metrics_files.items() if round_index(key) < this]  # fmt: skip
    return sorted(found, key=lambda m: round_index(m.round))
