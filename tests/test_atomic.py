"""The one atomic-write helper: a failed write leaves the previous file whole."""

import polars as pl
import pytest

from touchstone import atomic


def test_a_write_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "sub" / "t.parquet"
    atomic.write_parquet(pl.DataFrame({"a": [1, 2]}), path)
    with pytest.raises(RuntimeError), atomic.atomic_path(path) as tmp:
        tmp.write_bytes(b"half a fil")
        raise RuntimeError("killed")
    assert pl.read_parquet(path)["a"].to_list() == [1, 2]
    assert sorted(p.name for p in path.parent.iterdir()) == ["t.parquet"]
    atomic.write_text(tmp_path / "x.json", "{}")
    assert (tmp_path / "x.json").read_text() == "{}"


def test_rows_are_written_a_row_group_at_a_time_and_read_back_whole(tmp_path):
    import pyarrow.parquet as pq

    schema = {"id": pl.String, "n": pl.Int64, "tags": pl.List(pl.String)}
    rows = ({"id": f"r{i:04d}", "n": i, "tags": [str(i)] * (i % 3)} for i in range(1300))
    atomic.write_parquet_rows(rows, tmp_path / "t.parquet", schema, batch_rows=500)
    assert pq.ParquetFile(tmp_path / "t.parquet").num_row_groups == 3
    back = pl.read_parquet(tmp_path / "t.parquet")
    assert back.height == 1300 and back["n"].to_list() == list(range(1300)) and back.schema == pl.Schema(schema)
    atomic.write_parquet_rows(iter(()), tmp_path / "empty.parquet", schema)
    assert pl.read_parquet(tmp_path / "empty.parquet").schema == pl.Schema(schema)


def test_a_row_that_breaks_the_schema_midway_leaves_the_old_file(tmp_path):
    schema = {"n": pl.Int64}
    atomic.write_parquet_rows([{"n": 1}], tmp_path / "t.parquet", schema)
    bad = ({"n": i if i < 700 else "seven hundred"} for i in range(800))
    with pytest.raises(Exception):
        atomic.write_parquet_rows(bad, tmp_path / "t.parquet", schema, batch_rows=500)
    assert pl.read_parquet(tmp_path / "t.parquet")["n"].to_list() == [1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]
