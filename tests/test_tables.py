"""Table forms derived from pydantic models: columns, markers, missing columns."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import polars as pl
import pytest
from pydantic import BaseModel, Field

from touchstone import tables
from touchstone.tables import Apart, Derived, Flat, Json, count


class Inner(BaseModel):
    a: int = 0
    b: list[str] = Field(default_factory=list)


class Record(BaseModel):
    id: str
    kind: Literal["x", "y"]
    score: float | None = None
    inner: Annotated[Inner, Flat("in_")] = Field(default_factory=Inner)
    blob: Annotated[dict[str, Any], Json()] = Field(default_factory=dict)
    parts: Annotated[list[Inner], Apart(), count("n_parts")] = Field(default_factory=list)
    tags: Annotated[list[str], Derived("first_tag", str | None, lambda t: t[0] if t else None)] = Field(
        default_factory=list
    )


def test_columns_follow_the_model_and_its_markers() -> None:
    assert tables.polars_schema(Record) == {
        "id": pl.String,
        "kind": pl.String,
        "score": pl.Float64,
        "in_a": pl.Int64,
        "in_b": pl.List(pl.String),
        "blob": pl.String,
        "n_parts": pl.Int64,
        "tags": pl.List(pl.String),
        "first_tag": pl.String,
    }


@pytest.mark.parametrize(
    "record",
    [
        Record(id="r", kind="x"),
        Record(id="r", kind="y", score=0.5, inner=Inner(a=2, b=["p"]), blob={"k": [1, {"ü": None}]}, tags=["t"]),
    ],
)
def test_a_record_survives_parquet(tmp_path, record: Record) -> None:
    path = tmp_path / "t.parquet"
    pl.DataFrame([tables.to_row(record)], schema=tables.polars_schema(Record), orient="row").write_parquet(path)
    [row] = pl.read_parquet(path).to_dicts()
    assert Record.model_validate(tables.from_row(Record, row)) == record
    assert row["n_parts"] == 0 and row["first_tag"] == (record.tags[0] if record.tags else None)


def test_a_missing_column_takes_the_default_and_a_required_one_is_named() -> None:
    row = {"id": "r", "kind": "x"}
    assert Record.model_validate(tables.from_row(Record, row)) == Record(id="r", kind="x")
    with pytest.raises(ValueError, match="kind"):
        Record.model_validate(tables.from_row(Record, {"id": "r"}))


def test_a_field_without_a_column_type_is_named() -> None:
    class Loose(BaseModel):
        meta: dict[str, Any]

    with pytest.raises(TypeError, match=r"Loose\.meta.*Json\(\)"):
        tables.polars_schema(Loose)
