"""The table form of a record: its Parquet columns and their Polars types are
derived from the pydantic model, so a record's fields are written once, in
the model, never again in a hand-kept schema or a `to_row`/`from_row` pair.

A field is one column of the same name, typed from its annotation: `str`,
`int`, `float`, `bool`, a `Literal` (the type of its values), `X | None`
(nullable X), `list[X]`. Markers in `Annotated[...]` change that for one field:

    Flat("diff_")   a nested model's fields become columns `diff_created`, ...
    Json()          the value as JSON text (chat messages, free-form objects)
    Apart()         no column: the field is a table of its own (steps, checks)
    Derived(name, type, fn)    also a column `name` = fn(value), of Python
                               type `type`, right after the field's own columns

Columns keep the model's field order. Reading a row back, a column the file
lacks leaves its field to the model's default, so files written before a
field existed still load (and a required field that is missing fails
validation, naming it).
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Union

import polars as pl
from pydantic import BaseModel


@dataclass(frozen=True)
class Flat:
    prefix: str = ""


@dataclass(frozen=True)
class Json:
    pass


@dataclass(frozen=True)
class Apart:
    pass


@dataclass(frozen=True)
class Derived:
    name: str
    type: Any  # the column's Python type (int, list[str], ...)
    fn: Callable[[Any], Any]


def count(name: str) -> Derived:
    """A column `name` holding the length of a list field."""
    return Derived(name, int, len)


_SCALARS = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean}


def _marker(field: Any, kind: type) -> Any:
    return next((m for m in field.metadata if isinstance(m, kind)), None)


def _dtype(ann: Any, where: str) -> Any:
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _dtype(inner[0], where)
    elif ann in _SCALARS:
        return _SCALARS[ann]
    elif origin is Literal and len({type(a) for a in args}) == 1 and type(args[0]) in _SCALARS:
        return _SCALARS[type(args[0])]
    elif origin is list and len(args) == 1:
        return pl.List(_dtype(args[0], where))
    raise TypeError(f"{where}: no column type for {ann!r} (mark it Json(), Flat() or Apart())")


def polars_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Column name -> Polars type of `model`'s table form."""
    schema: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        flat = _marker(field, Flat)
        if flat is not None:
            schema.update({flat.prefix + k: v for k, v in polars_schema(field.annotation).items()})
        elif _marker(field, Json) is not None:
            schema[name] = pl.String
        elif _marker(field, Apart) is None:
            schema[name] = _dtype(field.annotation, f"{model.__name__}.{name}")
        schema.update((d.name, _dtype(d.type, d.name)) for d in field.metadata if isinstance(d, Derived))
    return schema


def to_row(record: BaseModel) -> dict[str, Any]:
    """`record` as one row of its table."""
    row: dict[str, Any] = {}
    for name, field in type(record).model_fields.items():
        value = getattr(record, name)
        flat = _marker(field, Flat)
        if flat is not None:
            row.update({flat.prefix + k: v for k, v in to_row(value).items()})
        elif _marker(field, Json) is not None:
            row[name] = None if value is None else json.dumps(_plain(value), ensure_ascii=False)
        elif _marker(field, Apart) is None:
            row[name] = value
        row.update((d.name, d.fn(value)) for d in field.metadata if isinstance(d, Derived))
    return row


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def from_row(model: type[BaseModel], row: dict[str, Any]) -> dict[str, Any]:
    """The field values a row holds, for `model.model_validate` (Apart fields
    are the caller's: they come from their own table)."""
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        flat = _marker(field, Flat)
        if flat is not None:
            inner = {k[len(flat.prefix) :]: v for k, v in row.items() if k.startswith(flat.prefix)}
            values[name] = from_row(field.annotation, inner)
        elif _marker(field, Apart) is not None or name not in row:
            continue
        elif _marker(field, Json) is not None:
            values[name] = None if row[name] is None else json.loads(row[name])
        else:
            values[name] = row[name]
    return values
