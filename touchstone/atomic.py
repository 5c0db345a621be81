"""The one way a record file is written: into a temporary sibling, then
renamed over the target, so a killed process or a concurrent reader never
sees half a file, and a failed write leaves the previous version intact."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A fresh temporary path next to `path` to write; renamed over `path`
    when the block succeeds, removed when it raises."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_parquet(frame: pl.DataFrame, path: Path) -> None:
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp)


def write_parquet_rows(rows: Iterable[dict], path: Path, schema: Mapping, batch_rows: int = 512) -> None:
    """One Parquet file of `rows` (dicts of `schema`), written a row group of
    `batch_rows` at a time, so a table is never assembled in memory: with rows
    from a generator, memory stays flat in the number of rows."""
    import polars as pl
    import pyarrow.parquet as pq

    arrow_schema = pl.DataFrame(schema=schema).to_arrow().schema
    rows = iter(rows)
    with atomic_path(path) as tmp, pq.ParquetWriter(tmp, arrow_schema, compression="zstd") as writer:
        while chunk := list(itertools.islice(rows, batch_rows)):
            frame = pl.DataFrame(chunk, schema=schema, orient="row")
            writer.write_table(frame.to_arrow().cast(arrow_schema))
