"""Shared by every asset (which import no sibling asset module): write into a
staging directory, swap it into place, refresh the DuckDB views, and describe
the result for the UI."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import polars as pl

from orchestration.resources import StorageResource
from orchestration.storage import read_parquet


@contextmanager
def publishing(
    context: dg.AssetExecutionContext, storage: StorageResource
) -> Iterator[Path]:
    """Yield a staging dir for this asset (and round); publish it and refresh views on success."""
    store = storage.store()
    round_key = context.partition_key if context.has_partition_key else None
    with store.publish(context.asset_key.path[-1], round_key) as staging:
        yield staging
    store.refresh_views()


def table_metadata(path, preview_rows: int = 5) -> dict[str, dg.MetadataValue]:
    """Row count (plotted over rounds by the UI) and a preview of a Parquet file (local or remote)."""
    frame = read_parquet(path)
    preview = frame.head(preview_rows).select(
        [c for c, t in frame.schema.items() if t.is_numeric() or t == pl.String or t == pl.Boolean][:8]
    )
    return {
        f"{path.stem}_rows": dg.MetadataValue.int(frame.height),
        f"{path.stem}_preview": dg.MetadataValue.md(_markdown_table(preview)),
    }


def _markdown_table(frame: pl.DataFrame) -> str:
    if frame.width == 0:
        return "(no columns)"
    cells = [[_cell(v) for v in row] for row in frame.iter_rows()]
    lines = ["| " + " | ".join(frame.columns) + " |", "|" + " --- |" * frame.width]
    lines += ["| " + " | ".join(row) + " |" for row in cells]
    return "\n".join(lines)


def _cell(value: object) -> str:
    text = str(value).replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."
