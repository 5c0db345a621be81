"""Row records of the training datasets (format: docs/formats/datasets.md).

Every row starts with the lineage columns, so any training sample can be
traced back to its task, trajectory, policy weights, verifier and report.
Chat columns (`messages`, `prompt`, `chosen`, `rejected`, `completion`) are
Arrow lists of message structs in TRL's conversational tool format, and
`tools` a list of JSON schemas, so `datasets.load_dataset("parquet", ...)` and
`trl sft` read them as they are. Tool-call `arguments` and tool schemas are
stored with the Arrow JSON type (Hugging Face `datasets.Json`): as plain
structs, the arguments of different tools would be merged into one struct
type and null-filled, which changes what the chat template renders. The
Parquet schema is derived from the row models below (`features`), never
written by hand.
"""

from __future__ import annotations

import json
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from touchstone.atomic import atomic_path
from touchstone.data.credit import CreditConfig


class ProposerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    invalid_penalty: float = Field(
        -0.5,
        le=0,
        description="Proposer reward of a proposal that is not a kept task (invalid, duplicate, contaminated).",
    )


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a misspelled key is an error, not a silent default

    credit: CreditConfig = Field(default_factory=CreditConfig)
    keep_per_task: int = Field(2, ge=1, description="SFT: keep the best k accepted runs per task.")
    max_tokens: int = Field(16384, ge=1, description="Drop rows longer than this many tokens.")
    max_pairs_per_task: int = Field(4, ge=1, description="DPO: at most this many pairs per task (proposer: per group).")
    proposer: ProposerConfig = Field(default_factory=ProposerConfig)
    include_unguarded: bool = Field(
        False,
        description="Keep runs whose tests ran with candidate code in the "
        "judging process (report guard 'oracle' or 'in_process'; 'none' in earlier reports).",
    )


class Lineage(BaseModel):
    trajectory_id: str
    task_id: str
    task_hash: str
    round: str | None
    policy: str
    checkpoint_hash: str | None
    verifier_version: str
    report_id: str
    environment_digest: str | None = None  # the task environment the run was verified in (None: base)
    # solver: an agent run on a task; proposer: a self-play proposal episode, whose
    # trajectory_id and task_id are the proposal's id (touchstone.data.proposer)
    role: Literal["solver", "proposer"] = "solver"


class TrlToolFunction(BaseModel):
    name: str
    arguments: Any  # a JSON object as the model wrote it (a string only where it was not valid JSON)


class TrlToolCall(BaseModel):
    id: str | None = None
    type: Literal["function"] = "function"
    function: TrlToolFunction


class TrlMessage(BaseModel):
    """One chat message in TRL's conversational tool format."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str
    tool_calls: list[TrlToolCall] | None = None
    tool_call_id: str | None = None


class SFTRow(Lineage):
    messages: list[TrlMessage]
    tools: list[dict[str, Any]]  # the tools' JSON schemas (OpenAI format)
    turn_weights: list[float]  # one per assistant turn (credit.sft_weights)
    n_turns: int
    n_tokens: int


class RLRow(Lineage):
    messages: list[TrlMessage]
    tools: list[dict[str, Any]]
    turns: str  # JSON list of the recorded TurnRecords (exact prompt/completion ids, logprobs)
    has_token_ids: bool
    reward: float
    group_advantage: float
    turn_advantages: list[float]
    n_turns: int
    n_tokens: int


class DPORow(Lineage):
    """Lineage columns are the chosen run's; the rejected run is named too."""

    rejected_trajectory_id: str
    rejected_report_id: str
    rejected_hack: bool
    prompt: list[TrlMessage]  # the messages before the first assistant turn
    chosen: list[TrlMessage]  # the messages from the first assistant turn on
    rejected: list[TrlMessage]
    tools: list[dict[str, Any]]


class KTORow(Lineage):
    prompt: list[TrlMessage]
    completion: list[TrlMessage]
    label: bool  # True = accepted
    tools: list[dict[str, Any]]


_SCALARS = {str: "string", int: "int64", float: "float64", bool: "bool"}


def _feature(ann: Any):
    """The `datasets` feature of one annotation: scalars, lists, nested
    models as structs, `Any`/`dict` as JSON; `X | None` is nullable X."""
    from datasets import Json, List, Value  # no import cost for readers of the models alone

    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin in (Union, types.UnionType):
        (ann,) = [a for a in args if a is not type(None)]
        return _feature(ann)
    if ann in _SCALARS:
        return Value(_SCALARS[ann])
    if origin is Literal:
        return Value(_SCALARS[type(args[0])])
    if origin is list:
        return List(_feature(args[0]))
    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return {name: _feature(f.annotation) for name, f in ann.model_fields.items()}
    if ann is Any or origin is dict or ann is dict:
        return Json()
    raise TypeError(f"no Parquet column type for {ann!r}")


def features(model: type[BaseModel]):
    """`datasets.Features` of a row model: the one definition of each Parquet schema."""
    from datasets import Features

    return Features({name: _feature(f.annotation) for name, f in model.model_fields.items()})


def write_rows(rows: list[BaseModel], model: type[BaseModel], path: str | Path) -> None:
    """Rows -> Parquet at `path`, atomically (a temp file renamed into place),
    with the Hugging Face features in the file's metadata so
    `datasets.load_dataset` decodes the JSON columns back into objects."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Dataset

    path = Path(path)
    feats = features(model)
    if rows:  # encoded by `datasets`, written by pyarrow (`Dataset.to_parquet`'s size estimate
        # fails on JSON columns inside null lists)
        table = Dataset.from_list([r.model_dump() for r in rows], features=feats).data.table
        table = table.replace_schema_metadata(feats.arrow_schema.metadata)
    else:  # `datasets` cannot build an empty JSON column; the schema alone is written
        table = pa.Table.from_batches([], schema=feats.arrow_schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def _decode(value: Any, feature: Any) -> Any:
    from datasets import Json, List

    if value is None:
        return None
    if isinstance(feature, Json):
        return json.loads(value) if isinstance(value, str) else value
    if isinstance(feature, List):
        return [_decode(v, feature.feature) for v in value]
    if isinstance(feature, dict):
        return {k: _decode(value.get(k), f) for k, f in feature.items()}
    return value


def read_rows(path: str | Path, model: type[BaseModel]) -> list[dict[str, Any]]:
    """Rows of a dataset file as plain dicts, JSON columns decoded (what
    `datasets.load_dataset` gives, without its cache)."""
    import pyarrow.parquet as pq

    feats = features(model)
    return [{k: _decode(v, feats[k]) for k, v in row.items()} for row in pq.read_table(path).to_pylist()]
