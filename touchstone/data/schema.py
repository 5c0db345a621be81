"""Row records of the training datasets (format: docs/formats/datasets.md).

Every row starts with the lineage columns, so any training sample can be
traced back to its task, trajectory, policy weights, verifier and report.
Chat columns (`messages`, `tools`, `prompt`, `chosen`, ...) are JSON strings:
as Arrow structs, tool-call `arguments` of different tools would be merged
into one struct type and filled with nulls, which changes what the chat
template renders. `json.loads` gives TRL's conversational format back.
"""

from __future__ import annotations

from typing import Any

import polars as pl
from pydantic import BaseModel, Field

from touchstone.data.credit import CreditConfig


class DataConfig(BaseModel):
    credit: CreditConfig = Field(default_factory=CreditConfig)
    keep_per_task: int = Field(2, ge=1, description="SFT: keep the best k accepted runs per task.")
    max_tokens: int = Field(16384, ge=1, description="Drop rows longer than this many tokens.")
    max_pairs_per_task: int = Field(4, ge=1, description="DPO: at most this many pairs per task.")
    include_unguarded: bool = Field(False, description="Keep runs whose tests ran with candidate code in the "
                                    "judging process and no oracle passed (report guard 'none').")


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


class SFTRow(Lineage):
    messages: str  # JSON, TRL conversational tool format
    tools: str  # JSON list of tool schemas
    turn_weights: list[float]  # one per assistant turn (credit.sft_weights)
    n_turns: int
    n_tokens: int


class RLRow(Lineage):
    messages: str
    tools: str
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
    prompt: str  # JSON messages before the first assistant turn
    chosen: str  # JSON messages from the first assistant turn on
    rejected: str
    tools: str


class KTORow(Lineage):
    prompt: str
    completion: str
    label: bool  # True = accepted
    tools: str


_POLARS = {str: pl.String, int: pl.Int64, float: pl.Float64, bool: pl.Boolean, list[float]: pl.List(pl.Float64)}


def polars_schema(model: type[BaseModel]) -> dict[str, Any]:
    """Column types from the row model (`str | None` is a nullable string)."""
    schema = {}
    for name, field in model.model_fields.items():
        ann = field.annotation
        base = next((t for t in getattr(ann, "__args__", ()) if t is not type(None)), ann) if ann not in _POLARS else ann
        schema[name] = _POLARS[base]
    return schema


def frame(rows: list[BaseModel], model: type[BaseModel]) -> pl.DataFrame:
    return pl.DataFrame([r.model_dump() for r in rows], schema=polars_schema(model), orient="row")
