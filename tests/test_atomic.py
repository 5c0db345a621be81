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
