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


def table_metadata(path, preview_rows: int = 5, primary: bool = True) -> dict[str, object]:
    """Row count (plotted over rounds by the UI), column schema and a preview of
    a Parquet file (local or remote), as Dagster's table metadata. `primary`:
    the asset's main table, whose count is the asset's `dagster/row_count`."""
    frame = read_parquet(path)
    preview = frame.head(preview_rows).select(
        [c for c, t in frame.schema.items() if t.is_numeric() or t == pl.String or t == pl.Boolean][:8]
    )
    metadata: dict[str, object] = {
        f"{path.stem}_rows": dg.MetadataValue.int(frame.height),
        f"{path.stem}_preview": dg.MetadataValue.table(
            records=[dg.TableRecord({c: _cell(v) for c, v in row.items()}) for row in preview.iter_rows(named=True)],
            schema=_schema(preview),
        ),
    }
    if primary:
        metadata |= {"dagster/row_count": frame.height, "dagster/column_schema": _schema(frame)}
    return metadata


def _schema(frame: pl.DataFrame) -> dg.TableSchema:
    return dg.TableSchema(columns=[dg.TableColumn(name=c, type=str(t)) for c, t in frame.schema.items()])


def _cell(value: object) -> str | int | float | bool | None:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."
