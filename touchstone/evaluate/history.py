"""The evaluation history a round's report shows: the metrics of every
earlier evaluated round, oldest first."""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from touchstone.evaluate.schema import RoundMetrics
from touchstone.rounds import round_index


def earlier_rounds(metrics: Mapping[str, pl.DataFrame], round_key: str) -> list[RoundMetrics]:
    """`metrics`: round key -> that round's metrics table (one row); the rounds
    before `round_key`, oldest first."""
    this = round_index(round_key)
    found = [
        RoundMetrics.from_flat(frame.row(0, named=True)) for key, frame in metrics.items() if round_index(key) < this
    ]
    return sorted(found, key=lambda m: round_index(m.round))
