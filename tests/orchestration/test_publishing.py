"""Asset metadata in Dagster's own shapes: standard row count and column
schema keys, a table preview rather than hand-written Markdown."""

from __future__ import annotations

import dagster as dg
import polars as pl

from orchestration.publishing import table_metadata


def test_table_metadata_uses_dagster_standard_keys(tmp_path):
    path = tmp_path / "reports.parquet"
    pl.DataFrame(
        {
            "trajectory_id": [f"t{i}" for i in range(7)],
            "verdict": ["accept"] * 7,
            "duration_s": [0.5] * 7,
            "reasons": [["a"]] * 7,
            "note": ["x\ny" * 40] + [None] * 6,
        }
    ).write_parquet(path)
    meta = table_metadata(path)
    assert meta["dagster/row_count"].value == 7 and meta["reports_rows"].value == 7
    schema = meta["dagster/column_schema"].schema
    assert [c.name for c in schema.columns] == ["trajectory_id", "verdict", "duration_s", "reasons", "note"]
    preview = meta["reports_preview"]
    assert isinstance(preview, dg.TableMetadataValue) and len(preview.records) == 5
    first = preview.records[0].data
    assert "reasons" not in first  # list columns are left out of the preview
    assert len(first["note"]) == 60 and "\n" not in first["note"] and preview.records[1].data["note"] is None
    assert "dagster/row_count" not in table_metadata(path, primary=False)
