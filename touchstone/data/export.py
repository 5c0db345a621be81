"""A built dataset in the JSONL shapes other tools read:

- `trl`: TRL's conversational rows as they are (tool-call arguments as objects);
  every dataset kind (sft, rl: `messages`; dpo: `prompt/chosen/rejected`; kto:
  `prompt/completion/label`), plus `tools`.
- `openai`: OpenAI's chat fine-tuning format, `{"messages", "tools"}` with
  tool-call arguments as JSON strings (conversation datasets only).
- `sharegpt`: `{"conversations": [{"from", "value"}], "tools", "system"}` with
  `function_call` / `observation` turns, as LLaMA-Factory reads tool data
  (conversation datasets only).

Lineage columns are kept in every row under `lineage`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from touchstone.episode.trajectory import atomic_write_text
from touchstone.data.schema import DPORow, KTORow, Lineage, TrlMessage, RLRow, SFTRow, read_rows

ExportFormat = Literal["trl", "openai", "sharegpt"]
MODELS = {"sft": SFTRow, "rl": RLRow, "dpo": DPORow, "kto": KTORow}
CONVERSATIONS = ("sft", "rl")


class ExportError(ValueError):
    """A format that cannot express the dataset, or a dataset that is not there."""


def _clean(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if v is not None}


def _openai_message(message: dict[str, Any]) -> dict[str, Any]:
    out = _clean(message)
    for call in out.get("tool_calls") or []:
        args = call["function"]["arguments"]
        call["function"]["arguments"] = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return out


def _sharegpt(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    system, turns = "", []
    for m in messages:
        if m["role"] == "system":
            system = m["content"]
        elif m["role"] == "user":
            turns.append({"from": "human", "value": m["content"]})
        elif m["role"] == "tool":
            turns.append({"from": "observation", "value": m["content"]})
        elif m.get("tool_calls"):
            for call in m["tool_calls"]:  # one function_call turn per call, as LLaMA-Factory expects
                fn = call["function"]
                turns.append(
                    {
                        "from": "function_call",
                        "value": json.dumps({"name": fn["name"], "arguments": fn["arguments"]}, ensure_ascii=False),
                    }
                )
        else:
            turns.append({"from": "gpt", "value": m["content"]})
    return system, turns


def export_row(row: dict[str, Any], dataset: str, fmt: ExportFormat) -> dict[str, Any]:
    # a file built before a lineage column existed (e.g. `role`) reads as its default
    lineage = {k: row[k] if k in row else f.default for k, f in Lineage.model_fields.items()}
    if fmt == "trl":
        fields = {k: f.annotation for k, f in MODELS[dataset].model_fields.items() if k not in Lineage.model_fields}
        body = {k: [_clean(m) for m in row[k]] if ann == list[TrlMessage] else row[k] for k, ann in fields.items()}
        return {**body, "lineage": lineage}
    if dataset not in CONVERSATIONS:
        raise ExportError(
            f"--format {fmt} holds conversations only: export sft or rl, or use --format trl for {dataset}"
        )
    if fmt == "openai":
        return {"messages": [_openai_message(m) for m in row["messages"]], "tools": row["tools"], "lineage": lineage}
    system, turns = _sharegpt(row["messages"])
    return {
        "conversations": turns,
        "system": system,
        "tools": json.dumps(row["tools"], ensure_ascii=False),
        "lineage": lineage,
    }


def export_dataset(data_dir: str | Path, dataset: str, fmt: ExportFormat, out: str | Path) -> int:
    """Write `out` (JSONL, atomically) from DATA_DIR/<dataset>.parquet; returns rows written."""
    if dataset not in MODELS:
        raise ExportError(f"unknown dataset {dataset!r}: one of {', '.join(MODELS)}")
    path = Path(data_dir) / f"{dataset}.parquet"
    if not path.is_file():
        raise ExportError(f"{path}: not found; build it with `touchstone data build`")
    rows = [export_row(r, dataset, fmt) for r in read_rows(path, MODELS[dataset])]
    atomic_write_text(Path(out), "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return len(rows)
