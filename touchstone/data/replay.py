"""Replay: the SFT rows a round trains on are its own verified rows followed by
those of earlier rounds.

Why: a laptop round often verifies one or two runs, and a round's fixed number
of steps on them fits those runs and forgets the rest (the demo's held-out NLL
rose 4.01 -> 4.29 -> 4.73 over rounds that kept 4, 1 and 2 rows;
docs/EXPERIMENTS.md). Every replayed row is an accepted run of the round that
verified it and keeps that round in its `round` column, so a checkpoint's
lineage still leads to each row's task, trajectory and report.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

SFT_FILE = "sft.parquet"


def replay_dataset(current: Path, earlier: list[Path], out: Path) -> dict[str, int]:
    """OUT/sft.parquet: the SFT rows of data dir `current`, then those of each of
    `earlier` that has any. Returns rows per round (the `round` column)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(d / SFT_FILE) for d in [current, *earlier] if (d / SFT_FILE).is_file()]
    table = pa.concat_tables([t for t in tables if t.num_rows] or tables[:1])
    out.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out / SFT_FILE)  # the first file's schema metadata (the datasets features) with it
    return dict(Counter(str(r) for r in table.column("round").to_pylist()))
