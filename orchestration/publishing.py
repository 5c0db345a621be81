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
def publishing(context: dg.AssetExecutionContext, storage: StorageResource) -> Iterator[Path]:
    """Yield a staging dir for this asset (and round); publish it and refresh views on success."""
    store = storage.store()
    round_key = context.partition_key if context.has_partition_key else None
    with store.publish(context.asset_key.path[-1], round_key) as staging:
        yield staging
    store.refresh_views()


def table_metadata(path, preview_rows: int = 5, primary: bool = True) -> dict[str, dg.MetadataValue]:
    """Row count (plotted over rounds by the UI), column schema and a preview
    of a Parquet file (local or remote). The asset's `primary` table also fills
    Dagster's standard keys, so the asset page shows its rows and columns."""
    frame = read_parquet(path)
    shown = [c for c, t in frame.schema.items() if t.is_numeric() or t == pl.String or t == pl.Boolean][:8]
    preview = dg.MetadataValue.table(
        records=[
            dg.TableRecord({c: _cell(v) for c, v in row.items()})
            for row in frame.head(preview_rows).select(shown).iter_rows(named=True)
        ],
        schema=dg.TableSchema(columns=[dg.TableColumn(c, "string") for c in shown]),
    )
    meta = {f"{path.stem}_rows": dg.MetadataValue.int(frame.height), f"{path.stem}_preview": preview}
    if primary:
        meta["dagster/row_count"] = dg.MetadataValue.int(frame.height)
        meta["dagster/column_schema"] = dg.MetadataValue.table_schema(
            dg.TableSchema(columns=[dg.TableColumn(c, str(t)) for c, t in frame.schema.items()])
        )
    return meta


def _cell(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."
